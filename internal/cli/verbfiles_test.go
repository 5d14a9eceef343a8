package cli

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The files of this package are of two kinds (docs/ARCHITECTURE.md, "Adding a verb"):
//
//   - a verb file declares a verb's command, a function newXxxCmd returning *cobra.Command
//     (newRootCmd, the root that joins the verbs, is none);
//   - a shared file declares none.
//
// A verb file uses the names it declares, those of shared files and those of other
// packages: never a name another verb file declares. What two verbs both need lives in a
// shared file or, better, in the package below that does the work. A shared file uses no
// verb file's name either, but the verbs' constructors, which root.go joins.

// verbConstructor is the name of a verb's command constructor.
var verbConstructor = regexp.MustCompile(`^new[A-Z]\w*Cmd$`)

// verbFiles names the files, of those given by name, that declare a verb's command.
func verbFiles(files map[string]*ast.File) map[string]bool {
	verbs := map[string]bool{}
	for name, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !verbConstructor.MatchString(fn.Name.Name) || fn.Name.Name == "newRootCmd" {
				continue
			}
			if res := fn.Type.Results; res != nil && len(res.List) == 1 && types.ExprString(res.List[0].Type) == "*cobra.Command" {
				verbs[name] = true
			}
		}
	}
	return verbs
}

// majorVersion is the last element of a module path of major version 2 or more: .../v3.
var majorVersion = regexp.MustCompile(`^v[0-9]+$`)

// emptyImporter gives every import as an empty package: the check follows the names this
// package declares, so the others' contents are not needed (their uses resolve to nothing,
// and the type checker's complaints about them are ignored).
type emptyImporter struct{}

func (emptyImporter) Import(importPath string) (*types.Package, error) {
	name := path.Base(importPath)
	if majorVersion.MatchString(name) { // .../progressbar/v3
		name = path.Base(path.Dir(importPath))
	}
	return types.NewPackage(importPath, name), nil
}

// verbFileCrossings reads the package's non-test Go files in dir and returns, one line each,
// every use in a verb file of a name another verb file declares, and every use in a shared
// file of a name a verb file declares (but a verb's constructor); and the verb files found.
func verbFileCrossings(dir string) (crossings []string, verbs []string, err error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, nil, err
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	var list []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		files[filepath.Base(p)] = f
		list = append(list, f)
	}
	isVerb := verbFiles(files)
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: emptyImporter{}, Error: func(error) {}}
	pkg, _ := conf.Check("cli", fset, list, info)
	seen := map[string]bool{}
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		at, decl := fset.Position(id.Pos()), fset.Position(obj.Pos())
		from, to := filepath.Base(at.Filename), filepath.Base(decl.Filename)
		if from == to || !isVerb[to] || !isVerb[from] && verbConstructor.MatchString(obj.Name()) {
			continue
		}
		kind := "shared file"
		if isVerb[from] {
			kind = "verb file"
		}
		line := fmt.Sprintf("%s (a %s) uses %s, which verb file %s declares", from, kind, obj.Name(), to)
		if !seen[line] {
			seen[line] = true
			crossings = append(crossings, fmt.Sprintf("%s:%d: %s", from, at.Line, line))
		}
	}
	slices.Sort(crossings)
	for name := range isVerb {
		verbs = append(verbs, name)
	}
	slices.Sort(verbs)
	return crossings, verbs, nil
}

// No verb file uses another's names, and no shared file a verb file's.
func TestVerbFilesShareOnlyThroughSharedFiles(t *testing.T) {
	crossings, verbs, err := verbFileCrossings(".")
	if err != nil {
		t.Fatal(err)
	}
	// The check finds the verbs it guards: every verb root.go adds has its file.
	if len(verbs) < len(newRootCmd(nil, nil).Commands())-1 { // cobra's completion verb has none
		t.Fatalf("found %d verb files (%s), fewer than the verbs gpurr has", len(verbs), strings.Join(verbs, ", "))
	}
	for _, c := range crossings {
		t.Error(c)
	}
	if len(crossings) > 0 {
		t.Log("move what two verbs both need to a shared file (one without a newXxxCmd) or to the package below that does the work")
	}
}

// The check itself: a verb file that uses another's helper, and a shared file that uses a
// verb file's, are found; a verb's constructor named in a shared file and a helper of a
// shared file are not.
func TestVerbFileCrossingsFound(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"root.go":   "package cli\nimport \"github.com/spf13/cobra\"\nfunc newRootCmd() *cobra.Command { r := newACmd(); r.AddCommand(newBCmd()); return r }\n",
		"a.go":      "package cli\nimport \"github.com/spf13/cobra\"\nfunc newACmd() *cobra.Command { helper(); return shared(t{}.m()) }\ntype t struct{}\nfunc (t) m() int { return 1 }\n",
		"b.go":      "package cli\nimport \"github.com/spf13/cobra\"\nfunc newBCmd() *cobra.Command { var x t; x.m(); return nil }\nfunc helper() {}\n",
		"shared.go": "package cli\nimport \"github.com/spf13/cobra\"\nfunc shared(int) *cobra.Command { helper(); return nil }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	crossings, verbs, err := verbFileCrossings(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"a.go:3: a.go (a verb file) uses helper, which verb file b.go declares",
		"b.go:3: b.go (a verb file) uses m, which verb file a.go declares",
		"b.go:3: b.go (a verb file) uses t, which verb file a.go declares",
		"shared.go:3: shared.go (a shared file) uses helper, which verb file b.go declares",
	}
	if !slices.Equal(crossings, want) || !slices.Equal(verbs, []string{"a.go", "b.go"}) {
		t.Errorf("verb files %q, crossings:\n%s\nwant:\n%s", verbs, strings.Join(crossings, "\n"), strings.Join(want, "\n"))
	}
}
