package chunkstore

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"

	"github.com/gpurr/gpurr/recording/memhash"
)

// BenchmarkPut feeds a Writer 64 KiB chunks of one kind of GPU data (or of
// all kinds in turn) from GOMAXPROCS goroutines, with default options, and
// every chunk new (no duplicates). The pack is /dev/null, so MB/s is what
// the pipeline (copy, compress, checksum, one write call per entry)
// sustains on this machine's cores; "mixed-disk" writes a real pack in the
// test's temporary folder, bounded by that disk once the page cache fills.
func BenchmarkPut(b *testing.B) {
	const perKind = 64
	r := rand.New(rand.NewPCG(3, 4))
	var all [][]byte
	kinds := map[string][][]byte{}
	for _, k := range gpuKinds {
		for range perKind {
			c := k.make(r, memhash.ChunkSize)
			kinds[k.name] = append(kinds[k.name], c)
			all = append(all, c)
		}
	}
	run := func(b *testing.B, chunks [][]byte, disk bool) {
		w, err := Create(b.TempDir(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		if !disk {
			null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				b.Skip(err)
			}
			w.pack.Close()
			w.pack = null // before any Put; the pack never fills up
			w.opts.PackBytes = 1 << 62
		}
		var next atomic.Uint64
		b.SetBytes(memhash.ChunkSize)
		b.RunParallel(func(pb *testing.PB) {
			var hash [16]byte
			for pb.Next() {
				n := next.Add(1)
				binary.LittleEndian.PutUint64(hash[:], n) // a distinct name: the writer does not check it
				if err := w.Put(hash, chunks[n%uint64(len(chunks))]); err != nil {
					b.Error(err)
					return
				}
			}
		})
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		st := w.Stats()
		b.ReportMetric(float64(st.RawBytes)/float64(st.StoredBytes), "ratio")
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("mixed", func(b *testing.B) { run(b, all, false) })
	for _, k := range gpuKinds {
		b.Run(k.name, func(b *testing.B) { run(b, kinds[k.name], false) })
	}
	b.Run("mixed-disk", func(b *testing.B) { run(b, all, true) })
}

// BenchmarkChunkCopy is what Put spends copying a 64 KiB chunk, so that the
// caller may reuse its buffer.
func BenchmarkChunkCopy(b *testing.B) {
	src := randomBytes(rand.New(rand.NewPCG(5, 6)), memhash.ChunkSize)
	dst := make([]byte, 0, entryHeaderSize+memhash.ChunkSize)
	b.SetBytes(memhash.ChunkSize)
	for b.Loop() {
		dst = append(dst[:entryHeaderSize], src...)
	}
}
