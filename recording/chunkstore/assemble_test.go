package chunkstore

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gpurr/gpurr/recording/memhash"
)

func TestAssemble(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	region := make([]byte, 2*memhash.ChunkSize+100)
	for i := range region {
		region[i] = byte(i*7 + i/memhash.ChunkSize)
	}
	_, sums := memhash.Hash(region)
	var hashes [][]byte
	for i, s := range sums {
		h := s.Bytes()
		hashes = append(hashes, h[:])
		if i == 1 {
			continue // chunk 1 "dropped while recording"
		}
		if err := w.Put(h, region[i*memhash.ChunkSize:min((i+1)*memhash.ChunkSize, len(region))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	got, missing, err := r.Assemble(hashes, memhash.ChunkSize, 0, uint64(len(region)))
	if err != nil || len(missing) != 1 || missing[0] != 1 {
		t.Fatalf("whole region: missing %v, err %v; want chunk 1 missing", missing, err)
	}
	want := bytes.Clone(region)
	clear(want[memhash.ChunkSize : 2*memhash.ChunkSize])
	if !bytes.Equal(got, want) {
		t.Error("whole region: bytes differ from the region with chunk 1 zeroed")
	}
	start, end := uint64(2*memhash.ChunkSize+10), uint64(len(region))
	got, missing, err = r.Assemble(hashes, memhash.ChunkSize, start, end)
	if err != nil || len(missing) != 0 || !bytes.Equal(got, region[start:end]) {
		t.Errorf("tail range: missing %v, err %v, equal %v", missing, err, bytes.Equal(got, region[start:end]))
	}
	if _, _, err := r.Assemble(hashes[:1], memhash.ChunkSize, 0, uint64(len(region))); err == nil {
		t.Error("too few chunks for the region: no error")
	}
}

// A hash list Assemble refuses (a hash not 16 bytes long) is refused before any chunk is read:
// Assemble returned with reads of the chunks before it still running, writing its result
// (missing) after it returned and reading the store after its caller may have closed it.
func TestAssembleRefusesBeforeReading(t *testing.T) {
	chunks := makeChunks(t, 11, 2)
	dir, _ := writeStore(t, Options{}, chunks)
	r := open(t, dir)
	read := make(chan [16]byte, len(chunks))
	getChunk = func(r *Reader, hash [16]byte) ([]byte, error) {
		read <- hash
		return r.Get(hash)
	}
	defer func() { getChunk = (*Reader).Get }()
	hashes := [][]byte{chunks[0].hash[:], chunks[1].hash[:], make([]byte, 15)}
	if _, _, err := r.Assemble(hashes, memhash.ChunkSize, 0, 3*memhash.ChunkSize); err == nil || !strings.Contains(err.Error(), "chunk 2: hash of 15 bytes") {
		t.Errorf("Assemble = %v, want chunk 2's hash refused", err)
	}
	select {
	case h := <-read:
		t.Errorf("chunk %x read after Assemble refused the hash list", h)
	case <-time.After(100 * time.Millisecond): // a read left running comes well within this
	}
}
