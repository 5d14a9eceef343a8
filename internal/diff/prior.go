package diff

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Prior is a region's state before a launch as a hash-mode recording holds it: the state after
// the most recent earlier launch (by seq) whose regions include the same allocation.
type Prior struct {
	// Seq is that launch; 0 when no earlier launch reached the allocation.
	Seq uint64
	// State is its state of the region (carried states count: format 1.11); nil when unknown,
	// and Unknown says why.
	State   *pb.RegionState
	Unknown string
	// Writer is the launch that left the region as it is: the first of the launches since which
	// its hash has not changed, or the last launch that reached it when that launch was not
	// hashed (Unhashed). 0 when none is known.
	Writer       uint64
	WriterKernel string // the writer's kernel, demangled; "" when not known
	Unhashed     bool   // the writer's state after it was not recorded: it may have written anything
}

// Writer names the launch that left a region as it was before a launch: Prior's writer.
type Writer struct {
	Seq      uint64 `json:"written_by,omitempty"`      // 0 when not known
	Kernel   string `json:"writer_kernel,omitempty"`   // its kernel, demangled; "" when not known
	Unhashed bool   `json:"writer_unhashed,omitempty"` // it was not hashed: it only reached the region last
	reached  uint64 // the last earlier launch that reached the region; 0 for none
}

// WriterOf is p's writer.
func WriterOf(p Prior) Writer {
	return Writer{Seq: p.Writer, Kernel: p.WriterKernel, Unhashed: p.Unhashed, reached: p.Seq}
}

// Reached reports whether an earlier launch reached the region.
func (w Writer) Reached() bool { return w.reached != 0 }

// Text names the writer for a report: "written by launch 3, fill", "last reached by launch 3,
// fill, which was not hashed", or why there is none.
func (w Writer) Text() string {
	switch {
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

// regionKey names an allocation across launches: its Allocation.id, or for a region the agent
// found by asking the driver (allocation_id 0) its address and size.
type regionKey struct{ id, address, size uint64 }

func keyOf(r *pb.Region) regionKey {
	if r.GetAllocationId() != 0 {
		return regionKey{id: r.GetAllocationId()}
	}
	return regionKey{address: r.GetAddress(), size: r.GetSize()}
}

// PriorStates reads p's launches up to target, streamed (Process.Ordered), and returns, for each
// of target's regions, its state before target (Prior). seqs are the launches of p to read, in
// ascending order: every launch before target that ran. A seq below target that is not among
// them (a CUDA graph replay, whose kernels get no memory state; a launch captured into a graph
// or not recorded) is taken for a call that may have written any memory: a region reached
// before it is unknown. Memory holds one entry per region of target.
func PriorStates(p *recording.Process, seqs []uint64, target *pb.Launch) ([]Prior, error) {
	seqs = seqs[:sortedBelow(seqs, target.GetSeq())]
	out := make([]Prior, len(target.GetRegions()))
	tracked := map[regionKey][]int{} // target's regions by allocation
	for i, r := range target.GetRegions() {
		tracked[keyOf(r)] = append(tracked[keyOf(r)], i)
	}
	hashes := make([][]byte, len(out)) // the hash of each region's Prior.State
	// The last run of seqs that no launch read took: calls gpurr did not hash.
	var gapLo, gapHi, prev uint64
	gap := func(upTo uint64) {
		if upTo > prev+1 {
			gapLo, gapHi = prev+1, upTo-1
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
			for _, i := range tracked[keyOf(reg)] {
				pr := &out[i]
				pr.Seq = l.GetSeq()
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
					if hashes[i] == nil || !bytes.Equal(hashes[i], rs.GetHash()) {
						pr.Writer, pr.WriterKernel, pr.Unhashed = l.GetSeq(), kernel, false
						if rs.GetCarried() != pb.RegionState_NOT_CARRIED {
							pr.Writer, pr.WriterKernel = rs.GetCarriedFrom(), "" // its kernel is not at hand
						}
					}
					pr.State, pr.Unknown, hashes[i] = rs, "", rs.GetHash()
				}
			}
		}
	}
	err := orderedUpTo(p, seqs, func(r *recording.LaunchRecord) error {
		gap(r.Launch.GetSeq())
		prev = r.Launch.GetSeq()
		visit(r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	gap(target.GetSeq())
	for i := range out {
		pr := &out[i]
		switch {
		case pr.Seq == 0 && gapHi > 0:
			pr.Unknown = fmt.Sprintf("no earlier launch reached it: a copy or memset wrote it, or %s", unseen(gapLo, gapHi))
		case pr.Seq == 0:
			pr.Unknown = "no earlier launch reached it: a copy or memset wrote it, which gpurr does not hash"
		case gapHi > pr.Seq && pr.State != nil:
			pr.State = nil
			pr.Unknown = fmt.Sprintf("after launch %d, which last reached it, ran %s", pr.Seq, unseen(max(gapLo, pr.Seq+1), gapHi))
		}
	}
	return out, nil
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
