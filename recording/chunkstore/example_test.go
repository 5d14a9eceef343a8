package chunkstore_test

import (
	"bytes"
	"fmt"
	"log"
	"os"

	"github.com/gpurr/gpurr/recording/chunkstore"
	"github.com/gpurr/gpurr/recording/memhash"
)

// Store two snapshots of a 200000-byte buffer, of which one byte changed in
// between: only the changed chunk is stored again. Then read a chunk back.
func Example() {
	dir, err := os.MkdirTemp("", "gpurr-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	w, err := chunkstore.Create(dir, chunkstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, 200000)
	for i := range buf {
		buf[i] = byte(i / 1000)
	}
	snapshot := func() []memhash.Sum {
		_, chunks := memhash.Hash(buf)
		for i, h := range chunks {
			chunk := buf[i*memhash.ChunkSize : min((i+1)*memhash.ChunkSize, len(buf))]
			if err := w.Put(h.Bytes(), chunk); err != nil {
				log.Fatal(err)
			}
		}
		return chunks
	}
	snapshot()
	buf[150000]++
	second := snapshot()
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	st := w.Stats()
	fmt.Printf("stored %d chunks, %d duplicates skipped\n", st.Chunks, st.Duplicates)

	r, err := chunkstore.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	data, err := r.Get(second[2].Bytes())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d chunks in the store; chunk 2 of the second snapshot: %d bytes, same: %v\n",
		r.Len(), len(data), bytes.Equal(data, buf[2*memhash.ChunkSize:3*memhash.ChunkSize]))
	// Output:
	// stored 5 chunks, 3 duplicates skipped
	// 5 chunks in the store; chunk 2 of the second snapshot: 65536 bytes, same: true
}
