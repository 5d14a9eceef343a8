package chunkstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/s2"

	"github.com/gpurr/gpurr/recording/memhash"
)

// Errors a Writer returns; test with errors.Is.
var (
	// ErrStopped is returned by every call after the one that reported a
	// write failure: the store accepts no more chunks.
	ErrStopped = errors.New("chunk store: writer stopped after a write error")
	// ErrClosed is returned by calls after Close.
	ErrClosed = errors.New("chunk store: writer closed")
)

// DefaultPackBytes is the size at which a pack is closed and the next one
// started, unless Options says otherwise.
const DefaultPackBytes = 1 << 30

// Options tune a Writer; the zero value is the default.
type Options struct {
	// Compression is what is tried on each chunk; CompressDefault is S2.
	Compression Compression
	// Workers is the number of compressing goroutines; 0 means GOMAXPROCS.
	Workers int
	// Queue is the number of chunks Put may have waiting for a worker
	// before it blocks; 0 means two per worker. Workers+Queue buffers of
	// about 140 KiB each are all the memory chunks in flight take.
	Queue int
	// PackBytes is the size a pack may reach before the next is started
	// (a pack holds at least one entry); 0 means DefaultPackBytes.
	PackBytes int64
	// Guard runs each step that makes a file or folder of the store: the
	// folder and the first pack (in Create), each later pack (started by
	// the writer's own goroutine) and the index with its rename into place
	// (in Close). A caller that must keep files from being made at some
	// moment (while an interrupt removes what was written) holds the steps
	// off there; an error Guard returns is the step's. nil runs each step
	// as it comes.
	Guard func(step func() error) error
}

// Writer stores chunks in a new store. Put, Has and Stats are safe for
// concurrent use; Flush and Close wait for the Puts in progress.
//
// Chunks flow through a bounded pipeline: Put copies the chunk into a free
// buffer (blocking while all are in use), a pool of workers compresses and
// checksums them, and one appender goroutine writes each entry to the
// current pack with one write call, so a killed process leaves whole
// entries and at most one partial entry at the end of the last pack.
//
// After a write failure (a full disk) the writer stops: the first call
// that returns afterwards (Put, Flush or Close) returns the failure, every
// later one ErrStopped, and chunks are dropped and counted in Stats.
//
// Besides the buffers in flight, a Writer keeps about 100 bytes per
// distinct chunk until Close (its set of hashes and the index it writes):
// 1.6 GB for a terabyte of distinct chunks.
type Writer struct {
	dir  string
	opts Options

	// gate is held shared by Put and exclusively by Flush and Close, which
	// wait for every accepted chunk to be written.
	gate    sync.RWMutex
	closed  bool           // set under gate held exclusively
	pending sync.WaitGroup // chunks accepted and not yet written or dropped

	seen [seenShards]seenShard

	free    chan *job // buffers not in use
	work    chan *job // accepted chunks, to the workers
	done    chan *job // prepared entries, to the appender
	workers sync.WaitGroup
	ended   chan struct{} // closed when the appender returns

	mu       sync.Mutex
	err      error // the first write failure
	reported bool  // err has been returned once

	chunks, duplicates, dropped, rawBytes, storedBytes, packCount atomic.Int64

	// Owned by the appender until it ends, then by Close.
	pack     *os.File
	packNum  uint32
	packSize int64
	packs    []packSize // closed packs
	locs     []location
}

// job carries one chunk through the pipeline.
type job struct {
	hash  [16]byte
	in    []byte // entry header space, then the chunk's bytes
	out   []byte // entry header space, then the compressed bytes
	entry []byte // in or out, header filled in; nil when preparing failed
}

const seenShards = 64

// seenShard is one part of the set of hashes accepted, split so that Puts
// on many cores rarely wait for one another.
type seenShard struct {
	mu sync.Mutex
	m  map[[16]byte]struct{}
	_  [48]byte // one cache line each
}

func (w *Writer) shard(hash [16]byte) *seenShard { return &w.seen[hash[0]%seenShards] }

// Create makes dir/chunks (0700) if needed and starts a new store in it:
// its first pack (0600) is created at once, so an unwritable folder or an
// existing store is reported here. A store is written once; Create does not
// append to one.
func Create(dir string, opts Options) (*Writer, error) {
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if opts.Queue <= 0 {
		opts.Queue = 2 * opts.Workers
	}
	if opts.PackBytes <= 0 {
		opts.PackBytes = DefaultPackBytes
	}
	if opts.Guard == nil {
		opts.Guard = func(step func() error) error { return step() }
	}
	compressors := make([]*compressor, opts.Workers)
	for i := range compressors {
		c, err := newCompressor(opts.Compression)
		if err != nil {
			return nil, err
		}
		compressors[i] = c
	}
	w := &Writer{
		dir:   filepath.Join(dir, DirName),
		opts:  opts,
		free:  make(chan *job, opts.Workers+opts.Queue),
		work:  make(chan *job, opts.Workers+opts.Queue),
		done:  make(chan *job, opts.Workers+opts.Queue),
		ended: make(chan struct{}),
	}
	err := opts.Guard(func() error {
		if err := os.MkdirAll(w.dir, 0o700); err != nil {
			return err
		}
		return w.startPack()
	})
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("%s already holds a chunk store (a store is written once): %w", w.dir, err)
		}
		return nil, err
	}
	for i := range w.seen {
		w.seen[i].m = make(map[[16]byte]struct{})
	}
	for range opts.Workers + opts.Queue {
		w.free <- &job{
			in:  make([]byte, 0, entryHeaderSize+memhash.ChunkSize),
			out: make([]byte, 0, entryHeaderSize+s2.MaxEncodedLen(memhash.ChunkSize)),
		}
	}
	for _, c := range compressors {
		w.workers.Add(1)
		go w.runWorker(c)
	}
	go w.runAppender()
	return w, nil
}

// Dir is the store's folder, dir/chunks.
func (w *Writer) Dir() string { return w.dir }

// Put stores data, a chunk of 1 to memhash.ChunkSize bytes whose
// gpurr-h128 hash is hash, unless a chunk of that hash was put before; it
// does not check the hash (readers do). Put copies data before it returns,
// so the caller may reuse its buffer at once: a copy costs a small part of
// what compressing the chunk does (bench/NOTES.md), and keeping the caller
// until a worker is done with its buffer would make it wait for the
// compression.
//
// Put blocks while Workers+Queue chunks are in flight. A nil error means
// the chunk was accepted or was a duplicate; Flush says when it is written.
func (w *Writer) Put(hash [16]byte, data []byte) error {
	if len(data) == 0 || len(data) > memhash.ChunkSize {
		return fmt.Errorf("chunk store: chunk %x of %d bytes: a chunk holds 1 to %d bytes", hash, len(data), memhash.ChunkSize)
	}
	w.gate.RLock()
	defer w.gate.RUnlock()
	if w.closed {
		return ErrClosed
	}
	if err := w.failure(); err != nil {
		w.dropped.Add(1)
		return err
	}
	s := w.shard(hash)
	s.mu.Lock()
	_, dup := s.m[hash]
	if !dup {
		s.m[hash] = struct{}{}
	}
	s.mu.Unlock()
	if dup {
		w.duplicates.Add(1)
		return nil
	}
	j := <-w.free
	j.hash = hash
	j.in = append(j.in[:entryHeaderSize], data...)
	w.pending.Add(1)
	w.work <- j // never blocks: work has room for every job
	return nil
}

// Has reports whether a chunk of this hash was accepted by Put: written,
// or on its way to a pack. A chunk dropped after a write failure is not.
func (w *Writer) Has(hash [16]byte) bool {
	s := w.shard(hash)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[hash]
	return ok
}

// Flush waits until every chunk accepted before it is written to its pack
// (handed to the operating system: a killed process keeps it; Flush does
// not fsync). Puts that start meanwhile wait for Flush.
func (w *Writer) Flush() error {
	w.gate.Lock()
	defer w.gate.Unlock()
	if w.closed {
		return ErrClosed
	}
	w.pending.Wait()
	return w.failure()
}

// Close writes every accepted chunk, closes the last pack and writes the
// index (to a temporary file renamed into place, so a reader never sees a
// partial one). The index is written after a failure too, for the chunks
// written before it. Nothing is fsynced: the store survives the process,
// not necessarily the machine (a reader then rebuilds what it can). A
// second Close returns ErrClosed.
func (w *Writer) Close() error {
	w.gate.Lock()
	if w.closed {
		w.gate.Unlock()
		return ErrClosed
	}
	w.closed = true
	w.gate.Unlock()
	// No Put is running or can start: the channels can close.
	close(w.work)
	w.workers.Wait()
	close(w.done)
	<-w.ended
	if err := w.finishPack(); err != nil {
		w.fail(err)
	}
	indexErr := w.writeIndex()
	if err := w.failure(); err != nil {
		return err
	}
	return indexErr
}

// Stats are a Writer's counters.
type Stats struct {
	Chunks      int64 // chunks written to packs
	Duplicates  int64 // Puts skipped because their hash was accepted before
	Dropped     int64 // chunks not stored because of a write failure
	RawBytes    int64 // bytes of the chunks written
	StoredBytes int64 // bytes stored for them (compressed or raw), entry headers excluded
	Packs       int64 // pack files created
}

// Stats returns the counters so far; after Close they are final.
func (w *Writer) Stats() Stats {
	return Stats{
		Chunks:      w.chunks.Load(),
		Duplicates:  w.duplicates.Load(),
		Dropped:     w.dropped.Load(),
		RawBytes:    w.rawBytes.Load(),
		StoredBytes: w.storedBytes.Load(),
		Packs:       w.packCount.Load(),
	}
}

// fail records the first write failure.
func (w *Writer) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = fmt.Errorf("chunk store: %w (the store accepts no more chunks)", err)
	}
}

// failure returns the write failure the first time it is asked after one,
// ErrStopped after that, and nil while there is none.
func (w *Writer) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		return nil
	}
	if !w.reported {
		w.reported = true
		return w.err
	}
	return ErrStopped
}

func (w *Writer) failed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err != nil
}

// runWorker is one worker: it turns accepted chunks into entries.
func (w *Writer) runWorker(c *compressor) {
	defer w.workers.Done()
	for j := range w.work {
		w.prepare(c, j)
		w.done <- j
	}
}

// prepare fills j.entry: the chunk compressed (or raw when compression
// saves little) behind its entry header. A panic in a codec stops the
// writer instead of the program.
func (w *Writer) prepare(c *compressor, j *job) {
	j.entry = nil
	defer func() {
		if p := recover(); p != nil {
			w.fail(fmt.Errorf("compressing chunk %x: panic: %v", j.hash, p))
			j.entry = nil
		}
	}()
	raw := j.in[entryHeaderSize:]
	var codec Codec
	j.out, codec = c.compress(j.out[:entryHeaderSize], raw)
	entry := j.in
	if codec != CodecRaw {
		entry = j.out
	}
	h := entryHeader{
		hash:    j.hash,
		codec:   codec,
		raw:     uint32(len(raw)),
		stored:  uint32(len(entry) - entryHeaderSize),
		dataCRC: crc(entry[entryHeaderSize:]),
	}
	h.encode(entry)
	j.entry = entry
}

// runAppender is the appender: the only goroutine that writes packs.
func (w *Writer) runAppender() {
	defer close(w.ended)
	for j := range w.done {
		if j.entry == nil || w.failed() || !w.write(j.entry) {
			s := w.shard(j.hash)
			s.mu.Lock()
			delete(s.m, j.hash)
			s.mu.Unlock()
			w.dropped.Add(1)
		} else {
			w.locs = append(w.locs, location{
				hash:   j.hash,
				pack:   w.packNum,
				raw:    uint32(len(j.in) - entryHeaderSize),
				stored: uint32(len(j.entry) - entryHeaderSize),
				offset: w.packSize - int64(len(j.entry)),
			})
			w.chunks.Add(1)
			w.rawBytes.Add(int64(len(j.in) - entryHeaderSize))
			w.storedBytes.Add(int64(len(j.entry) - entryHeaderSize))
		}
		w.pending.Done()
		w.free <- j
	}
}

// write appends one entry to the current pack, starting the next pack
// first when this one is full; false after a failure.
func (w *Writer) write(entry []byte) bool {
	if w.packSize > fileHeaderSize && w.packSize+int64(len(entry)) > w.opts.PackBytes {
		if err := w.finishPack(); err != nil {
			w.fail(err)
			return false
		}
		if err := w.opts.Guard(w.startPack); err != nil {
			w.fail(err)
			return false
		}
	}
	n, err := w.pack.Write(entry)
	w.packSize += int64(n)
	if err != nil {
		w.fail(err)
		return false
	}
	return true
}

// openFile opens a pack (a test makes its header's write fail, as a full
// disk would).
var openFile = os.OpenFile

// startPack creates the next pack and writes its header; a pack whose
// header could not be written is removed, not left for readers to meet.
func (w *Writer) startPack() error {
	num := w.packNum + 1
	name := filepath.Join(w.dir, packName(num))
	f, err := openFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(encodeFileHeader(packMagic)); err != nil {
		f.Close()
		os.Remove(name)
		return err
	}
	w.pack, w.packNum, w.packSize = f, num, fileHeaderSize
	w.packCount.Add(1)
	return nil
}

// finishPack closes the current pack and lists it for the index.
func (w *Writer) finishPack() error {
	if w.pack == nil {
		return nil
	}
	err := w.pack.Close()
	w.packs = append(w.packs, packSize{w.packNum, w.packSize})
	w.pack = nil
	return err
}

// writeIndex writes the index of every entry written.
func (w *Writer) writeIndex() error {
	slices.SortFunc(w.locs, compareLocations)
	index := encodeIndex(w.packs, w.locs)
	tmp := filepath.Join(w.dir, indexTemp)
	return w.opts.Guard(func() error {
		if err := os.WriteFile(tmp, index, 0o600); err != nil {
			os.Remove(tmp)
			return err
		}
		return os.Rename(tmp, filepath.Join(w.dir, indexFile))
	})
}
