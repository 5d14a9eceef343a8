package diff

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Prior is a region's state before a launch as a hash-mode recording holds it: the latest of
// the state after the most recent earlier launch (by seq) whose regions include the same
// allocation, the state after a copy or memset into it since (format 1.17: its copy state),
// and, for an allocation gpurr cleared that nothing wrote since, zeros.
type Prior struct {
	// Seq is the last earlier launch that reached the allocation; 0 when none did.
	Seq uint64
	// State is the region's state (carried states count: format 1.11; a cleared allocation's is
	// that of its zeros); nil when unknown, and Unknown says why.
	State   *pb.RegionState
	Unknown string
	// Stored says State's chunks are in the chunk store: it is a snapshot's, or a cleared
	// allocation's (zeros, which need none).
	Stored bool
	// Writer is the launch that left the region as it is: the first of the launches since which
	// its hash has not changed, or the last launch that reached it when that launch was not
	// hashed (Unhashed). 0 when none is known, or when a copy did (Copy).
	Writer       uint64
	WriterKernel string // the writer's kernel, demangled; "" when not known
	Unhashed     bool   // the writer's state after it was not recorded: it may have written anything
	// Copy names the copy or memset that left the region as it is, when one did (format 1.17):
	// what it was ("host-to-device copy", "memset"), and CopyLine the line that made it ("" when
	// not recorded). Unhashed then says its state was lost.
	Copy, CopyLine string
	// Cleared says nothing wrote the region since gpurr cleared it when it was allocated
	// (Allocation.cleared, format 1.17): it held zeros.
	Cleared bool
	copies  bool // the recording holds copy states (format 1.17)
}

// Writer names what left a region as it was before a launch: Prior's writer.
type Writer struct {
	Seq      uint64 `json:"written_by,omitempty"`      // 0 when not known
	Kernel   string `json:"writer_kernel,omitempty"`   // its kernel, demangled; "" when not known
	Unhashed bool   `json:"writer_unhashed,omitempty"` // it was not hashed: it only reached the region last
	Copy     string `json:"writer_copy,omitempty"`     // a copy or memset wrote it last (format 1.17): which
	Line     string `json:"writer_line,omitempty"`     // ... and the line that made it
	Cleared  bool   `json:"writer_cleared,omitempty"`  // nothing wrote it since gpurr cleared it when allocated
	reached  uint64 // the last earlier launch that reached the region; 0 for none
	copies   bool   // the recording holds copy states
}

// WriterOf is p's writer.
func WriterOf(p Prior) Writer {
	return Writer{Seq: p.Writer, Kernel: p.WriterKernel, Unhashed: p.Unhashed, Copy: p.Copy, Line: p.CopyLine,
		Cleared: p.Cleared, reached: p.Seq, copies: p.copies}
}

// Reached reports whether an earlier launch reached the region.
func (w Writer) Reached() bool { return w.reached != 0 }

// Text names the writer for a report: "written by launch 3, fill", "last reached by launch 3,
// fill, which was not hashed", "written by a host-to-device copy at train.py:12 <module>", or
// why there is none.
func (w Writer) Text() string {
	switch {
	case w.Cleared:
		return "nothing wrote it since gpurr cleared it when it was allocated"
	case w.Copy != "" && w.Unhashed:
		return fmt.Sprintf("last written by a %s%s, whose state was lost", w.Copy, atLine(w.Line))
	case w.Copy != "":
		return fmt.Sprintf("written by a %s%s", w.Copy, atLine(w.Line))
	case w.Seq == 0 && w.reached == 0 && w.copies:
		return "no earlier launch or copy wrote it"
	case w.Seq == 0 && w.reached == 0:
		return "no earlier launch reached it: a copy or memset wrote it"
	case w.Seq == 0:
		return "its last writer is not known"
	case w.Unhashed:
		return fmt.Sprintf("last reached by launch %d, %s, which was not hashed", w.Seq, w.Kernel)
	case w.Kernel == "":
		return fmt.Sprintf("written by launch %d", w.Seq)
	}
	return fmt.Sprintf("written by launch %d, %s", w.Seq, w.Kernel)
}

// atLine is " at LINE", "" for no line.
func atLine(line string) string {
	if line == "" {
		return ""
	}
	return " at " + line
}

// AllocationKey names an allocation across a process's launches: its Allocation.id, or for a
// region the agent found by asking the driver (allocation_id 0) its address and size.
type AllocationKey struct{ id, address, size uint64 }

// AllocationOf is the allocation region r belongs to.
func AllocationOf(r *pb.Region) AllocationKey {
	if r.GetAllocationId() != 0 {
		return AllocationKey{id: r.GetAllocationId()}
	}
	return AllocationKey{address: r.GetAddress(), size: r.GetSize()}
}

// PriorStates reads p's launches up to target, streamed (Process.Ordered), and returns, for each
// of target's regions, its state before target (Prior). seqs are the launches of p to read, in
// ascending order: every launch before target that ran. A seq below target that is not among
// them (a CUDA graph replay, whose kernels get no memory state; a launch captured into a graph
// or not recorded) is taken for a call that may have written any memory: a region reached
// before it is unknown. In a recording of format 1.17 or later, the copies and memsets into
// target's regions and the allocations gpurr cleared come from one more pass (priorWrites),
// and each lies after the last launch call made before it. Memory holds one entry per region
// of target.
func PriorStates(p *recording.Process, seqs []uint64, target *pb.Launch) ([]Prior, error) {
	return priorStates(p, seqs, target, true)
}

// PriorStatesRead is PriorStates for a caller that has read p whole already and knows whether
// it holds copy states or allocations gpurr cleared (writes): without them it spares the pass
// that reads them (on a million launches, half of gpurr nan's time).
func PriorStatesRead(p *recording.Process, seqs []uint64, target *pb.Launch, writes bool) ([]Prior, error) {
	return priorStates(p, seqs, target, writes)
}

func priorStates(p *recording.Process, seqs []uint64, target *pb.Launch, readWrites bool) ([]Prior, error) {
	seqs = seqs[:sortedBelow(seqs, target.GetSeq())]
	out := make([]Prior, len(target.GetRegions()))
	tracked := map[AllocationKey][]int{} // target's regions by allocation
	for i, r := range target.GetRegions() {
		tracked[AllocationOf(r)] = append(tracked[AllocationOf(r)], i)
	}
	var writes []priorWrite
	copies, err := copyStatesKept(p), error(nil)
	if readWrites {
		if writes, copies, err = priorWrites(p, target, tracked); err != nil {
			return nil, err
		}
	}
	hashes := make([][]byte, len(out)) // the hash of each region's Prior.State
	at := make([]uint64, len(out))     // where each region's last write lies: the launch, or the call before a copy
	// The last run of seqs that no launch read took: calls gpurr did not hash.
	var gapLo, gapHi, prev uint64
	gap := func(upTo uint64) {
		if upTo > prev+1 {
			gapLo, gapHi = prev+1, upTo-1
		}
	}
	// changed notes region i's new state rs, and whether its hash differs from the last one.
	changed := func(i int, rs *pb.RegionState) bool {
		differs := hashes[i] == nil || !bytes.Equal(hashes[i], rs.GetHash())
		hashes[i] = rs.GetHash()
		return differs
	}
	// write applies writes that are not launches, in order, up to the call seq.
	next := 0
	write := func(seq uint64) {
		for ; next < len(writes) && writes[next].after < seq; next++ {
			w := writes[next]
			for _, i := range tracked[w.key] {
				pr := &out[i]
				at[i] = w.after
				switch {
				case w.cleared:
					*pr = Prior{Seq: pr.Seq, State: w.state, Stored: true, Cleared: true}
					changed(i, w.state)
				case w.state == nil:
					*pr = Prior{Seq: pr.Seq, Copy: w.what, CopyLine: w.line, Unhashed: true,
						Unknown: fmt.Sprintf("the %s%s that last wrote it lost its state (%s)", w.what, atLine(w.line), cmp.Or(w.lost, "lost"))}
					hashes[i] = nil
				default:
					if changed(i, w.state) || pr.State == nil {
						pr.Writer, pr.WriterKernel, pr.Unhashed, pr.Cleared = 0, "", false, false
						pr.Copy, pr.CopyLine = w.what, w.line
					}
					pr.State, pr.Stored, pr.Unknown = w.state, w.stored, ""
				}
			}
		}
	}
	visit := func(r *recording.LaunchRecord) {
		l := r.Launch
		if l.GetCaptured() {
			return // built a graph node; ran nothing
		}
		kernel := ""
		if r.Kernel != nil {
			kernel = cmp.Or(r.Kernel.GetDemangled(), recording.Demangle(r.Kernel.GetName()))
		}
		for ri, reg := range l.GetRegions() {
			for _, i := range tracked[AllocationOf(reg)] {
				pr := &out[i]
				pr.Seq, at[i] = l.GetSeq(), l.GetSeq()
				var rs *pb.RegionState
				if after := r.After; after != nil && !after.GetLost() && ri < len(after.GetRegions()) {
					rs = after.GetRegions()[ri]
				}
				switch {
				case rs == nil:
					*pr = Prior{Seq: l.GetSeq(), Writer: l.GetSeq(), WriterKernel: kernel, Unhashed: true, Unknown: notHashed(l, r.After)}
					hashes[i] = nil
				case rs.GetUnknown():
					*pr = Prior{Seq: l.GetSeq(), Unknown: fmt.Sprintf("launch %d, the last to reach it, carried its state from one that was lost", l.GetSeq())}
					hashes[i] = nil
				default:
					if changed(i, rs) || pr.State == nil {
						pr.Writer, pr.WriterKernel, pr.Unhashed, pr.Copy, pr.CopyLine, pr.Cleared = l.GetSeq(), kernel, false, "", "", false
						if rs.GetCarried() != pb.RegionState_NOT_CARRIED {
							pr.Writer, pr.WriterKernel = rs.GetCarriedFrom(), "" // its kernel is not at hand
						}
					}
					pr.State, pr.Stored, pr.Unknown = rs, r.After.GetSnapshot(), ""
				}
			}
		}
	}
	err = orderedUpTo(p, seqs, func(r *recording.LaunchRecord) error {
		write(r.Launch.GetSeq())
		gap(r.Launch.GetSeq())
		prev = r.Launch.GetSeq()
		visit(r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	write(target.GetSeq())
	gap(target.GetSeq())
	for i := range out {
		pr := &out[i]
		pr.copies = copies
		switch {
		case pr.State == nil && pr.Unknown != "":
		case pr.State == nil && copies && gapHi > 0:
			pr.Unknown = fmt.Sprintf("no earlier launch or copy reached it (a 2D copy, which gpurr does not hash, or %s may have written it)", unseen(gapLo, gapHi))
		case pr.State == nil && copies:
			pr.Unknown = "no earlier launch or copy reached it (a 2D copy, which gpurr does not hash, may have written it)"
		case pr.State == nil && gapHi > 0:
			pr.Unknown = fmt.Sprintf("no earlier launch reached it: a copy or memset wrote it, or %s", unseen(gapLo, gapHi))
		case pr.State == nil:
			pr.Unknown = "no earlier launch reached it: a copy or memset wrote it, which gpurr does not hash"
		case gapHi > at[i]:
			pr.Unknown = fmt.Sprintf("after %s, ran %s", lastWrite(*pr), unseen(max(gapLo, at[i]+1), gapHi))
			pr.State, pr.Stored = nil, false
		}
	}
	return out, nil
}

// lastWrite names what wrote a region last, for a message: "launch 3, which last reached it",
// "the host-to-device copy at train.py:12 <module>, which last wrote it", "its allocation,
// which gpurr cleared".
func lastWrite(p Prior) string {
	switch {
	case p.Cleared:
		return "its allocation, which gpurr cleared"
	case p.Copy != "":
		return "the " + p.Copy + atLine(p.CopyLine) + ", which last wrote it"
	}
	return fmt.Sprintf("launch %d, which last reached it", p.Seq)
}

// priorWrite is a write to one of a launch's regions that is no launch (format 1.17): a copy or
// memset whose state the agent took (a copy state), or the clearing of an allocation gpurr
// made as the program allocated it.
type priorWrite struct {
	after   uint64 // the last launch call made before it
	call    uint32 // the copy's correlation id; 0 for a clearing
	key     AllocationKey
	state   *pb.RegionState // nil for a lost copy state
	stored  bool            // state's chunks are in the chunk store (a snapshot)
	cleared bool
	what    string // a copy's kind: "host-to-device copy", "memset", ...
	line    string // the line that made it
	lost    string // why a lost copy state was lost
}

// errWritesEnough stops priorWrites' scan.
var errWritesEnough = errors.New("enough")

// priorWrites reads the copy states and the cleared allocations of target's regions (tracked)
// that came before target, in order (by the launch call before each, a clearing first, then
// copies by correlation id); copies says whether the recording holds copy states at all (format
// 1.17 with hash or snapshot memory capture). A copy state arrives after its call, when the GPU
// finished it, ahead of target's state after it: the scan stops at the frame that holds that,
// or reads to the end.
func priorWrites(p *recording.Process, target *pb.Launch, tracked map[AllocationKey][]int) (writes []priorWrite, copies bool, err error) {
	if !copyStatesKept(p) {
		return nil, false, nil
	}
	nanTypes := len(p.Info.GetMemory().GetNanScan())
	calls := recording.HostCalls{}
	stacks := map[uint64]*pb.Callstack{}
	var states []*pb.MemoryState
	_, err = p.Scan(func(b *pb.Batch) error {
		for _, a := range b.GetAllocations() {
			if k := (AllocationKey{id: a.GetId()}); a.GetCleared() && !a.GetFreed() && len(tracked[k]) > 0 {
				writes = append(writes, priorWrite{after: a.GetLaunchSeq(), key: k, state: zeroState(a.GetSize(), nanTypes), stored: true, cleared: true})
			}
		}
		for _, c := range b.GetCallstacks() {
			stacks[c.GetId()] = c
		}
		for _, h := range b.GetHostCalls() {
			if copyKind(h.GetApi()) != "" {
				calls[h.GetCorrelationId()] = h
			}
		}
		for _, s := range b.GetCopyStates() {
			if s.GetLaunchSeq() < target.GetSeq() {
				states = append(states, s)
			}
		}
		for _, s := range b.GetMemory() {
			if s.GetLaunchSeq() == target.GetSeq() && s.GetPoint() == pb.MemoryState_AFTER {
				return errWritesEnough
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errWritesEnough) {
		return nil, false, err
	}
	for _, s := range states {
		h := calls.Of(s.GetCorrelationId())
		what, line := cmp.Or(copyKind(h.GetApi()), "copy or memset"), recording.Line(stacks[h.GetCallstackId()])
		for j, reg := range s.GetCopyRegions() {
			k := AllocationOf(reg)
			if len(tracked[k]) == 0 {
				continue
			}
			w := priorWrite{after: s.GetLaunchSeq(), call: s.GetCorrelationId(), key: k, what: what, line: line, lost: s.GetLostReason()}
			if !s.GetLost() && j < len(s.GetRegions()) && !s.GetRegions()[j].GetUnknown() {
				w.state, w.stored = s.GetRegions()[j], s.GetSnapshot()
			}
			writes = append(writes, w)
		}
	}
	slices.SortStableFunc(writes, func(a, b priorWrite) int {
		return cmp.Or(cmp.Compare(a.after, b.after), cmp.Compare(a.call, b.call))
	})
	return writes, true, nil
}

// copyStatesKept: p's agent took copy states (format 1.17 with hash or snapshot memory capture).
func copyStatesKept(p *recording.Process) bool {
	mode := p.Info.GetMemory().GetMode()
	return !(p.Version.Major == 1 && p.Version.Minor < 17) && (mode == recording.MemoryHash || mode == recording.MemorySnapshot)
}

// copyKind says what a host call of a copy or memset into device memory is, by its driver
// call's name: "host-to-device copy", "device-to-device copy", "peer copy", "memset", "copy"
// (cuMemcpy, whose direction its addresses say); "" for any other call.
func copyKind(api string) string {
	switch {
	case strings.HasPrefix(api, "cuMemset"):
		return "memset"
	case strings.HasPrefix(api, "cuMemcpyHtoD"):
		return "host-to-device copy"
	case strings.HasPrefix(api, "cuMemcpyDtoD"):
		return "device-to-device copy"
	case strings.HasPrefix(api, "cuMemcpyPeer"):
		return "peer copy"
	case api == "cuMemcpy", api == "cuMemcpyAsync", strings.HasPrefix(api, "cuMemcpy_"), strings.HasPrefix(api, "cuMemcpyAsync_"):
		return "copy"
	}
	return ""
}

// zeroState is the state of size bytes of zeros, as the agent would hash them, with nanTypes
// types' NaN and Inf counts (none).
func zeroState(size uint64, nanTypes int) *pb.RegionState {
	var hashes []byte
	full := memhash.Chunk(make([]byte, memhash.ChunkSize)).Bytes()
	for off := uint64(0); off < size; off += memhash.ChunkSize {
		h := full
		if n := size - off; n < memhash.ChunkSize {
			h = memhash.Chunk(make([]byte, n)).Bytes()
		}
		hashes = append(hashes, h[:]...)
	}
	region := memhash.RegionOfEncoded(hashes, size).Bytes()
	return &pb.RegionState{Hash: region[:], ChunkHashes: hashes, NanCount: make([]uint64, nanTypes), InfCount: make([]uint64, nanTypes)}
}

// notHashed says why a launch has no state of a region after it.
func notHashed(l *pb.Launch, after *pb.MemoryState) string {
	switch {
	case after.GetLost():
		return fmt.Sprintf("launch %d, the last to reach it, lost its state (%s)", l.GetSeq(), cmp.Or(after.GetLostReason(), "lost"))
	case after != nil:
		return fmt.Sprintf("launch %d, the last to reach it, has no state of it", l.GetSeq())
	}
	return fmt.Sprintf("launch %d, the last to reach it, was not hashed (%s)", l.GetSeq(), cmp.Or(recording.EnumText(l.GetMemory().GetStatus()), "no memory plan"))
}

// unseen names calls lo..hi, which the recording holds no launch with a memory state for.
func unseen(lo, hi uint64) string {
	if lo == hi {
		return fmt.Sprintf("call %d, with no memory state recorded (a CUDA graph replay, or a launch not recorded)", lo)
	}
	return fmt.Sprintf("calls %d..%d, with no memory state recorded (CUDA graph replays, or launches not recorded)", lo, hi)
}

// sortedBelow is how many of the ascending seqs are below seq.
func sortedBelow(seqs []uint64, seq uint64) int {
	n, _ := slices.BinarySearch(seqs, seq)
	return n
}
