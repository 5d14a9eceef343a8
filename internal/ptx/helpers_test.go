package ptx

import (
	"os"
	"path/filepath"
	"testing"
)

// demoPTX is gpurr's own demo module, compiled by nvcc.
const demoPTX = "../kernels/ptx/demo.ptx"

// loadFile reads and parses a PTX file.
func loadFile(t testing.TB, path string) ([]byte, *Module) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(src)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return src, m
}

func parseFile(t testing.TB, path string) *Module {
	t.Helper()
	_, m := loadFile(t, path)
	return m
}

// testdataFiles are the hand-written PTX files, each with its want lines.
func testdataFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/*.ptx")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	return files
}

// ptxFiles are every PTX file the tests know: the hand-written ones and
// gpurr's own kernels, as nvcc wrote them.
func ptxFiles(t testing.TB) []string {
	return append(testdataFiles(t), demoPTX, "../kernels/ptx/hash.ptx")
}
