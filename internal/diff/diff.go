// Package diff aligns the kernel launches of two recordings of the same
// program and finds the first launch whose device memory after it differs
// between them: what `gpurr diff` reports when two runs that should be
// identical are not.
//
// Launches are aligned per stream by kernel identity, in launch order. Stream
// handles differ between runs and so does the order in which threads reach
// their first launch, so streams are numbered by the thread they belong to
// (Threads): the same numbers in every run of a deterministic program however
// its threads were scheduled;
// launches present in one run only (an extra warm-up, a different branch)
// are skipped over and listed. Each run is first reduced to one small entry
// per launch (Scan, 40 bytes), so two recordings of a million launches each fit
// in about 300 megabytes; the details of the divergent launch are read in a
// second pass (Detail).
package diff

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Launch is what alignment needs of one launch: 40 bytes, since a run of
// ten million launches holds ten million of them. Its kernel is
// Run.KernelID(l), and the kernel's identity Run.Identity(l).
type Launch struct {
	Seq      uint64
	State    [16]byte // digest of the region hashes after the launch
	Stream   int32    // the launch's stream: its unit's index in Run.Units (Threads)
	Step     int32    // training step (recording.Stepper)
	kernel   uint32   // index of its Kernel.id in Run.kernelIDs
	HasState bool     // an AFTER state with hashes was recorded
	// Unknown: a region of that state is unknown (carried from a state that was lost, format
	// 1.11), so the launch is compared with none: neither equal nor different.
	Unknown bool
	// Torn: the state was taken while a kernel of another stream that reaches the same memory
	// ran (recording.Timeline), so its bytes may be part old, part new: compared with none.
	Torn bool
}

// Run is one process of a recording, reduced for alignment.
type Run struct {
	Process  *recording.Process
	Mode     string // memory capture mode: "", hash, snapshot
	Launches []Launch
	Kernels  map[uint64]*pb.Kernel // by Kernel.id
	Complete bool                  // the recording has its End record
	Steps    *recording.Stepper    // how its launches were numbered by step, and how many steps they went through
	// Write sets (format 1.11): which regions the recording carried rather than hashed
	// (MemoryConfig.write_sets: proved, learned, all; "" before them), and the audits that
	// found a learned write set wrong, in the order written.
	WriteSets  string
	AuditEvery uint32
	Misses     []*pb.WriteSetMiss
	// Units are the run's streams, by number (Launch.Stream), as Threads numbers them; nil
	// for a run not made by Scan (a manifest's).
	Units []Unit
	// Library counts the region states left out of the comparison because their memory is a
	// communication library's own (Allocation.owner, format 1.12: NCCL's channels, flags and
	// FIFOs differ from run to run by design), by owner; empty with ScanOptions.IncludeLibrary.
	Library map[string]int
	// Compile counts the launches left out because XLA made them while it compiled and
	// autotuned (ScanOptions.IncludeCompile).
	Compile int
	// Torn lists the launches whose state after them was torn (Launch.Torn), by seq, with the
	// kernels of other streams that ran while it was taken.
	Torn []TornLaunch

	kernelIDs   []uint64          // the kernel ids its launches name, each once (Launch.kernel)
	identities  []uint64          // and their Kernel.identity (0 for a kernel not in Kernels)
	kernelIndex map[uint64]uint32 // and where each is in kernelIDs
}

// TornLaunch is a launch whose state after it another stream's kernels may have torn.
type TornLaunch struct {
	Seq   uint64   `json:"seq"`
	Tears []string `json:"tears"` // recording.Tear.String of each
}

// Append adds a launch of kernel kernelID (Kernel.id) to r.Launches. The kernel's identity
// is its entry's in r.Kernels when it is first added: Scan, which may read a kernel after its
// launches, looks them up again when it has read them all.
func (r *Run) Append(l Launch, kernelID uint64) { r.insert(len(r.Launches), l, kernelID) }

func (r *Run) intern(kernelID uint64) uint32 {
	if n := len(r.kernelIDs); n > 0 && r.kernelIDs[n-1] == kernelID {
		return uint32(n - 1)
	}
	k, ok := r.kernelIndex[kernelID]
	if !ok {
		if r.kernelIndex == nil {
			r.kernelIndex = map[uint64]uint32{}
		}
		k = uint32(len(r.kernelIDs))
		r.kernelIndex[kernelID] = k
		r.kernelIDs = append(r.kernelIDs, kernelID)
		r.identities = append(r.identities, r.Kernels[kernelID].GetIdentity())
	}
	return k
}

// KernelID is the Kernel.id of l's kernel (for a manifest's run, its identity); 0 for a
// launch not added with Append.
func (r *Run) KernelID(l Launch) uint64 {
	if int(l.kernel) < len(r.kernelIDs) {
		return r.kernelIDs[l.kernel]
	}
	return 0
}

// Identity is the Kernel.identity of l's kernel: the same kernel of the same module in any
// run; 0 for a launch not added with Append.
func (r *Run) Identity(l Launch) uint64 {
	if int(l.kernel) < len(r.identities) {
		return r.identities[l.kernel]
	}
	return 0
}

// Scan reads a process's recording once and keeps one Launch per launch.
//
// Each memory state is folded into its launch as soon as both are read. Launches of several
// threads reach the recording slightly out of seq order: a late one is put in its place, and
// a state whose launch has not come yet waits for it.
func Scan(p *recording.Process) (*Run, error) { return ScanWith(p, ScanOptions{}) }

// ScanOptions say how Scan reads a run.
type ScanOptions struct {
	// Launches makes room for that many launches before any is read: the count of the run it
	// will be aligned with, since two runs of one program launch about as many. Room made for
	// them all spares the copies that growing Launches takes, and the moment when both the old
	// and the new copy are held; room left over at the end (the run launched fewer) is given
	// back.
	Launches int
	// IncludeLibrary compares the regions of communication libraries' own memory too, which
	// runs leave out by default (Run.Library).
	IncludeLibrary bool
	// IncludeCompile aligns the launches XLA made while it compiled and autotuned too
	// (recording.Links.Compile), which runs leave out by default (Run.Compile): which
	// candidates autotuning tries, and how often, differs from run to run.
	IncludeCompile bool
}

// ScanSized is Scan with room made for launches launches (ScanOptions.Launches).
func ScanSized(p *recording.Process, launches int) (*Run, error) {
	return ScanWith(p, ScanOptions{Launches: launches})
}

// ScanWith is Scan as o says.
func ScanWith(p *recording.Process, o ScanOptions) (*Run, error) {
	r, err := scan(p, o)
	if err == nil && cap(r.Launches)-len(r.Launches) > len(r.Launches)/4 {
		r.Launches = slices.Clone(r.Launches)
	}
	return r, err
}

// stateAfter is an AFTER state waiting for its launch.
type stateAfter struct {
	seq uint64
	s   *pb.MemoryState
}

// library knows which memory of a run is a communication library's own: its allocations by id
// and, for memory found by the driver's range query (regions name no allocation id then),
// by address.
// LibraryMemory knows which of a process's allocations a communication library made for its
// own use (Allocation.owner: NCCL's channels, flags and proxy buffers), whose bytes differ from
// run to run by design: diff, verify and nan leave their regions out unless asked. Feed it
// the recording's allocations as they are read (Add), before the launches that reach them.
type LibraryMemory struct {
	owner   map[uint64]string // allocation id -> owner
	byStart map[uint64]string // address -> owner, of range-query allocations
}

// NewLibraryMemory is a LibraryMemory that knows no allocation yet.
func NewLibraryMemory() *LibraryMemory {
	return &LibraryMemory{owner: map[uint64]string{}, byStart: map[uint64]string{}}
}

// Add notes an allocation record.
func (m *LibraryMemory) Add(a *pb.Allocation) {
	if a.GetOwner() == "" || a.GetFreed() {
		return
	}
	m.owner[a.GetId()] = a.GetOwner()
	if a.GetKind() == pb.Allocation_RANGE_QUERY {
		m.byStart[a.GetAddress()] = a.GetOwner()
	}
}

// Owner is the library whose memory a launch's region is ("nccl", ...), "" for the program's.
func (m *LibraryMemory) Owner(reg *pb.Region) string {
	if id := reg.GetAllocationId(); id != 0 {
		return m.owner[id]
	}
	return m.byStart[reg.GetAddress()]
}

// Owned lists the regions of l that are a library's, nil when none is.
func (m *LibraryMemory) Owned(l *pb.Launch) []OwnedRegion {
	var owned []OwnedRegion
	for i, reg := range l.GetRegions() {
		if o := m.Owner(reg); o != "" {
			owned = append(owned, OwnedRegion{i, o})
		}
	}
	return owned
}

// OwnedRegion is a region of a launch, by index, that a library owns.
type OwnedRegion struct {
	Index int
	Owner string
}

// scan reads p once, keeping its launches in seq order and giving each AFTER state to its
// launch, the last one read winning.
func scan(p *recording.Process, o ScanOptions) (*Run, error) {
	r := &Run{Process: p, Kernels: map[uint64]*pb.Kernel{}, Launches: make([]Launch, 0, o.Launches), Library: map[string]int{}}
	waiting := map[uint64][]stateAfter{} // states read before their launch, by its seq
	pruneAt := straysKept                // len(waiting) at which forgetStrays runs next
	lib := NewLibraryMemory()
	owned := map[uint64][]OwnedRegion{} // launch seq -> its regions that are a library's
	// fold gives launch i its state s, leaving out the regions of libraries' memory.
	fold := func(i int, s *pb.MemoryState) {
		var skip []bool
		if !o.IncludeLibrary {
			for _, lr := range owned[s.GetLaunchSeq()] {
				if lr.Index < len(s.GetRegions()) {
					if skip == nil {
						skip = make([]bool, len(s.GetRegions()))
					}
					skip[lr.Index] = true
					r.Library[lr.Owner]++
				}
			}
		}
		l := &r.Launches[i]
		l.State, l.HasState, l.Unknown = stateDigest(s, skip)
	}
	steps, err := recording.ProcessStepper(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", p.Dir, err)
	}
	r.Steps = steps
	// Streams are numbered as launches reach the recording, and renumbered by thread at the
	// end, when every thread that launched is known.
	threads := NewThreads(p.Info.GetPid())
	links := recording.NewLinks() // for Compile only
	res, err := p.Scan(func(b *pb.Batch) error {
		if !o.IncludeCompile {
			links.Add(b, false)
		}
		if b.Process != nil {
			mem := b.Process.GetMemory()
			r.Mode, r.WriteSets, r.AuditEvery = mem.GetMode(), mem.GetWriteSets(), mem.GetAuditEvery()
		}
		r.Misses = append(r.Misses, b.WriteSetMisses...)
		for _, a := range b.Allocations {
			lib.Add(a)
		}
		for _, k := range b.Kernels {
			r.Kernels[k.GetId()] = &pb.Kernel{Id: k.GetId(), Identity: k.GetIdentity(), Name: k.GetName(), Demangled: k.GetDemangled()}
		}
		steps.Add(b)
		recording.EachCall(b, func(l *pb.Launch) {
			step := steps.Launch(l)
			if l.GetCaptured() {
				return // built a graph node; ran nothing
			}
			if !o.IncludeCompile && links.Compile(l) {
				r.Compile++
				return
			}
			seq := l.GetSeq()
			i := len(r.Launches)
			if i > 0 && seq <= r.Launches[i-1].Seq {
				i, _ = r.find(seq)
			}
			r.insert(i, Launch{Seq: seq, Stream: threads.Add(l), Step: int32(step)}, l.GetKernelId())
			if lr := lib.Owned(l); lr != nil {
				owned[seq] = lr
			}
			for _, s := range waiting[seq] {
				fold(i, s.s)
			}
			delete(waiting, seq)
		}, func(g *pb.GraphLaunch) { steps.GraphLaunch(g) })
		for _, s := range b.Memory {
			if s.GetPoint() != pb.MemoryState_AFTER || s.GetLost() {
				continue
			}
			st := stateAfter{s.GetLaunchSeq(), s}
			if i, ok := r.find(st.seq); ok {
				fold(i, s)
			} else {
				waiting[st.seq] = append(waiting[st.seq], st)
				if len(waiting) >= pruneAt {
					forgetStrays(waiting, r.Launches)
					pruneAt = max(straysKept, 2*len(waiting))
				}
			}
		}
		if b.End != nil {
			r.Complete = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if res.Truncated {
		r.Complete = false
	}
	var number []int32
	r.Units, number = threads.Units()
	r.renumber(number)
	for k, id := range r.kernelIDs {
		r.identities[k] = r.Kernels[id].GetIdentity()
	}
	return r, nil
}

// MarkTorn marks the launches whose state after them was torn (recording.Timeline), which
// alignment then compares with none, and lists them in Torn. It reads the recording once
// more, holding its launches: callers do it only when launches differ, since a torn state
// matters only there (AlignTorn).
func (r *Run) MarkTorn() error {
	if r.Process == nil || r.Mode != recording.MemoryHash && r.Mode != recording.MemorySnapshot {
		return nil
	}
	t := recording.NewTimeline()
	if _, err := r.Process.Scan(func(b *pb.Batch) error { t.Add(b); return nil }); err != nil {
		return err
	}
	r.markTorn(t.Torn())
	return nil
}

// AlignTorn is Align, where a launch whose states differ is compared again with torn states
// marked (MarkTorn): runs that agree pay no second read.
func AlignTorn(a, b *Run) (*Result, error) {
	res := Align(a, b)
	if res.Differ == 0 {
		return res, nil
	}
	for _, r := range []*Run{a, b} {
		if err := r.MarkTorn(); err != nil {
			return nil, err
		}
	}
	return Align(a, b), nil
}

func (r *Run) markTorn(torn map[recording.StateKey][]recording.Tear) {
	r.Torn = r.Torn[:0]
	for k, tears := range torn {
		if k.Point != pb.MemoryState_AFTER {
			continue // alignment compares the states after launches only
		}
		i, ok := r.find(k.Seq)
		if !ok {
			continue
		}
		r.Launches[i].Torn = true
		t := TornLaunch{Seq: k.Seq}
		for _, tear := range tears {
			t.Tears = append(t.Tears, tear.String())
		}
		r.Torn = append(r.Torn, t)
	}
	slices.SortFunc(r.Torn, func(a, b TornLaunch) int { return cmp.Compare(a.Seq, b.Seq) })
}

// straysKept bounds the states scan keeps waiting for their launch: past it, those of a seq
// further than that behind the last launch read are let go, since launches arrive out of
// order by a few threads' worth, and a state whose launch is not recorded (a damaged
// recording) would otherwise be kept to the end.
const straysKept = 1 << 16

func forgetStrays(waiting map[uint64][]stateAfter, launches []Launch) {
	if len(launches) == 0 {
		return
	}
	last := launches[len(launches)-1].Seq
	for seq := range waiting {
		if seq+straysKept < last {
			delete(waiting, seq)
		}
	}
}

// insert puts launch l of kernel kernelID (Kernel.id) at position i of r.Launches.
func (r *Run) insert(i int, l Launch, kernelID uint64) {
	l.kernel = r.intern(kernelID)
	r.Launches = slices.Insert(r.Launches, i, l)
}

// Streams numbers streams in the order their handles are first met: a manifest's
// launches, in launch order, by first use (its "stream" field); Threads, in the order its
// launches are read, for a start.
type Streams map[uint64]int

// Number returns the number of the stream with the given handle, giving the
// next number to a handle not seen before.
func (s Streams) Number(handle uint64) int {
	n, ok := s[handle]
	if !ok {
		n = len(s)
		s[handle] = n
	}
	return n
}

// Unit is one stream of a run as alignment pairs it with the other run's: launches are
// aligned unit by unit, in launch order.
type Unit struct {
	Handle uint64 // the stream's handle
	// Tid is the thread the stream belongs to: of the threads that launched on it, the first
	// in creation order (Threads); Seq is that thread's first launch on it, made from
	// callstack Callstack (Launch.callstack_id) with kernel KernelID (Kernel.id).
	Tid       uint32
	Seq       uint64
	Callstack uint64
	KernelID  uint64
	FirstSeq  uint64 // the first launch on it of any thread
}

// Threads numbers a process's streams so that every run of a deterministic program numbers
// them alike, whatever order its threads reached their launches in: which thread launches
// first changes with scheduling, the order in which the program created its threads does
// not.
//
// Threads rank by creation order: the process's main thread (tid == pid) first, then by
// tid, since Linux gives increasing tids to threads created one after another (until the
// counter wraps at pid_max). A stream belongs to the first thread, in that ranking, that
// launched on it, and the streams are numbered thread by thread, each thread's in the order
// it first used them. A stream several threads launch on (the legacy stream 0; PyTorch's
// current stream, which autograd's engine thread launches on too) stays one unit: its
// launches align in launch order. A recording without thread ids (all 0) is numbered in
// order of first use.
//
// Launches may be added in any order (a late one from another thread); a stream keeps its
// first launch and its owner's first, so memory grows with streams, not threads or launches.
type Threads struct {
	pid     uint32
	arrival Streams // handle to index in uses, in the order handles are first added
	uses    []Unit
}

// NewThreads numbers the streams of the process with the given pid.
func NewThreads(pid uint32) *Threads { return &Threads{pid: pid, arrival: Streams{}} }

// before says thread a ranks before thread b.
func (t *Threads) before(a, b uint32) bool {
	if (a == t.pid) != (b == t.pid) {
		return a == t.pid
	}
	return a < b
}

// Add counts launch l and returns its stream's number for now: in the order the handles were
// first added, until Units renumbers them.
func (t *Threads) Add(l *pb.Launch) int32 {
	n := t.arrival.Number(l.GetStream())
	seq, tid := l.GetSeq(), l.GetTid()
	if n == len(t.uses) {
		t.uses = append(t.uses, Unit{Handle: l.GetStream(), Tid: tid, Seq: seq, Callstack: l.GetCallstackId(), KernelID: l.GetKernelId(), FirstSeq: seq})
		return int32(n)
	}
	u := &t.uses[n]
	u.FirstSeq = min(u.FirstSeq, seq)
	if t.before(tid, u.Tid) || tid == u.Tid && seq < u.Seq {
		u.Tid, u.Seq, u.Callstack, u.KernelID = tid, seq, l.GetCallstackId(), l.GetKernelId()
	}
	return int32(n)
}

// Units returns the streams by number, and for each number Add returned, the stream's.
func (t *Threads) Units() (units []Unit, number []int32) {
	order := indices(len(t.uses))
	slices.SortStableFunc(order, func(i, j int) int {
		a, b := &t.uses[i], &t.uses[j]
		switch {
		case a.Tid != b.Tid && t.before(a.Tid, b.Tid):
			return -1
		case a.Tid != b.Tid:
			return 1
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	units, number = make([]Unit, len(order)), make([]int32, len(order))
	for k, i := range order {
		units[k], number[i] = t.uses[i], int32(k)
	}
	return units, number
}

// FirstUse orders units by their first launch, of any thread: FirstUse(units)[k] is the
// index of the k-th stream by first use, as a manifest's "stream" numbers them.
func FirstUse(units []Unit) []int {
	order := indices(len(units))
	slices.SortStableFunc(order, func(i, j int) int { return cmp.Compare(units[i].FirstSeq, units[j].FirstSeq) })
	return order
}

// indices are 0..n-1, to sort.
func indices(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// NumberByFirstUse numbers r's streams in order of first use (by any thread) instead, as
// manifests made before Threads did: to verify a run against one of them.
func (r *Run) NumberByFirstUse() {
	order := FirstUse(r.Units)
	number := make([]int32, len(order))
	units := make([]Unit, len(order))
	for k, i := range order {
		number[i], units[k] = int32(k), r.Units[i]
	}
	r.renumber(number)
	r.Units = units
}

// renumber gives each launch on stream s the stream number[s].
func (r *Run) renumber(number []int32) {
	same := true
	for s, n := range number {
		same = same && int32(s) == n
	}
	if same {
		return
	}
	for i := range r.Launches {
		r.Launches[i].Stream = number[r.Launches[i].Stream]
	}
}

// AlikeThreads counts the threads of r that own a stream whose first launch (Unit.Seq) is
// like that of a stream of another thread: the same kernel from the same callstack. Such
// streams are told apart only by the order their threads were created, and that is how
// alignment pairs them; a thread pool that hands alike work to whichever thread is free may
// pair them otherwise than the work. 0 when there are none.
func (r *Run) AlikeThreads() int {
	type first struct{ identity, callstack uint64 }
	owner := map[first]uint32{} // a thread that owns a stream whose first launch is that
	shared := map[first]bool{}  // and another thread owns one too
	key := func(u Unit) first { return first{r.Kernels[u.KernelID].GetIdentity(), u.Callstack} }
	for _, u := range r.Units {
		k := key(u)
		if t, ok := owner[k]; !ok {
			owner[k] = u.Tid
		} else if t != u.Tid {
			shared[k] = true
		}
	}
	alike := map[uint32]bool{}
	for _, u := range r.Units {
		if shared[key(u)] {
			alike[u.Tid] = true
		}
	}
	return len(alike)
}

func (r *Run) find(seq uint64) (int, bool) {
	return slices.BinarySearchFunc(r.Launches, seq, func(l Launch, seq uint64) int { return cmp.Compare(l.Seq, seq) })
}

// StateDigest folds a state's region hashes (in launch region order) into
// one 128-bit value: equal digests, equal memory, unless a region's state is
// unknown (recording.UnknownRegions), whose empty hash counts as zeros: such a
// state compares with none.
func StateDigest(s *pb.MemoryState) [16]byte {
	d, _, _ := stateDigest(s, nil)
	return d
}

// stateDigest is StateDigest of the regions of s that skip does not mark, and whether any of
// them is unknown (recording.UnknownRegions); has is false when skip marks every region.
func stateDigest(s *pb.MemoryState, skip []bool) (digest [16]byte, has, unknown bool) {
	hashes := make([][]byte, 0, len(s.GetRegions()))
	for i, rs := range s.GetRegions() {
		if i < len(skip) && skip[i] {
			continue
		}
		hashes = append(hashes, rs.GetHash())
		unknown = unknown || rs.GetUnknown()
	}
	return Digest(hashes), len(hashes) > 0 || len(s.GetRegions()) == 0, unknown
}

// Digest is StateDigest of region hashes given in launch region order; a
// hash that is not 16 bytes (a damaged record) counts as zeros.
func Digest(regionHashes [][]byte) [16]byte {
	buf := make([]byte, 0, recording.HashBytes*len(regionHashes))
	for _, h := range regionHashes {
		if len(h) != recording.HashBytes {
			h = make([]byte, recording.HashBytes)
		}
		buf = append(buf, h...)
	}
	return memhash.RegionOfEncoded(buf, uint64(len(regionHashes))).Bytes()
}

// KernelName is the launch's kernel, demangled where the recording has it.
func (r *Run) KernelName(l Launch) string { return r.KernelNameOf(r.KernelID(l)) }

// KernelNameOf is the kernel with the given Kernel.id, demangled where the recording has it.
func (r *Run) KernelNameOf(id uint64) string {
	k := r.Kernels[id]
	if k == nil {
		return fmt.Sprintf("kernel %d (not in the recording)", id)
	}
	return cmp.Or(k.GetDemangled(), recording.Demangle(k.GetName()))
}

// Pair is a launch of run A matched with one of run B, as indices into
// their Launches.
type Pair struct{ A, B int }

// Result is what Align found.
type Result struct {
	Matched  int   // launches matched between the runs
	Compared int   // matched launches with memory states on both sides
	Unknown  int   // matched launches with states on both sides not compared: a region's state unknown (Launch.Unknown), or torn
	Torn     int   // of those, the launches with a torn state on a side (Launch.Torn)
	Differ   int   // compared launches whose states differ
	First    *Pair // the earliest (in run A's order) whose states differ; nil when none
	OnlyA    []int // launches of A with no counterpart in B, in order
	OnlyB    []int // and of B in A

	differ func(Pair)
}

// Window is how far alignment looks ahead for a launch present in one run
// only before it calls two launches a mismatch.
const Window = 64

// Align matches the launches of a and b stream by stream and compares the
// memory after each matched pair.
func Align(a, b *Run) *Result { return AlignEach(a, b, nil) }

// AlignEach is Align, calling differ (when not nil) for every matched pair
// whose memory differs, stream by stream.
func AlignEach(a, b *Run, differ func(Pair)) *Result {
	res := &Result{differ: differ}
	sa, sb := byStream(a), byStream(b)
	for s := 0; s < max(len(sa), len(sb)); s++ {
		var xa, xb []int32
		if s < len(sa) {
			xa = sa[s]
		}
		if s < len(sb) {
			xb = sb[s]
		}
		alignStream(a, b, xa, xb, res)
	}
	slices.Sort(res.OnlyA)
	slices.Sort(res.OnlyB)
	return res
}

// byStream lists the indices of r's launches stream by stream, as int32 (4 bytes a launch:
// a run has fewer than 2^31 launches).
func byStream(r *Run) [][]int32 {
	var out [][]int32
	for i, l := range r.Launches {
		for int(l.Stream) >= len(out) {
			out = append(out, nil)
		}
		out[l.Stream] = append(out[l.Stream], int32(i))
	}
	return out
}

// appendIndices appends indices x to out.
func appendIndices(out []int, x []int32) []int {
	for _, i := range x {
		out = append(out, int(i))
	}
	return out
}

// alignStream walks two launch sequences of one stream. Equal kernels
// match; otherwise it takes the shortest run of launches in one sequence
// that brings the two back in step (within Window), and lists those
// launches as present on one side only.
func alignStream(a, b *Run, xa, xb []int32, res *Result) {
	id := func(r *Run, x []int32, i int) uint64 { return r.identities[r.Launches[x[i]].kernel] }
	i, j := 0, 0
	for i < len(xa) && j < len(xb) {
		if id(a, xa, i) == id(b, xb, j) {
			res.match(a, b, int(xa[i]), int(xb[j]))
			i, j = i+1, j+1
			continue
		}
		skipA, skipB := -1, -1
		for k := 1; k <= Window && (skipA < 0 || skipB < 0); k++ {
			if skipA < 0 && i+k < len(xa) && id(a, xa, i+k) == id(b, xb, j) {
				skipA = k
			}
			if skipB < 0 && j+k < len(xb) && id(b, xb, j+k) == id(a, xa, i) {
				skipB = k
			}
		}
		switch {
		case skipA > 0 && (skipB < 0 || skipA <= skipB):
			res.OnlyA = appendIndices(res.OnlyA, xa[i:i+skipA])
			i += skipA
		case skipB > 0:
			res.OnlyB = appendIndices(res.OnlyB, xb[j:j+skipB])
			j += skipB
		default: // no resync in sight: both launches stand alone
			res.OnlyA = append(res.OnlyA, int(xa[i]))
			res.OnlyB = append(res.OnlyB, int(xb[j]))
			i, j = i+1, j+1
		}
	}
	res.OnlyA = appendIndices(res.OnlyA, xa[i:])
	res.OnlyB = appendIndices(res.OnlyB, xb[j:])
}

func (res *Result) match(a, b *Run, ia, ib int) {
	res.Matched++
	la, lb := a.Launches[ia], b.Launches[ib]
	if !la.HasState || !lb.HasState {
		return
	}
	if la.Unknown || lb.Unknown || la.Torn || lb.Torn {
		res.Unknown++
		if la.Torn || lb.Torn {
			res.Torn++
		}
		return
	}
	res.Compared++
	if la.State == lb.State {
		return
	}
	res.Differ++
	if res.differ != nil {
		res.differ(Pair{ia, ib})
	}
	if res.First == nil || la.Seq < a.Launches[res.First.A].Seq {
		res.First = &Pair{ia, ib}
	}
}

// Uncertain returns r's write set misses that may hide where the runs part ways, earliest
// first. A miss says a region changed unseen after launch since_seq (and before audit_seq), so
// states of it carried in between, which a learned write set called unchanged, may be stale: a
// difference there would go unseen. With first, the launch of r reported as where the runs part
// ways, those whose unseen write may have come before it (since_seq+1 < first): the runs may
// part ways earlier. With first 0 (the runs agree), all of them.
func (r *Run) Uncertain(first uint64) []*pb.WriteSetMiss {
	var out []*pb.WriteSetMiss
	for _, m := range r.Misses {
		if first == 0 || m.GetSinceSeq()+1 < first {
			out = append(out, m)
		}
	}
	slices.SortStableFunc(out, func(a, b *pb.WriteSetMiss) int { return cmp.Compare(a.GetSinceSeq(), b.GetSinceSeq()) })
	return out
}
