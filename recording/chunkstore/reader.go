package chunkstore

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"

	"github.com/gpurr/gpurr/internal/regular"
	"github.com/gpurr/gpurr/recording/memhash"
)

// Errors a Reader returns; test with errors.Is.
var (
	// ErrNoChunks: the recording directory has no chunks/ folder, so it
	// holds no memory snapshots.
	ErrNoChunks = errors.New("no chunk store")
	// ErrNotFound: the store holds no chunk of that hash.
	ErrNotFound = errors.New("chunk not in store")
	// ErrPackUnreadable: the index lists the chunk in a pack that is missing or damaged (see
	// Recovery), so the store held it once but it cannot be read now.
	ErrPackUnreadable = errors.New("its pack cannot be read")
)

// Reader reads a store. Get, Has, Len and Hashes are safe for concurrent
// use; Close must come after them.
type Reader struct {
	dir      string
	packs    []openPack // by number
	index    []location // by hash
	recovery Recovery
	dec      decompressor
	// unreadable says, by pack number, why a pack on the folder or in the index cannot be read:
	// "missing", "damaged", "cut short", "not a regular file".
	unreadable map[uint32]string
}

type openPack struct {
	number uint32
	path   string
	f      *os.File
	size   int64
}

// Recovery says how Open found the store: from its index, or by scanning
// the packs because the writer did not close (the process was killed, or
// is still recording) or the index did not match the packs.
type Recovery struct {
	// Rebuilt is true when Open scanned the packs; Reason says why.
	Rebuilt bool
	Reason  string
	// Truncated names, one line each, the packs that end inside an entry
	// (a write cut short): the entries before it are read, that one is not.
	Truncated []string
	// Damaged names, one line each, bytes that are not a valid entry or
	// pack: what follows them in their pack cannot be read.
	Damaged []string
	// Missing names, one line each, the packs the index lists that the folder lacks: their
	// chunks cannot be read (Get wraps ErrPackUnreadable), unlike those dropped while recording,
	// which the store never held.
	Missing []string
}

// Open opens the store in the process recording directory dir (the store
// is dir/chunks). A directory without chunks/ is an error wrapping
// ErrNoChunks; a chunks/ folder without packs is an empty store. When the
// index is missing or does not match the packs, Open rebuilds it in memory
// from the packs (it writes nothing) and says so in Recovery.
func Open(dir string) (*Reader, error) {
	cdir := filepath.Join(dir, DirName)
	list, err := os.ReadDir(cdir)
	if errors.Is(err, fs.ErrNotExist) {
		if _, statErr := os.Stat(dir); statErr != nil {
			return nil, statErr
		}
		return nil, fmt.Errorf("%s: %w (no %s/ folder: the recording holds no memory snapshots)", dir, ErrNoChunks, DirName)
	}
	if err != nil {
		return nil, err
	}
	r := &Reader{dir: cdir, unreadable: map[uint32]string{}}
	for _, e := range list {
		num, ok := packNumber(e.Name())
		if !ok {
			continue
		}
		if err := r.openPack(num); err != nil {
			r.Close()
			return nil, err
		}
	}
	// By number: past pack-999999 names do not sort as numbers.
	slices.SortFunc(r.packs, func(a, b openPack) int { return cmp.Compare(a.number, b.number) })
	if reason := r.loadIndex(); reason != "" {
		r.recovery.Rebuilt, r.recovery.Reason = true, reason
		for i := range r.packs {
			if err := r.scan(&r.packs[i]); err != nil {
				r.Close()
				return nil, err
			}
		}
		slices.SortStableFunc(r.index, compareLocations)
		r.index = slices.CompactFunc(r.index, func(a, b location) bool { return a.hash == b.hash })
	}
	return r, nil
}

// openPack opens pack num and checks its header. A pack too short for its
// header (created, then killed) counts as truncated and one with a bad
// header as damaged; both are left out. A newer format is an error.
func (r *Reader) openPack(num uint32) error {
	path := filepath.Join(r.dir, packName(num))
	f, err := regular.Open(path)
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist): // a symlink to nothing: the index says the pack is missing
		return nil
	case errors.Is(err, regular.ErrNotRegular) && errors.As(err, &pe):
		// A FIFO or a folder where the pack should be is left out, never read: it holds no chunks.
		r.recovery.Damaged = append(r.recovery.Damaged, fmt.Sprintf("%s: %v", path, pe.Err))
		r.unreadable[num] = "not a regular file"
		return nil
	case err != nil:
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	h := make([]byte, fileHeaderSize)
	n, err := f.ReadAt(h, 0)
	if err != nil && err != io.EOF {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if n < fileHeaderSize {
		f.Close()
		r.recovery.Truncated = append(r.recovery.Truncated, fmt.Sprintf("%s: %d bytes, shorter than the pack header", path, n))
		r.unreadable[num] = "cut short"
		return nil
	}
	if err := checkFileHeader(h, packMagic, "pack"); err != nil {
		f.Close()
		if errors.Is(err, errNewerVersion) {
			return fmt.Errorf("%s: %v", path, err)
		}
		r.recovery.Damaged = append(r.recovery.Damaged, fmt.Sprintf("%s: %v", path, err))
		r.unreadable[num] = "damaged"
		return nil
	}
	r.packs = append(r.packs, openPack{number: num, path: path, f: f, size: st.Size()})
	return nil
}

// loadIndex reads the index into r.index; it returns why it could not ("" when it did).
func (r *Reader) loadIndex() string {
	path := filepath.Join(r.dir, indexFile)
	b, err := regular.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "no index (the writer did not close: the process was killed or is still recording)"
	}
	if err != nil {
		return fmt.Sprintf("index unreadable: %v", err)
	}
	packs, entries, err := decodeIndex(b)
	if err != nil {
		return fmt.Sprintf("index unreadable: %s: %v", path, err)
	}
	// A pack the index lists that the folder lacks, or holds damaged, keeps its entries: its
	// chunks were stored, and Get says why they cannot be read.
	readable := 0
	for _, p := range packs {
		i, ok := slices.BinarySearchFunc(r.packs, p.number, func(op openPack, n uint32) int { return cmp.Compare(op.number, n) })
		switch {
		case ok && p.size != r.packs[i].size:
			return fmt.Sprintf("index is stale: it says %s is %d bytes; found %s of %d bytes",
				packName(p.number), p.size, filepath.Base(r.packs[i].path), r.packs[i].size)
		case ok:
			readable++
		case r.unreadable[p.number] == "":
			r.unreadable[p.number] = "missing"
			r.recovery.Missing = append(r.recovery.Missing, fmt.Sprintf("%s: missing (the index lists it, %d bytes): its chunks cannot be read",
				filepath.Join(r.dir, packName(p.number)), p.size))
		}
	}
	if readable != len(r.packs) {
		return fmt.Sprintf("index is stale: it lists %d packs, the folder holds %d readable", len(packs), len(r.packs))
	}
	r.index = entries
	return ""
}

// scan adds the entries of p to r.index, reading only their headers.
func (r *Reader) scan(p *openPack) error {
	h := make([]byte, entryHeaderSize)
	off := int64(fileHeaderSize)
	for off < p.size {
		if p.size-off < entryHeaderSize {
			r.truncated(p, off)
			return nil
		}
		if _, err := p.f.ReadAt(h, off); err != nil {
			return fmt.Errorf("%s: %w", p.path, err)
		}
		e, err := decodeEntryHeader(h)
		if err != nil {
			r.recovery.Damaged = append(r.recovery.Damaged, fmt.Sprintf("%s: entry at offset %d: %v; the %d bytes from there are unreadable", p.path, off, err, p.size-off))
			return nil
		}
		loc := location{hash: e.hash, pack: p.number, raw: e.raw, stored: e.stored, offset: off}
		if loc.end() > p.size {
			r.truncated(p, off)
			return nil
		}
		r.index = append(r.index, loc)
		off = loc.end()
	}
	return nil
}

func (r *Reader) truncated(p *openPack, off int64) {
	r.recovery.Truncated = append(r.recovery.Truncated, fmt.Sprintf("%s: last entry, at offset %d, cut short after %d bytes; ignored", p.path, off, p.size-off))
}

// Recovery says whether Open used the index or rebuilt it, and what it met.
func (r *Reader) Recovery() Recovery { return r.recovery }

// Problems lists, one line each, what makes chunks the store held unreadable: missing,
// damaged and cut-short packs. A rebuilt index alone is none (a killed writer leaves none).
func (r Recovery) Problems() []string { return slices.Concat(r.Missing, r.Damaged, r.Truncated) }

// Dir is the store's folder.
func (r *Reader) Dir() string { return r.dir }

// Len is the number of chunks in the store.
func (r *Reader) Len() int { return len(r.index) }

// Has reports whether the store holds a chunk of this hash (without
// reading or checking it).
func (r *Reader) Has(hash [16]byte) bool {
	_, ok := r.find(hash)
	return ok
}

// Hashes yields the hash of every chunk, in increasing byte order.
func (r *Reader) Hashes() iter.Seq[[16]byte] {
	return func(yield func([16]byte) bool) {
		for i := range r.index {
			if !yield(r.index[i].hash) {
				return
			}
		}
	}
}

func (r *Reader) find(hash [16]byte) (int, bool) {
	return slices.BinarySearchFunc(r.index, hash, func(l location, h [16]byte) int { return bytes.Compare(l.hash[:], h[:]) })
}

// Get returns the chunk of this hash, in a new slice. It checks the entry's
// checksum and the gpurr-h128 hash of the decoded bytes: a corrupt chunk is
// an error naming its pack and offset. A missing one wraps ErrNotFound.
func (r *Reader) Get(hash [16]byte) ([]byte, error) {
	i, ok := r.find(hash)
	if !ok {
		return nil, fmt.Errorf("%s: chunk %x: %w", r.dir, hash, ErrNotFound)
	}
	loc := r.index[i]
	j, ok := slices.BinarySearchFunc(r.packs, loc.pack, func(p openPack, n uint32) int { return cmp.Compare(p.number, n) })
	if !ok {
		return nil, fmt.Errorf("%s: chunk %x: %w: %s is %s", r.dir, hash, ErrPackUnreadable, packName(loc.pack), r.unreadable[loc.pack])
	}
	p := &r.packs[j]
	data, err := r.read(p, loc)
	if err != nil {
		return nil, fmt.Errorf("%s: entry at offset %d (chunk %x): %v", p.path, loc.offset, hash, err)
	}
	return data, nil
}

// read reads, checks and decodes the entry at loc.
func (r *Reader) read(p *openPack, loc location) ([]byte, error) {
	buf := make([]byte, entryHeaderSize+int(loc.stored))
	if n, err := p.f.ReadAt(buf, loc.offset); n < len(buf) {
		if err == io.EOF {
			return nil, errors.New("cut short: the pack ends inside it")
		}
		return nil, err
	}
	e, err := decodeEntryHeader(buf)
	if err != nil {
		return nil, err
	}
	if e.hash != loc.hash || e.raw != loc.raw || e.stored != loc.stored {
		return nil, fmt.Errorf("header (chunk %x, %d bytes stored) does not match the index", e.hash, e.stored)
	}
	stored := buf[entryHeaderSize:]
	if crc(stored) != e.dataCRC {
		return nil, errors.New("checksum mismatch (corrupt chunk)")
	}
	data, err := r.dec.decode(e.codec, stored, int(e.raw))
	if err != nil {
		return nil, err
	}
	if got := memhash.Chunk(data).Bytes(); got != loc.hash {
		return nil, fmt.Errorf("content hashes to %x (corrupt chunk, or stored under a wrong hash)", got)
	}
	return data, nil
}

// Close closes the pack files.
func (r *Reader) Close() error {
	var first error
	for _, p := range r.packs {
		if err := p.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	r.dec.close()
	return first
}
