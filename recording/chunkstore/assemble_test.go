package chunkstore

import (
	"bytes"
	"testing"

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
