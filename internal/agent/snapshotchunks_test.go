package agent

import (
	"bytes"
	"testing"

	"github.com/gpurr/gpurr/recording/chunkstore"
	"github.com/gpurr/gpurr/recording/memhash"
)

// snapshotRecorder is a test recorder storing snapshot chunks, as in --memory snapshot.
func snapshotRecorder(t *testing.T) (*recorder, *chunkstore.Writer) {
	t.Helper()
	r := testRecorder(t)
	store, err := chunkstore.Create(r.w.Dir(), chunkstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.mem.store = store
	return r, store
}

// filled is n bytes of b.
func filled(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

// A kernel on another stream writes chunk 1 of a snapshotted region after
// gpurr_memcap hashed it and before it copied it: the chunk store must hold
// the bytes that were copied under their own hash, the state name that
// hash (its region hash folded from it), and the kernel's hash, whose
// bytes were never stored, count as missing in a later state that still
// names it (a job the GPU ran before the writer saw the tear), not as a
// chunk the reader will find damaged or absent.
func TestSnapshotChunkNamedByStoredBytes(t *testing.T) {
	r, store := snapshotRecorder(t)
	const size = 2 * memhash.ChunkSize
	a0, a1, b1 := filled(0xa0, memhash.ChunkSize), filled(0xa1, memhash.ChunkSize), filled(0xb1, memhash.ChunkSize)
	h := func(d []byte) [16]byte { return memhash.Chunk(d).Bytes() }

	// Launch 1: the kernel hashed a0 and a1; a1 became b1 before the copy.
	v, res := cannedJob(1, 1, 7, false, []cannedJobRegion{{addr: 0x7f0000000000, size: size, allocID: 1,
		chunkHashes: [][16]byte{h(a0), h(a1)}}}, nil)
	cannedStaging(v, res, []uint32{0, 1}, [][]byte{a0, b1})
	jobToWriter(r, v)
	// Launch 2, hashed before the writer saw launch 1: chunk 1 is a1 again,
	// the shadow says unchanged, so nothing is copied.
	v, res = cannedJob(2, 2, 7, false, []cannedJobRegion{{addr: 0x7f0000000000, size: size, allocID: 1,
		chunkHashes: [][16]byte{h(a0), h(a1)}}}, nil)
	cannedStaging(v, res, nil, nil)
	jobToWriter(r, v)
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	if len(r.batch.Memory) != 2 {
		t.Fatalf("%d memory states, want 2", len(r.batch.Memory))
	}
	first := r.batch.Memory[0].Regions[0]
	ha0, hb1 := h(a0), h(b1)
	want := append(ha0[:], hb1[:]...)
	if !bytes.Equal(first.ChunkHashes, want) {
		t.Errorf("launch 1's chunk hashes %x, want those of the bytes copied %x", first.ChunkHashes, want)
	}
	if region := memhash.RegionOfEncoded(want, size).Bytes(); !bytes.Equal(first.Hash, region[:]) {
		t.Errorf("launch 1's region hash %x, want %x (folded from the stored chunks)", first.Hash, region)
	}
	if first.ChunksMissing != 0 || first.ChunksTransferred != 2 {
		t.Errorf("launch 1: %d chunks missing, %d transferred; want 0, 2", first.ChunksMissing, first.ChunksTransferred)
	}
	if second := r.batch.Memory[1].Regions[0]; second.ChunksMissing != 1 {
		t.Errorf("launch 2 names the never-stored hash of chunk 1: %d chunks missing, want 1", second.ChunksMissing)
	}
	if w := logs(r, "warn"); len(w) != 1 {
		t.Errorf("warnings %q, want one naming the chunk that changed while copied", w)
	}

	rd, err := chunkstore.Open(r.w.Dir())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for name := range rd.Hashes() {
		data, err := rd.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := h(data); got != name {
			t.Errorf("chunk %x holds bytes that hash to %x", name, got)
		}
		n++
	}
	if n != 2 || !rd.Has(h(b1)) || rd.Has(h(a1)) {
		t.Errorf("store holds %d chunks (b1's: %v, a1's: %v); want a0's and b1's", n, rd.Has(h(b1)), rd.Has(h(a1)))
	}
}

// chunkNames hashes on several cores for a large job: the names must be
// those of a serial pass, in order.
func TestChunkNamesParallel(t *testing.T) {
	datas := make([][]byte, 5*parallelChunks+3)
	for i := range datas {
		if i%7 != 3 { // a nil entry is a chunk the writer could not place: left unnamed
			datas[i] = filled(byte(i), memhash.ChunkSize-i)
		}
	}
	names := chunkNames(datas)
	for i, d := range datas {
		var want [16]byte
		if d != nil {
			want = memhash.Chunk(d).Bytes()
		}
		if names[i] != want {
			t.Fatalf("chunk %d named %x, want %x", i, names[i], want)
		}
	}
}

// BenchmarkChunkNames is the writer's cost of naming a snapshot job's copied chunks by their
// bytes: 256 chunks (16 MiB), spread over GOMAXPROCS cores.
func BenchmarkChunkNames(b *testing.B) {
	datas := make([][]byte, 256)
	for i := range datas {
		datas[i] = filled(byte(i), memhash.ChunkSize)
	}
	b.SetBytes(int64(len(datas) * memhash.ChunkSize))
	for b.Loop() {
		chunkNames(datas)
	}
}

// A region larger than the staging ring comes as pieces, one job each, in any order: the
// writer puts their chunk hashes together into one state of the whole region, whose hash is
// that of the region taken at once, and stores every copied chunk.
func TestSnapshotPiecesMakeOneRegion(t *testing.T) {
	r, store := snapshotRecorder(t)
	const addr = 0x7f0000000000
	data := append(append(filled(1, memhash.ChunkSize), filled(2, memhash.ChunkSize)...), filled(3, 4096)...)
	size := uint64(len(data))
	region, chunks := memhash.Hash(data)
	name := func(i int) [16]byte { return chunks[i].Bytes() }
	// The second piece first: chunk 2, then chunks 0 and 1; with a small region beside them.
	v, res := cannedJob(5, 2, 7, false, []cannedJobRegion{{addr: addr, size: size, allocID: 1,
		chunkHashes: [][16]byte{name(2)}}}, nil)
	cannedPiece(v, 2, 3)
	cannedStaging(v, res, []uint32{0}, [][]byte{data[2*memhash.ChunkSize:]})
	jobToWriter(r, v)
	v, res = cannedJob(5, 1, 7, false, []cannedJobRegion{{addr: addr, size: size, allocID: 1,
		chunkHashes: [][16]byte{name(0), name(1)}}}, nil)
	cannedPiece(v, 0, 3)
	cannedStaging(v, res, []uint32{1}, [][]byte{data[memhash.ChunkSize : 2*memhash.ChunkSize]})
	jobToWriter(r, v)
	if len(r.batch.Memory) != 0 {
		t.Fatalf("the point was emitted before its third job")
	}
	small := filled(9, 100)
	v, res = cannedJob(5, 3, 7, false, []cannedJobRegion{{addr: addr + 1<<20, size: 100, allocID: 2,
		chunkHashes: [][16]byte{memhash.Chunk(small).Bytes()}}}, nil)
	v.region_base, v.njobs = 1, 3
	cannedStaging(v, res, []uint32{0}, [][]byte{small})
	jobToWriter(r, v)
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if len(r.batch.Memory) != 1 || len(r.batch.Memory[0].Regions) != 2 {
		t.Fatalf("memory states %v, want one of two regions", r.batch.Memory)
	}
	whole := r.batch.Memory[0].Regions[0]
	var want []byte
	for i := range chunks {
		n := name(i)
		want = append(want, n[:]...)
	}
	if rb := region.Bytes(); !bytes.Equal(whole.Hash, rb[:]) || !bytes.Equal(whole.ChunkHashes, want) || whole.ChunksTransferred != 2 {
		t.Errorf("the region from its pieces: hash %x, chunks %x, %d transferred; want %x, %x, 2", whole.Hash, whole.ChunkHashes, whole.ChunksTransferred, rb, want)
	}
	rd, err := chunkstore.Open(r.w.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 2} {
		if got, err := rd.Get(name(i)); err != nil || !bytes.Equal(got, data[i*memhash.ChunkSize:min((i+1)*memhash.ChunkSize, len(data))]) {
			t.Errorf("chunk %d stored: %v", i, err)
		}
	}
}

// A chunk whose bytes the store already holds under the kernel's hash is still good when a
// later copy of it tears: a state naming that hash is not counted missing.
func TestSnapshotTearOfStoredChunk(t *testing.T) {
	r, store := snapshotRecorder(t)
	const size = memhash.ChunkSize
	a, b := filled(0xa, size), filled(0xb, size)
	h := func(d []byte) [16]byte { return memhash.Chunk(d).Bytes() }
	job := func(seq uint64, kernel [16]byte, copied []byte) {
		v, res := cannedJob(seq, seq, 7, false, []cannedJobRegion{{addr: 0x7f0000000000, size: size, allocID: 1,
			chunkHashes: [][16]byte{kernel}}}, nil)
		if copied != nil {
			cannedStaging(v, res, []uint32{0}, [][]byte{copied})
		} else {
			cannedStaging(v, res, nil, nil)
		}
		jobToWriter(r, v)
	}
	job(1, h(a), a) // stored whole
	job(2, h(a), b) // hashed as a, b by the copy: stored as b
	job(3, h(a), nil)
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if n := r.batch.Memory[2].Regions[0].ChunksMissing; n != 0 {
		t.Errorf("a state naming a chunk stored before the tear counts %d missing, want 0", n)
	}
}
