package recording_test

import (
	"testing"

	"github.com/gpurr/gpurr/recording"
)

// TestKernelIdentity checks KernelIdentity against values worked out
// separately (FNV-1a 64 by hand, docs/format.md), so that a change of the
// rule, which would part every recording from the ones made before it,
// cannot pass unnoticed.
func TestKernelIdentity(t *testing.T) {
	for _, c := range []struct {
		module, name string
		want         uint64
	}{
		{"", "", 0xaf64724c8602eb6e},
		{"", "_Z10add_kernelPfPKfS1_i", 0xa499371b62a7ad22},
		{"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "triton_poi_fused_add_mul_0", 0x8c315208d584c8b7},
	} {
		if got := recording.KernelIdentity(c.module, c.name); got != c.want {
			t.Errorf("KernelIdentity(%q, %q) = %#016x, want %#016x", c.module, c.name, got, c.want)
		}
	}
}
