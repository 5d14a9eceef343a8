package nanscan

import (
	"testing"

	"github.com/gpurr/gpurr/internal/dtype"
)

// BenchmarkCount decodes one 64 KiB chunk of f32 activations as f32, bf16 and f16, as nan's
// default does for every distinct snapshotted chunk.
func BenchmarkCount(b *testing.B) {
	types, _ := dtype.ParseList("f32,bf16,f16")
	chunk := f32bytes(normal(1 << 14))
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		Count(chunk, types)
	}
}
