// Package memview reads the device memory a recording holds: the bytes of
// region R of launch N, as they were just before or just after the launch
// ran. It is the one place that rule lives; gpurr rewind, replay, diff,
// verify and nan read memory through it.
//
// # States
//
// With memory capture (gpurr record --memory, docs/memory.md) a launch's
// regions are the device allocations its parameters point into
// (Launch.regions). Each is observed on the launch's own stream, Before
// just before the kernel ran and After just after it, so a state holds
// exactly that launch's inputs or outputs whatever other streams did. A
// state (recordingpb.MemoryState) lists its regions in the launch's region
// order, each with a gpurr-h128 hash of the region and one of each chunk
// (MemoryConfig.chunk_bytes, 64 KiB; recording.ChunkHashes splits them).
//
// What a recording holds decides what a View returns:
//
//   - Hash-only recordings (--memory hash) have one After state per launch:
//     hashes, no bytes. View.State, Read and Chunk return an *Error
//     wrapping ErrNoSnapshots; the hashes are in the state itself.
//   - Snapshot recordings (--memory snapshot) have a Before and an After
//     state storing bytes for each launch they selected (--snapshot-kernels,
//     --snapshot-launches), and an After state of hashes only for every
//     other launch and for launches a flight recorder's window let go:
//     those return ErrHashOnly.
//   - A state the recording lost (the GPU never finished it, drop-oldest
//     dropped it, capture stopped) returns ErrLost with its reason. A point
//     with no state at all (capture was off or skipped for the launch, as
//     Launch.memory says, or the recording ended first) returns ErrNoState.
//
// A region whose state was carried from an earlier launch (format 1.11, write sets:
// RegionState.carried) is read like any other: its chunk hashes are those of the state it was
// carried from, which holds the same bytes. One carried from a state that was lost
// (RegionState.unknown) has no hashes: its region returns ErrUnknown, as a lost state would.
//
// Chunks dropped while recording (--on-full drop-oldest) are not an error:
// Read leaves them zero and lists their indexes, and Chunk and Get wrap
// chunkstore.ErrNotFound, so the caller decides whether the rest is of use.
//
// # The latest known state
//
// A region's state After launch N is the latest known state of it as of
// launch N, and Before N the only known state of it on entry to N. memview
// never stands one launch's state in for another's: Before N+1 is not
// After N, since between two launches a region can change unseen (a copy
// from the host, a memset, a kernel that --kernels left out of the
// recording). To follow one allocation across launches, match
// Region.allocation_id and read each launch's own states.
package memview

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/chunkstore"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Before and After are the two points of a launch a state is taken at.
const (
	Before = pb.MemoryState_BEFORE
	After  = pb.MemoryState_AFTER
)

// Launch is a launch with the memory states recorded around it.
type Launch struct {
	Launch        *pb.Launch
	Before, After *pb.MemoryState // nil when none was recorded
}

// FromRecord is the launch of a record Process.Ordered delivered: the way
// to read launches without loading the whole recording.
func FromRecord(r *recording.LaunchRecord) Launch {
	return Launch{Launch: r.Launch, Before: r.Before, After: r.After}
}

// FromLinks is launch seq of a loaded recording with its states
// (Links.MemoryFor); ok is false when the recording has no such launch.
// Where a point has two states (a damaged recording), the first counts, as
// with Process.Ordered.
func FromLinks(links *recording.Links, seq uint64) (l Launch, ok bool) {
	l.Launch = links.Launch(seq)
	for _, s := range links.MemoryFor(seq) {
		switch s.GetPoint() {
		case Before:
			l.Before = cmp.Or(l.Before, s)
		case After:
			l.After = cmp.Or(l.After, s)
		}
	}
	return l, l.Launch != nil
}

// State is l's state at point p (Before or After); nil when there is none.
func (l Launch) State(p pb.MemoryState_Point) *pb.MemoryState {
	switch p {
	case Before:
		return l.Before
	case After:
		return l.After
	}
	return nil
}

// HasBytes reports whether s stores its regions' bytes: a snapshot that was
// not lost. The bytes of a region of s are then in the process's chunk
// store under its chunk hashes.
func HasBytes(s *pb.MemoryState) bool { return s.GetSnapshot() && !s.GetLost() }

// The reasons a launch has no bytes to read at a point, wrapped by *Error;
// test with errors.Is.
var (
	ErrNoSnapshots = errors.New("the recording holds no snapshots")
	ErrNoState     = errors.New("no memory state was recorded")
	ErrLost        = errors.New("the memory state was lost")
	ErrHashOnly    = errors.New("the memory state holds hashes only")
	ErrNoRegion    = errors.New("no such region")
	ErrUnknown     = errors.New("the region's state is unknown")
)

// Error says why region bytes of a launch at a point cannot be read. Err is
// one of ErrNoSnapshots, ErrNoState, ErrLost, ErrHashOnly, ErrNoRegion and
// ErrUnknown, the checks in that order.
type Error struct {
	Seq    uint64               // the launch
	Point  pb.MemoryState_Point // Before or After
	Err    error
	Mode   string          // the recording's memory capture mode: "" (off) or a recording.Memory* mode
	State  *pb.MemoryState // the state without bytes; nil with ErrNoSnapshots and ErrNoState
	Region int             // ErrNoRegion and ErrUnknown: the region asked for
}

func (e *Error) Error() string {
	at := recording.EnumText(e.Point)
	switch e.Err {
	case ErrNoSnapshots:
		return fmt.Sprintf("launch %d: the recording holds no snapshots (memory capture %s): record with --memory snapshot", e.Seq, cmp.Or(e.Mode, recording.MemoryOff))
	case ErrNoState:
		return fmt.Sprintf("launch %d has no memory state %s it", e.Seq, at)
	case ErrLost:
		return fmt.Sprintf("the memory state %s launch %d was lost: %s", at, e.Seq, e.State.GetLostReason())
	case ErrHashOnly:
		return fmt.Sprintf("launch %d has only hashes %s it, no bytes", e.Seq, at)
	case ErrNoRegion:
		return fmt.Sprintf("launch %d has no region %d %s it", e.Seq, e.Region, at)
	case ErrUnknown:
		return fmt.Sprintf("the state of region %d %s launch %d is unknown: it was carried from a state that was lost (write sets)", e.Region, at, e.Seq)
	}
	return fmt.Sprintf("launch %d %s: %v", e.Seq, at, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// View reads the memory one process recorded. It opens the process's chunk
// store when it first reads bytes and keeps it open until Close. A View is
// not safe for concurrent use.
type View struct {
	dir        string
	mode       string
	chunkBytes uint64
	store      *chunkstore.Reader
	storeErr   error
	opened     bool
}

// MissingWhy says, for people, why chunks that Read lists as missing are not in the store
// ("N chunks" + MissingWhy(p)): dropped while recording when p was recorded with --on-full
// drop-oldest, and otherwise lost with the recording's chunk files.
func MissingWhy(p *recording.Process) string {
	if p.Info.GetMemory().GetOnFull() == "drop-oldest" {
		return "were dropped while recording (--on-full drop-oldest)"
	}
	return "are not in the chunk store, and the recording was not made with --on-full drop-oldest: its chunk files are damaged or incomplete (gpurr info says which)"
}

// New returns the view of process p's memory. It reads nothing yet.
func New(p *recording.Process) *View {
	mem := p.Info.GetMemory()
	return &View{dir: p.Dir, mode: mem.GetMode(), chunkBytes: uint64(cmp.Or(mem.GetChunkBytes(), memhash.ChunkSize))}
}

// Close closes the chunk store, if the view opened it.
func (v *View) Close() error {
	var err error
	if v.store != nil {
		err = v.store.Close()
	}
	v.opened, v.store, v.storeErr = true, nil, errors.New("memview: the view is closed")
	return err
}

// ChunkBytes is the size of a chunk, the unit of chunk hashes and of
// stored bytes (MemoryConfig.chunk_bytes; 64 KiB where the recording leaves
// it out): chunk k of a region covers its bytes [k·ChunkBytes,
// (k+1)·ChunkBytes), the last one shorter.
func (v *View) ChunkBytes() uint64 { return v.chunkBytes }

// Store is the process's chunk store, opened on the first call; later calls
// return the same store, or the same error (chunkstore.Open's, unwrapped).
func (v *View) Store() (*chunkstore.Reader, error) {
	if !v.opened {
		v.opened = true
		v.store, v.storeErr = chunkstore.Open(v.dir)
	}
	return v.store, v.storeErr
}

// State is l's state at point p when it stores bytes; otherwise an *Error
// says why not. It reads nothing.
func (v *View) State(l Launch, p pb.MemoryState_Point) (*pb.MemoryState, error) {
	s := l.State(p)
	fail := func(why error, s *pb.MemoryState) (*pb.MemoryState, error) {
		return nil, &Error{Seq: l.Launch.GetSeq(), Point: p, Err: why, Mode: v.mode, State: s}
	}
	switch {
	case v.mode != recording.MemorySnapshot:
		return fail(ErrNoSnapshots, nil)
	case s == nil:
		return fail(ErrNoState, nil)
	case s.GetLost():
		return fail(ErrLost, s)
	case !s.GetSnapshot():
		return fail(ErrHashOnly, s)
	}
	return s, nil
}

// region is State, and region i's record and state in it.
func (v *View) region(l Launch, p pb.MemoryState_Point, i int) (*pb.Region, *pb.RegionState, error) {
	s, err := v.State(l, p)
	if err != nil {
		return nil, nil, err
	}
	if i < 0 || i >= len(l.Launch.GetRegions()) || i >= len(s.GetRegions()) {
		return nil, nil, &Error{Seq: l.Launch.GetSeq(), Point: p, Err: ErrNoRegion, Mode: v.mode, State: s, Region: i}
	}
	if s.GetRegions()[i].GetUnknown() {
		return nil, nil, &Error{Seq: l.Launch.GetSeq(), Point: p, Err: ErrUnknown, Mode: v.mode, State: s, Region: i}
	}
	return l.Launch.GetRegions()[i], s.GetRegions()[i], nil
}

// Read returns bytes [start, end) of region i of launch l at point p (the
// whole region: 0 and Launch.regions[i].size), rebuilt from the chunk store
// on all CPUs. A chunk dropped while recording is left zero in data and its
// index (of the region's chunks) is listed in missing, in order. The errors
// are an *Error when l has no bytes at p, a range outside the region, and
// the chunk store's own (unwrapped), such as a chunk that fails its check.
func (v *View) Read(l Launch, p pb.MemoryState_Point, i int, start, end uint64) (data []byte, missing []int, err error) {
	r, rs, err := v.region(l, p, i)
	if err != nil {
		return nil, nil, err
	}
	if start > end || end > r.GetSize() {
		return nil, nil, fmt.Errorf("bytes [%d, %d) are outside region %d of launch %d (%d bytes)", start, end, i, l.Launch.GetSeq(), r.GetSize())
	}
	store, err := v.Store()
	if err != nil {
		return nil, nil, err
	}
	return store.Assemble(recording.ChunkHashes(rs), v.chunkBytes, start, end)
}

// Chunk returns chunk k of region i of launch l at point p: its bytes
// [k·ChunkBytes, k·ChunkBytes+len). The errors are those of Read, and Get's
// for the chunk (chunkstore.ErrNotFound for one dropped while recording).
func (v *View) Chunk(l Launch, p pb.MemoryState_Point, i, k int) ([]byte, error) {
	_, rs, err := v.region(l, p, i)
	if err != nil {
		return nil, err
	}
	hashes := rs.GetChunkHashes()
	if k < 0 || (k+1)*recording.HashBytes > len(hashes) {
		return nil, fmt.Errorf("region %d of launch %d has %d chunks; no chunk %d", i, l.Launch.GetSeq(), len(hashes)/recording.HashBytes, k)
	}
	return v.Get([16]byte(hashes[k*recording.HashBytes:]))
}

// Get returns the chunk with gpurr-h128 hash h from the process's chunk
// store, checked against h: chunks are content-addressed, so this reads a
// chunk named by any state, or by a manifest. The errors are the chunk
// store's, unwrapped (a chunk the store lacks wraps chunkstore.ErrNotFound).
func (v *View) Get(h [16]byte) ([]byte, error) {
	store, err := v.Store()
	if err != nil {
		return nil, err
	}
	return store.Get(h)
}
