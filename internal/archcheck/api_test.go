// Package archcheck holds the checks of the code's shape that docs/ARCHITECTURE.md states:
// the layers and what each may import, and the public Go API; and that every relative link of
// README.md, docs/ and bench/ leads to a file and heading of the tree (links_test.go).
//
// The public API is the packages under recording/ (the recording format's reader, writer and
// identities). Every exported name and its type is listed in api/public.txt; the test fails
// when the code and the list part ways, so that a change to the public API is always
// deliberate and seen in review:
//
//	go test ./internal/archcheck -update   # accept additions (and deliberate breaks)
//
// A line that disappears or changes breaks users of the package; a new line does not.
package archcheck

import (
	"flag"
	"fmt"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

var update = flag.Bool("update", false, "rewrite api/public.txt from the code")

const module = "github.com/gpurr/gpurr/"

// publicAPI lists each exported declaration of the public packages, one line each, sorted.
func publicAPI(t *testing.T) []string {
	pkgs := load(t, packages.NeedName|packages.NeedTypes, false, module+"recording/...")
	var lines []string
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			t.Fatalf("%s: %v", p.PkgPath, p.Errors[0])
		}
		if strings.Contains(p.PkgPath, "/internal") {
			continue
		}
		short := strings.TrimPrefix(p.PkgPath, module)
		qual := func(other *types.Package) string {
			if other == p.Types {
				return ""
			}
			return strings.TrimPrefix(other.Path(), module)
		}
		scope := p.Types.Scope()
		for _, name := range scope.Names() {
			obj := scope.Lookup(name)
			if !obj.Exported() {
				continue
			}
			tn, ok := obj.(*types.TypeName)
			if !ok || tn.IsAlias() {
				lines = append(lines, short+": "+types.ObjectString(obj, qual))
				continue
			}
			// A struct's unexported fields are not API: its exported ones get lines of their own.
			under := types.TypeString(tn.Type().Underlying(), qual)
			if _, isStruct := tn.Type().Underlying().(*types.Struct); isStruct {
				under = "struct"
			}
			lines = append(lines, fmt.Sprintf("%s: type %s %s", short, name, under))
			named, _ := tn.Type().(*types.Named)
			if named == nil {
				continue
			}
			for i := 0; i < named.NumMethods(); i++ {
				if m := named.Method(i); m.Exported() {
					lines = append(lines, fmt.Sprintf("%s: method (%s) %s%s", short, name, m.Name(),
						strings.TrimPrefix(types.TypeString(m.Type(), qual), "func")))
				}
			}
			if st, ok := named.Underlying().(*types.Struct); ok {
				for i := 0; i < st.NumFields(); i++ {
					if f := st.Field(i); f.Exported() {
						lines = append(lines, fmt.Sprintf("%s: field %s.%s %s", short, name, f.Name(),
							types.TypeString(f.Type(), qual)))
					}
				}
			}
		}
	}
	slices.Sort(lines)
	return lines
}

func TestPublicAPI(t *testing.T) {
	got := publicAPI(t)
	for _, l := range got {
		if strings.Contains(l, "internal/") {
			t.Errorf("public API uses an internal type: %s", l)
		}
	}
	path := filepath.Join("..", "..", "api", "public.txt")
	if *update {
		if err := os.WriteFile(path, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/archcheck -update)", err)
	}
	want := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	have := map[string]bool{}
	for _, l := range got {
		have[l] = true
	}
	listed := map[string]bool{}
	for _, l := range want {
		listed[l] = true
		if !have[l] {
			t.Errorf("public API removed or changed (breaks users; if deliberate, run -update): %s", l)
		}
	}
	for _, l := range got {
		if !listed[l] {
			t.Errorf("public API added, not yet in api/public.txt (run go test ./internal/archcheck -update): %s", l)
		}
	}
}
