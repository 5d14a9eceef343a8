package recording

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// BenchmarkFrameOfHashes is what a frame of 1 MiB of random hashes (hash mode's chunk
// hashes: 64K chunks of 64 KiB, 4 GiB hashed) costs to encode, compressed and raw.
func BenchmarkFrameOfHashes(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	payload := make([]byte, 1<<20)
	for i := 0; i < len(payload); i += 8 {
		binary.LittleEndian.PutUint64(payload[i:], rng.Uint64())
	}
	var dst []byte
	for _, c := range []struct {
		name   string
		encode func([]byte, []byte) []byte
	}{{"zstd", appendFrame}, {"raw", appendRawFrame}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			for range b.N {
				dst = c.encode(dst[:0], payload)
			}
		})
	}
}
