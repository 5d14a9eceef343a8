package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A Triton cache as Triton lays it out: a folder per compiled kernel with NAME.cubin and
// NAME.ptx. The module whose bytes are a cached cubin gets that folder's PTX; one compiled
// after the first look is found too; other modules and other bytes get none.
func TestTritonCachePTX(t *testing.T) {
	root := t.TempDir()
	t.Setenv("TRITON_CACHE_DIR", root)
	put := func(dir, name string, cubin, ptx []byte) string {
		d := filepath.Join(root, dir)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name+".cubin"), cubin, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name+".ptx"), ptx, 0o600); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(cubin)
		return hex.EncodeToString(sum[:])
	}
	a := put("AAAA", "triton_poi_fused_add_0", []byte("cubin a"), []byte("// ptx a"))
	put("BBBB", "triton_poi_fused_add_0", []byte("cubin a, another build"), []byte("// ptx a2"))
	c := newTritonCache()
	if got := c.ptx(a, []string{"triton_poi_fused_add_0"}); !bytes.Equal(got, []byte("// ptx a")) {
		t.Errorf("cached kernel: PTX %q", got)
	}
	if got := c.ptx(a, []string{"other_name"}); got != nil {
		t.Errorf("a module defining other names got PTX %q", got)
	}
	unknown := sha256.Sum256([]byte("cuBLAS"))
	if got := c.ptx(hex.EncodeToString(unknown[:]), []string{"triton_poi_fused_add_0"}); got != nil {
		t.Errorf("bytes no cached cubin has got PTX %q", got)
	}
	// Triton compiles another kernel later in the run: the cache's folder changes, and the
	// next module's lookup lists it.
	time.Sleep(10 * time.Millisecond) // a new modification time for the root folder
	b := put("CCCC", "triton_red_fused_sum_1", []byte("cubin b"), []byte("// ptx b"))
	if got := c.ptx(b, []string{"triton_red_fused_sum_1"}); !bytes.Equal(got, []byte("// ptx b")) {
		t.Errorf("kernel compiled after the first listing: PTX %q", got)
	}
	var none *tritonCache
	if none.ptx(a, []string{"x"}) != nil {
		t.Error("no cache, yet PTX")
	}
}
