package chunkstore

import (
	"math/rand/v2"
	"testing"

	"github.com/gpurr/gpurr/recording/memhash"
)

var benchCompressions = []Compression{CompressNone, CompressS2, CompressZstdFastest, CompressZstdDefault}

// BenchmarkCodec compresses and decompresses 16 MiB of each kind of GPU
// data, chunk by chunk, on one goroutine: MB/s is per core. ratio is raw
// bytes over stored bytes as the store keeps them (a chunk that compresses
// by less than 1/minSaving stays raw); raw% is the share of chunks kept raw.
// bench/NOTES.md ("chunk store codec") records a run.
func BenchmarkCodec(b *testing.B) {
	const size = 16 << 20
	for _, kind := range gpuKinds {
		data := kind.make(rand.New(rand.NewPCG(1, 2)), size)
		for _, comp := range benchCompressions {
			c, err := newCompressor(comp)
			if err != nil {
				b.Fatal(err)
			}
			stored := make([][]byte, 0, size/memhash.ChunkSize)
			codecs := make([]Codec, 0, size/memhash.ChunkSize)
			var storedBytes, rawChunks int
			for off := 0; off < size; off += memhash.ChunkSize {
				out, codec := c.compress(nil, data[off:off+memhash.ChunkSize])
				if codec == CodecRaw {
					out = data[off : off+memhash.ChunkSize]
					rawChunks++
				}
				stored = append(stored, out)
				codecs = append(codecs, codec)
				storedBytes += len(out)
			}
			report := func(b *testing.B) {
				b.SetBytes(size)
				b.ReportMetric(float64(size)/float64(storedBytes), "ratio")
				b.ReportMetric(100*float64(rawChunks)/float64(len(stored)), "raw%")
			}
			b.Run(kind.name+"/"+comp.String()+"/encode", func(b *testing.B) {
				defer report(b)
				buf := make([]byte, 0, 2*memhash.ChunkSize)
				for b.Loop() {
					for off := 0; off < size; off += memhash.ChunkSize {
						c.compress(buf, data[off:off+memhash.ChunkSize])
					}
				}
			})
			b.Run(kind.name+"/"+comp.String()+"/decode", func(b *testing.B) {
				defer report(b)
				var d decompressor
				defer d.close()
				for b.Loop() {
					for i, s := range stored {
						if _, err := d.decode(codecs[i], s, memhash.ChunkSize); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
