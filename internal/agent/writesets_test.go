package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// gpurr's demo kernels: saxpy stores through y (parameter 3, bytes 16-24) only; its x and its
// scalars are proved read-only. A module whose PTX does not parse proves nothing.
func TestModuleWriteSets(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "kernels", "ptx", "demo.ptx"))
	if err != nil {
		t.Fatal(err)
	}
	sets := moduleWriteSets(text)
	ws := sets["gpurr_demo_saxpy"]
	if ws == nil {
		t.Fatalf("no write set for saxpy: %v", sets)
	}
	// (n u32 @0, a f32 @4, x u64 @8, y u64 @16)
	for _, c := range []struct {
		off, size int
		write     bool
	}{{0, 4, false}, {4, 4, false}, {8, 8, false}, {16, 8, true}} {
		if got := ws.MayWriteAt(c.off, c.size); got != c.write {
			t.Errorf("saxpy bytes %d-%d: may write %v, want %v", c.off, c.off+c.size, got, c.write)
		}
	}
	if moduleWriteSets([]byte("not PTX")) != nil {
		t.Error("a module that is not PTX proved something")
	}
}
