package archcheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// load runs packages.Load from the module root after reading every directory and Go source of
// the module from this process. packages.Load reads the sources in a `go list` child, which go
// test's cache does not see; without these reads a cached pass hides a changed API.
func load(t *testing.T, mode packages.LoadMode, tests bool, pattern string) []*packages.Package {
	t.Helper()
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "dist" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") || name == "go.mod" {
			_, err = os.ReadFile(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &packages.Config{Mode: mode, Dir: root, Tests: tests}
	pkgs, err := packages.Load(cfg, pattern)
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}
