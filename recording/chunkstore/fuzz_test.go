package chunkstore

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzStore writes a small store holding raw, S2 and zstd entries and
// returns its pack and index bytes.
func fuzzStore(f *testing.F) (pack, index []byte) {
	f.Helper()
	dirs := map[Compression]string{}
	for i, comp := range []Compression{CompressS2, CompressZstdFastest} {
		chunks := makeChunks(f, uint64(11+i), 6) // other chunks for each codec
		for i, c := range chunks {
			chunks[i].data = c.data[:min(len(c.data), 120)] // small seeds fuzz faster
			chunks[i].hash = hashOf(chunks[i].data)
		}
		dirs[comp], _ = writeStore(f, Options{Compression: comp, Workers: 1}, chunks)
	}
	// One pack of both stores' entries, so every codec is in it.
	s2Pack, err := os.ReadFile(filepath.Join(dirs[CompressS2], DirName, packName(1)))
	if err != nil {
		f.Fatal(err)
	}
	zstdPack, err := os.ReadFile(filepath.Join(dirs[CompressZstdFastest], DirName, packName(1)))
	if err != nil {
		f.Fatal(err)
	}
	pack = append(s2Pack, zstdPack[fileHeaderSize:]...)
	index, err = os.ReadFile(filepath.Join(dirs[CompressS2], DirName, indexFile))
	if err != nil {
		f.Fatal(err)
	}
	return pack, index
}

// checkReader reads every chunk r lists: each is its hash's bytes or a
// one-line error naming pack and offset.
func checkReader(t *testing.T, r *Reader) {
	t.Helper()
	n := 0
	for h := range r.Hashes() {
		n++
		if !r.Has(h) {
			t.Fatalf("Hashes yields %x but Has denies it", h)
		}
		data, err := r.Get(h)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, r.Dir()) || !strings.Contains(msg, "offset") {
				t.Fatalf("Get: the error must be one line naming the pack and offset: %q", msg)
			}
			continue
		}
		if hashOf(data) != h {
			t.Fatalf("Get(%x) returned bytes of another hash", h)
		}
	}
	if n != r.Len() {
		t.Fatalf("Hashes yielded %d, Len says %d", n, r.Len())
	}
}

// openFuzzed writes data to path and opens the store in dir: a Reader to
// check, or nil after checking Open's error.
func openFuzzed(t *testing.T, dir, path string, data []byte) *Reader {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir)
	if err != nil {
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, dir) {
			t.Fatalf("Open: the error must be one line naming %s: %q", dir, msg)
		}
		return nil
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// FuzzPack feeds arbitrary bytes to the reader as the only pack of a store
// without an index: Open scans it.
func FuzzPack(f *testing.F) {
	pack, _ := fuzzStore(f)
	f.Add(pack)
	f.Add(pack[:len(pack)-5])
	f.Add(pack[:fileHeaderSize+entryHeaderSize+3])
	f.Add(pack[:fileHeaderSize])
	f.Add([]byte{})
	newer := append([]byte(nil), pack...)
	binary.LittleEndian.PutUint16(newer[8:], MajorVersion+1)
	f.Add(newer)
	flipped := append([]byte(nil), pack...)
	flipped[len(flipped)/2] ^= 1
	f.Add(flipped)

	dir := f.TempDir()
	if err := os.Mkdir(filepath.Join(dir, DirName), 0o700); err != nil {
		f.Fatal(err)
	}
	path := filepath.Join(dir, DirName, packName(1))
	f.Fuzz(func(t *testing.T, data []byte) {
		if r := openFuzzed(t, dir, path, data); r != nil {
			checkReader(t, r)
		}
	})
}

// FuzzIndex feeds arbitrary bytes to the reader as the index of a good
// pack. With fixCRC the index's checksum is made right, so the decoder's
// other checks and Get's are what stand between the bytes and a panic.
func FuzzIndex(f *testing.F) {
	pack, index := fuzzStore(f)
	f.Add(index, false)
	f.Add(index[:len(index)-4], true)
	f.Add(index[:fileHeaderSize+4], true)
	f.Add([]byte{}, false)
	moved := append([]byte(nil), index...)
	moved[len(moved)-20] ^= 0x40 // an entry's offset
	f.Add(moved, true)

	dir := f.TempDir()
	if err := os.Mkdir(filepath.Join(dir, DirName), 0o700); err != nil {
		f.Fatal(err)
	}
	// The index lists pack 1 at the size the S2 store's pack had; make the
	// pack match by cutting off the zstd entries appended to it.
	_, entries, err := decodeIndex(index)
	if err != nil {
		f.Fatal(err)
	}
	want := len(entries)
	pack = pack[:binary.LittleEndian.Uint64(index[fileHeaderSize+8:])]
	if err := os.WriteFile(filepath.Join(dir, DirName, packName(1)), pack, 0o600); err != nil {
		f.Fatal(err)
	}
	path := filepath.Join(dir, DirName, indexFile)
	f.Fuzz(func(t *testing.T, data []byte, fixCRC bool) {
		if fixCRC && len(data) >= 4 {
			data = binary.LittleEndian.AppendUint32(data[:len(data)-4:len(data)-4], crc(data[:len(data)-4]))
		}
		r := openFuzzed(t, dir, path, data)
		if r == nil {
			return
		}
		if r.Recovery().Rebuilt && r.Len() != want {
			t.Fatalf("the scan of a good pack found %d chunks, want %d (Recovery %+v)", r.Len(), want, r.Recovery())
		}
		checkReader(t, r)
	})
}
