package chunkstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gpurr/gpurr/recording/memhash"
)

type testChunk struct {
	hash [16]byte
	data []byte
}

func hashOf(data []byte) [16]byte { return memhash.Chunk(data).Bytes() }

// makeChunks makes n distinct chunks of random sizes 1..memhash.ChunkSize,
// of every kind of GPU data in turn, so the store holds raw and compressed
// entries.
func makeChunks(t testing.TB, seed uint64, n int) []testChunk {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	seen := map[[16]byte]bool{}
	var out []testChunk
	for i := 0; len(out) < n; i++ {
		size := 1 + r.IntN(memhash.ChunkSize)
		if i%5 == 0 {
			size = memhash.ChunkSize
		}
		data := gpuKinds[i%len(gpuKinds)].make(r, size)
		h := hashOf(data)
		if seen[h] {
			continue // all-zero chunks of one size are one chunk
		}
		seen[h] = true
		out = append(out, testChunk{h, data})
	}
	return out
}

func create(t testing.TB, opts Options) (string, *Writer) {
	t.Helper()
	dir := t.TempDir()
	w, err := Create(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return dir, w
}

// putAll puts every chunk, in order.
func putAll(t testing.TB, w *Writer, chunks []testChunk) {
	t.Helper()
	for _, c := range chunks {
		if err := w.Put(c.hash, c.data); err != nil {
			t.Fatal(err)
		}
	}
}

// writeStore writes a store of chunks and returns its recording directory.
func writeStore(t testing.TB, opts Options, chunks []testChunk) (string, *Writer) {
	t.Helper()
	dir, w := create(t, opts)
	putAll(t, w, chunks)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, w
}

func open(t testing.TB, dir string) *Reader {
	t.Helper()
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// checkAll fails unless r holds exactly chunks, each readable.
func checkAll(t *testing.T, r *Reader, chunks []testChunk) {
	t.Helper()
	if r.Len() != len(chunks) {
		t.Errorf("Len = %d, want %d", r.Len(), len(chunks))
	}
	for _, c := range chunks {
		if !r.Has(c.hash) {
			t.Errorf("Has(%x) = false", c.hash)
		}
		got, err := r.Get(c.hash)
		if err != nil {
			t.Errorf("Get(%x): %v", c.hash, err)
		} else if !bytes.Equal(got, c.data) {
			t.Errorf("Get(%x): %d bytes differ from the %d put", c.hash, len(got), len(c.data))
		}
	}
}

func packFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, DirName, "pack-*.pack"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestRoundTrip(t *testing.T) {
	chunks := makeChunks(t, 1, 300)
	dir, w := create(t, Options{PackBytes: 2 << 20, Workers: 4})
	var raw int64
	puts := 0
	for i, c := range chunks {
		raw += int64(len(c.data))
		for range 1 + i%3 { // once, twice or three times
			if err := w.Put(c.hash, c.data); err != nil {
				t.Fatal(err)
			}
			puts++
		}
	}
	if !w.Has(chunks[7].hash) || w.Has([16]byte{1}) {
		t.Error("Writer.Has is wrong")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	packs := packFiles(t, dir)
	var packBytes int64
	for _, p := range packs {
		packBytes += fileSize(t, p)
		if fileSize(t, p) > 2<<20 {
			t.Errorf("%s is %d bytes, over the 2 MiB limit", p, fileSize(t, p))
		}
	}
	want := Stats{
		Chunks:      int64(len(chunks)),
		Duplicates:  int64(puts - len(chunks)),
		RawBytes:    raw,
		StoredBytes: packBytes - int64(len(packs))*fileHeaderSize - int64(len(chunks))*entryHeaderSize,
		Packs:       int64(len(packs)),
	}
	if got := w.Stats(); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
	if len(packs) < 3 {
		t.Errorf("%d packs; the test wants several (roll-over)", len(packs))
	}
	if want.StoredBytes > raw*9/10 {
		t.Errorf("stored %d bytes for %d raw: compression did not happen", want.StoredBytes, raw)
	}
	for _, p := range packs {
		if mode := fileMode(t, p); mode != 0o600 {
			t.Errorf("%s has mode %o, want 600", p, mode)
		}
	}
	if mode := fileMode(t, filepath.Join(dir, DirName)); mode != 0o700 {
		t.Errorf("chunks/ has mode %o, want 700", mode)
	}

	r := open(t, dir)
	if rec := r.Recovery(); rec.Rebuilt || len(rec.Truncated)+len(rec.Damaged) > 0 {
		t.Errorf("a closed store was not read from its index: %+v", rec)
	}
	checkAll(t, r, chunks)
	var hashes [][16]byte
	for h := range r.Hashes() {
		hashes = append(hashes, h)
	}
	if len(hashes) != len(chunks) || !slices.IsSortedFunc(hashes, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) }) {
		t.Errorf("Hashes yielded %d hashes (want %d), sorted: %v", len(hashes), len(chunks), slices.IsSortedFunc(hashes, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) }))
	}
	if _, err := r.Get([16]byte{1, 2, 3}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a missing chunk: %v, want ErrNotFound", err)
	}
}

func fileMode(t testing.TB, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// Every compression writes entries the reader decodes.
func TestCompressions(t *testing.T) {
	chunks := makeChunks(t, 2, 40)
	for _, comp := range []Compression{CompressDefault, CompressNone, CompressS2, CompressZstdFastest, CompressZstdDefault} {
		t.Run(comp.String(), func(t *testing.T) {
			dir, w := writeStore(t, Options{Compression: comp}, chunks)
			st := w.Stats()
			if comp == CompressNone && st.StoredBytes != st.RawBytes {
				t.Errorf("none stored %d bytes for %d raw", st.StoredBytes, st.RawBytes)
			}
			if comp != CompressNone && st.StoredBytes >= st.RawBytes {
				t.Errorf("%v stored %d bytes for %d raw", comp, st.StoredBytes, st.RawBytes)
			}
			checkAll(t, open(t, dir), chunks)
		})
	}
	if _, err := Create(t.TempDir(), Options{Compression: 99}); err == nil {
		t.Error("Create accepted an unknown compression")
	}
}

// Many goroutines put overlapping chunks from buffers they reuse at once;
// few workers and a short queue make Put block.
func TestConcurrentPut(t *testing.T) {
	chunks := makeChunks(t, 3, 200)
	dir, w := create(t, Options{Workers: 3, Queue: 1, PackBytes: 1 << 20})
	const goroutines = 16
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			buf := make([]byte, memhash.ChunkSize)
			for _, i := range r.Perm(len(chunks)) {
				c := chunks[i]
				n := copy(buf, c.data)
				if err := w.Put(c.hash, buf[:n]); err != nil {
					errs <- err
					return
				}
				for k := range buf[:n] {
					buf[k] = 0xA5 // the store must have its own copy by now
				}
				if i%50 == 0 {
					if err := w.Flush(); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Chunks != int64(len(chunks)) || st.Duplicates != int64((goroutines-1)*len(chunks)) || st.Dropped != 0 {
		t.Errorf("Stats = %+v, want %d chunks and %d duplicates", st, len(chunks), (goroutines-1)*len(chunks))
	}
	checkAll(t, open(t, dir), chunks)
}

// A store whose writer flushed but never closed (the process was killed)
// has no index: the reader scans the packs.
func TestRecoverWithoutIndex(t *testing.T) {
	chunks := makeChunks(t, 4, 60)
	dir, w := create(t, Options{PackBytes: 1 << 20})
	putAll(t, w, chunks)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	r := open(t, dir)
	if rec := r.Recovery(); !rec.Rebuilt || !strings.Contains(rec.Reason, "no index") {
		t.Errorf("Recovery = %+v, want rebuilt for lack of an index", rec)
	}
	checkAll(t, r, chunks)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, DirName, indexFile)); err != nil {
		t.Fatal(err)
	}
	checkAll(t, open(t, dir), chunks)
}

// Packs are taken in the order of their numbers, not of their names.
func TestPackOrder(t *testing.T) {
	chunks := makeChunks(t, 12, 60)
	dir, _ := writeStore(t, Options{PackBytes: 256 << 10}, chunks)
	packs := packFiles(t, dir)
	if len(packs) < 3 {
		t.Fatalf("%d packs, want 3 or more", len(packs))
	}
	cdir := filepath.Join(dir, DirName)
	for i, p := range packs { // pack-000001 becomes pack-999999, the next ones 1000000...
		if err := os.Rename(p, filepath.Join(cdir, packName(uint32(999999+i)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(cdir, indexFile)); err != nil {
		t.Fatal(err)
	}
	r := open(t, dir)
	if rec := r.Recovery(); len(rec.Truncated)+len(rec.Damaged) > 0 {
		t.Errorf("Recovery = %+v", rec)
	}
	checkAll(t, r, chunks)
}

// A pack cut anywhere inside its last entry reads as the entries before it.
func TestRecoverTruncatedPack(t *testing.T) {
	chunks := makeChunks(t, 5, 20)
	dir, pack, whole, last := onePackStore(t, chunks)
	for _, cut := range []int64{last + 1, last + entryHeaderSize - 1, last + entryHeaderSize, int64(len(whole)) - 1} {
		if err := os.WriteFile(pack, whole[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		r := open(t, dir) // the index is stale now
		rec := r.Recovery()
		if !rec.Rebuilt || !strings.Contains(rec.Reason, "stale") || len(rec.Truncated) != 1 || len(rec.Damaged) != 0 {
			t.Errorf("cut at %d: Recovery = %+v, want rebuilt from a stale index, one truncation", cut, rec)
		}
		checkAll(t, r, chunks[:len(chunks)-1])
	}
	// Cut before the last entry: an exact boundary is no truncation.
	if err := os.WriteFile(pack, whole[:last], 0o600); err != nil {
		t.Fatal(err)
	}
	r := open(t, dir)
	if rec := r.Recovery(); len(rec.Truncated) != 0 {
		t.Errorf("cut on an entry boundary: Recovery = %+v", rec)
	}
	checkAll(t, r, chunks[:len(chunks)-1])
}

// onePackStore writes chunks into a store of one pack, in order, and
// returns the pack's path, its bytes and the offset of its last entry
// (the last chunk's).
func onePackStore(t *testing.T, chunks []testChunk) (dir, pack string, whole []byte, last int64) {
	t.Helper()
	dir, _ = writeStore(t, Options{Workers: 1}, chunks) // one worker: entries in Put order
	pack = packFiles(t, dir)[0]
	whole, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	return dir, pack, whole, lastEntryOffset(t, whole)
}

// lastEntryOffset walks a pack's entries (test code: input is trusted).
func lastEntryOffset(t *testing.T, pack []byte) int64 {
	t.Helper()
	off, last := int64(fileHeaderSize), int64(-1)
	for off < int64(len(pack)) {
		last = off
		off += entryHeaderSize + int64(binary.LittleEndian.Uint32(pack[off+24:]))
	}
	if last < 0 || off != int64(len(pack)) {
		t.Fatalf("pack does not end on an entry boundary")
	}
	return last
}

// A flipped byte anywhere in an entry is reported, naming pack and offset,
// for that chunk only.
func TestCorruptDetected(t *testing.T) {
	chunks := makeChunks(t, 6, 12)
	dir, pack, whole, last := onePackStore(t, chunks)
	for _, at := range []int64{last + 3, last + 20, last + 30, last + entryHeaderSize + 5, int64(len(whole)) - 1} {
		bad := slices.Clone(whole)
		bad[at] ^= 0x10
		if err := os.WriteFile(pack, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		r := open(t, dir) // the sizes match: the index is used
		failed := 0
		for _, c := range chunks {
			_, err := r.Get(c.hash)
			if err == nil {
				continue
			}
			failed++
			if c.hash != chunks[len(chunks)-1].hash {
				t.Errorf("byte %d flipped: Get(%x) failed, but the chunk is intact: %v", at, c.hash, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, pack) || !strings.Contains(msg, "offset "+strconv.FormatInt(last, 10)) || strings.Contains(msg, "\n") {
				t.Errorf("byte %d flipped: the error must be one line naming %s and offset %d: %q", at, pack, last, msg)
			}
		}
		if failed != 1 {
			t.Errorf("byte %d flipped: %d chunks failed, want 1", at, failed)
		}
	}
	// Without the index a corrupt header ends the scan of its pack, loudly.
	bad := slices.Clone(whole)
	bad[last+20] ^= 0x10
	if err := os.WriteFile(pack, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, DirName, indexFile)); err != nil {
		t.Fatal(err)
	}
	r := open(t, dir)
	if rec := r.Recovery(); len(rec.Damaged) != 1 || !strings.Contains(rec.Damaged[0], "offset "+strconv.FormatInt(last, 10)) {
		t.Errorf("Recovery = %+v, want one damaged place at offset %d", rec, last)
	}
	checkAll(t, r, chunks[:len(chunks)-1])
}

// A chunk put under another chunk's hash is caught by the reader.
func TestWrongHashDetected(t *testing.T) {
	chunks := makeChunks(t, 7, 2)
	dir, w := create(t, Options{})
	if err := w.Put(chunks[0].hash, chunks[1].data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := open(t, dir).Get(chunks[0].hash)
	if err == nil || !strings.Contains(err.Error(), "content hashes to") {
		t.Errorf("Get of a chunk stored under a wrong hash: %v", err)
	}
}

// A write failure (here a full disk: the pack is /dev/full) is returned
// once, then ErrStopped; the writer drops and counts what follows.
func TestWriteFailure(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("needs /dev/full to fill a disk: %v", err)
	}
	chunks := makeChunks(t, 8, 10)
	dir, w := create(t, Options{Workers: 2})
	w.pack.Close()
	w.pack = full // before any Put: the appender has not touched it yet

	if err := w.Put(chunks[0].hash, chunks[0].data); err != nil {
		t.Fatalf("Put before the failure is known: %v", err)
	}
	err = w.Flush()
	if err == nil || errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("Flush after a full disk: %v, want the write error", err)
	}
	for _, c := range chunks[1:] {
		if err := w.Put(c.hash, c.data); !errors.Is(err, ErrStopped) {
			t.Fatalf("Put after the failure: %v, want ErrStopped", err)
		}
	}
	if w.Has(chunks[0].hash) {
		t.Error("Has reports a dropped chunk")
	}
	if err := w.Close(); !errors.Is(err, ErrStopped) {
		t.Errorf("Close after the failure: %v, want ErrStopped", err)
	}
	if st := w.Stats(); st.Chunks != 0 || st.Dropped != int64(len(chunks)) {
		t.Errorf("Stats = %+v, want %d dropped", st, len(chunks))
	}
	r := open(t, dir)
	if r.Len() != 0 {
		t.Errorf("the store holds %d chunks after a failure before any write", r.Len())
	}
}

// Close is the first to report a failure it finds.
func TestWriteFailureAtClose(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("needs /dev/full to fill a disk: %v", err)
	}
	c := makeChunks(t, 9, 1)[0]
	_, w := create(t, Options{})
	w.pack.Close()
	w.pack = full
	if err := w.Put(c.hash, c.data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil || errors.Is(err, ErrStopped) {
		t.Errorf("Close: %v, want the write error", err)
	}
}

// A pack whose header cannot be written (a full disk) is removed, where it was left cut
// short: Create fails and leaves no pack, and a writer that fails to start its second pack
// leaves the first, which the index lists and the reader reads whole.
func TestPackHeaderFailure(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skipf("needs /dev/full to fill a disk: %v", err)
	}
	t.Cleanup(func() { openFile = os.OpenFile })
	fullAt := func(num uint32) { // pack num is made, and its writes go to /dev/full
		openFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			if err != nil || filepath.Base(name) != packName(num) {
				return f, err
			}
			f.Close()
			return os.OpenFile("/dev/full", os.O_WRONLY, 0)
		}
	}
	fullAt(1)
	dir := t.TempDir()
	if _, err := Create(dir, Options{}); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("Create on a full disk: %v, want the write error", err)
	}
	if packs := packFiles(t, dir); len(packs) != 0 {
		t.Errorf("Create on a full disk left %v", packs)
	}

	fullAt(2)
	chunks := makeChunks(t, 13, 2)
	dir, w := create(t, Options{PackBytes: 1, Workers: 1})
	for i, c := range chunks {
		if err := w.Put(c.hash, c.data); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); (err != nil) != (i == 1) {
			t.Errorf("Flush after chunk %d: %v", i, err)
		}
	}
	if err := w.Close(); !errors.Is(err, ErrStopped) {
		t.Errorf("Close: %v, want ErrStopped", err)
	}
	if packs := packFiles(t, dir); len(packs) != 1 || filepath.Base(packs[0]) != packName(1) {
		t.Errorf("packs after the second's header failed: %v, want the first alone", packs)
	}
	r := open(t, dir)
	checkAll(t, r, chunks[:1])
	if rec := r.Recovery(); rec.Rebuilt || len(rec.Damaged)+len(rec.Missing)+len(rec.Truncated) != 0 {
		t.Errorf("Recovery = %+v, want none", rec)
	}
}

// Each file and folder of the store is made in a step Guard runs, each pack past the first
// too, which the writer's own goroutine starts: once Guard refuses, nothing more is made.
func TestGuard(t *testing.T) {
	errHeld := errors.New("held off")
	steps := 0
	guard := func(step func() error) error {
		if steps++; steps > 1 {
			return errHeld
		}
		return step()
	}
	chunks := makeChunks(t, 14, 2)
	dir, w := create(t, Options{PackBytes: 1, Workers: 1, Guard: guard})
	putAll(t, w, chunks[:1])
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	putAll(t, w, chunks[1:]) // the second pack is started by Close's wait for it
	if err := w.Close(); !errors.Is(err, errHeld) {
		t.Errorf("Close: %v, want the error of Guard", err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, DirName))
	if err != nil || len(entries) != 1 || entries[0].Name() != packName(1) {
		t.Errorf("the store's folder once Guard refused: %v, %v, want the first pack alone", entries, err)
	}
	if steps != 3 {
		t.Errorf("Guard ran %d steps, want 3: the store with its first pack, the second pack, the index", steps)
	}
}

func TestWriterMisuse(t *testing.T) {
	dir, w := create(t, Options{})
	if err := w.Put([16]byte{}, nil); err == nil {
		t.Error("Put of an empty chunk succeeded")
	}
	if err := w.Put([16]byte{}, make([]byte, memhash.ChunkSize+1)); err == nil {
		t.Error("Put of a chunk over memhash.ChunkSize succeeded")
	}
	c := makeChunks(t, 10, 1)[0]
	if err := w.Put(c.hash, c.data); err != nil {
		t.Errorf("Put after refused chunks: %v (bad arguments must not stop the writer)", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Put(c.hash, c.data); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}
	if err := w.Flush(); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close: %v", err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if _, err := Create(dir, Options{}); err == nil || !strings.Contains(err.Error(), "already holds") {
		t.Errorf("Create over an existing store: %v", err)
	}
}

func TestOpenEdgeCases(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(dir); !errors.Is(err, ErrNoChunks) || !strings.Contains(err.Error(), dir) {
		t.Errorf("Open of a recording without chunks/: %v", err)
	}
	if _, err := Open(filepath.Join(dir, "nope")); err == nil || errors.Is(err, ErrNoChunks) {
		t.Errorf("Open of a missing directory: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, DirName), 0o700); err != nil {
		t.Fatal(err)
	}
	if r := open(t, dir); r.Len() != 0 {
		t.Errorf("empty chunks/: Len = %d", r.Len())
	}
	// A pack the writer had just created, and one of a newer format.
	pack := filepath.Join(dir, DirName, packName(1))
	if err := os.WriteFile(pack, []byte("GPURPA"), 0o600); err != nil {
		t.Fatal(err)
	}
	if rec := open(t, dir).Recovery(); len(rec.Truncated) != 1 {
		t.Errorf("pack cut inside its header: Recovery = %+v", rec)
	}
	newer := encodeFileHeader(packMagic)
	binary.LittleEndian.PutUint16(newer[8:], MajorVersion+1)
	if err := os.WriteFile(pack, newer, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "upgrade gpurr") {
		t.Errorf("pack of a newer format: %v", err)
	}
	if err := os.WriteFile(pack, []byte("not a pack, but long enough"), 0o600); err != nil {
		t.Fatal(err)
	}
	if rec := open(t, dir).Recovery(); len(rec.Damaged) != 1 {
		t.Errorf("pack with a bad magic: Recovery = %+v", rec)
	}
}

func TestPackNumber(t *testing.T) {
	for name, want := range map[string]uint32{"pack-000001.pack": 1, "pack-123456.pack": 123456, "pack-1234567.pack": 1234567} {
		if n, ok := packNumber(name); !ok || n != want {
			t.Errorf("packNumber(%q) = %d, %v", name, n, ok)
		}
	}
	for _, name := range []string{"pack-000000.pack", "pack-1.pack", "pack-0000001.pack", "pack-00000a.pack", "pack-000001.pack.tmp", "index", "pack-99999999999.pack"} {
		if n, ok := packNumber(name); ok {
			t.Errorf("packNumber(%q) = %d, want no pack", name, n)
		}
	}
}

// A pack the index lists that is missing, or whose header is damaged, is named in Recovery, and
// its chunks are an error saying so (ErrPackUnreadable), not ErrNotFound, which stands for a
// chunk dropped while recording; the other packs read as before.
func TestMissingOrDamagedPack(t *testing.T) {
	chunks := makeChunks(t, 12, 60)
	for _, harm := range []string{"missing", "damaged"} {
		dir, _ := writeStore(t, Options{PackBytes: 256 << 10}, chunks)
		packs := packFiles(t, dir)
		if len(packs) < 3 {
			t.Fatalf("%d packs, want 3 or more", len(packs))
		}
		var err error
		if harm == "missing" {
			err = os.Remove(packs[1])
		} else {
			err = os.WriteFile(packs[1], []byte("not a pack header, but long enough to be one"), 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		r := open(t, dir)
		rec := r.Recovery()
		if harm == "missing" && (rec.Rebuilt || len(rec.Missing) != 1 || !strings.Contains(rec.Missing[0], packs[1]+": missing (the index lists it")) {
			t.Errorf("missing: Recovery = %+v, want the pack named as missing", rec)
		}
		if harm == "damaged" && (rec.Rebuilt || len(rec.Missing) != 0 || len(rec.Damaged) != 1) {
			t.Errorf("damaged: Recovery = %+v, want the pack named as damaged", rec)
		}
		unreadable := 0
		for _, c := range chunks {
			got, err := r.Get(c.hash)
			switch {
			case errors.Is(err, ErrPackUnreadable):
				unreadable++
				if want := filepath.Base(packs[1]) + " is " + harm; !strings.Contains(err.Error(), want) || errors.Is(err, ErrNotFound) {
					t.Errorf("%s: Get: %v, want %q", harm, err, want)
				}
			case err != nil || !bytes.Equal(got, c.data):
				t.Errorf("%s: Get(%x) in a whole pack: %v", harm, c.hash, err)
			}
		}
		if unreadable == 0 || unreadable == len(chunks) {
			t.Errorf("%s: %d of %d chunks unreadable, want those of one pack", harm, unreadable, len(chunks))
		}
	}
}
