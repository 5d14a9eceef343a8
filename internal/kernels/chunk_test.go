package kernels

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/recording/memhash"
)

// TestChunkSizeOfCAndCUDA holds the C and CUDA copies of the chunk size to
// memhash.ChunkSize, the format's: CHUNK in src/hash.cu (the kernel's
// block-per-chunk split) and GP_CHUNK in the agent's C (its shadow and
// staging sizes). The Go build cannot see either, so the test reads them.
func TestChunkSizeOfCAndCUDA(t *testing.T) {
	for _, c := range []struct{ name, dir, pattern string }{
		{"CHUNK", "src", `(?m)^\s*#\s*define\s+CHUNK\s+(\w+)`},
		{"GP_CHUNK", filepath.Join("..", "agent"), `(?m)(?:#\s*define\s+GP_CHUNK\s+|\bGP_CHUNK\s*=\s*)(\w+)`},
	} {
		defs := definitions(t, c.dir, c.pattern)
		if len(defs) != 1 {
			t.Errorf("%s: %d definitions under %s (%v), want one", c.name, len(defs), c.dir, defs)
			continue
		}
		if defs[0].value != memhash.ChunkSize {
			t.Errorf("%s: %s is %d, memhash.ChunkSize %d: the C side must follow the format", defs[0].file, c.name, defs[0].value, memhash.ChunkSize)
		}
	}
}

// definition is a C constant's value and the file that sets it.
type definition struct {
	file  string
	value uint64
}

// definitions finds the integer values the C, C++ and CUDA files under dir
// give the constant that pattern's first group captures.
func definitions(t *testing.T, dir, pattern string) []definition {
	t.Helper()
	re := regexp.MustCompile(pattern)
	var defs []definition
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch filepath.Ext(path) {
		case ".c", ".h", ".cu", ".cuh":
		default:
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			v, err := strconv.ParseUint(strings.TrimRight(m[1], "uUlL"), 0, 64)
			if err != nil {
				t.Errorf("%s: %q is not an integer this test reads", path, m[0])
				continue
			}
			defs = append(defs, definition{path, v})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return defs
}
