package recording

import (
	"cmp"
	"errors"
	"slices"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// ErrStop ends a scan early when a callback of Ordered returns it; the
// scan then returns no error.
var ErrStop = errors.New("stop scanning")

// LaunchRecord is a launch with the records it refers to and the memory
// states taken around it.
type LaunchRecord struct {
	Launch    *pb.Launch
	Kernel    *pb.Kernel    // nil when the recording does not hold it
	Callstack *pb.Callstack // nil when none was taken
	// Forward is where its lines come from when not its own callstack, as
	// Links.LineCallstack says: the callstack of the forward launch of a
	// launch made inside an autograd node's backward (ForwardCallstackID),
	// or, for a kernel XLA launched, the one Links makes of the lines of
	// the recording's XLA dump. nil for other launches and when the
	// recording does not hold it.
	Forward       *pb.Callstack
	Before, After *pb.MemoryState // nil when none was recorded
}

// Ordered reads the process's recording once and calls fn for each launch
// whose sequence number is in seqs (ascending, as a first pass over the
// recording found them), in that order, with its kernel, callstack and
// memory states. fn returning ErrStop ends the scan.
//
// Memory states arrive after their launch, when the GPU finished them (a
// flight recorder's, at exit), and launches of several threads arrive
// slightly out of order, so a launch is held from its first record until it
// is complete (its launch record and the states its MemoryPlan promised:
// AFTER for hash, BEFORE and AFTER for snapshot, or a lost state) and every
// earlier launch in seqs was delivered. Memory is bounded by how far the
// recording's order strays from launch order, not by its length. A state
// that arrives after its launch was delivered is left out; at the end of
// the file every launch still held is delivered as it is.
func (p *Process) Ordered(seqs []uint64, fn func(*LaunchRecord) error) (ScanResult, error) {
	memoryMode := p.Info.GetMemory().GetMode()
	kernels := map[uint64]*pb.Kernel{}
	stacks := map[uint64]*pb.Callstack{}
	held := map[uint64]*LaunchRecord{}
	var links *Links // only for XLA's lines
	if x := p.XLA(); x != nil && x.Err == nil {
		links = NewLinks()
		links.UseXLA(x)
	}
	next := 0 // seqs[next] is the next launch to deliver
	wanted := func(seq uint64) bool {
		_, ok := slices.BinarySearch(seqs[next:], seq)
		return ok
	}
	get := func(seq uint64) *LaunchRecord {
		r := held[seq]
		if r == nil {
			r = &LaunchRecord{}
			held[seq] = r
		}
		return r
	}
	deliver := func(atEnd bool) error {
		for next < len(seqs) {
			seq := seqs[next]
			r := held[seq]
			if !atEnd && !complete(r, memoryMode) {
				return nil
			}
			next++
			delete(held, seq)
			if r == nil || r.Launch == nil {
				continue // the first pass saw it; this one did not (a file still being written)
			}
			r.Kernel = kernels[r.Launch.GetKernelId()]
			r.Callstack = stacks[r.Launch.GetCallstackId()]
			if id := ForwardCallstackID(r.Launch); id != 0 {
				r.Forward = stacks[id]
			} else if links != nil {
				if id := links.LineCallstack(r.Launch); id != r.Launch.GetCallstackId() {
					r.Forward = links.Callstack(id)
				}
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	}
	res, err := p.Scan(func(b *pb.Batch) error {
		if links != nil {
			links.Add(b, false)
		}
		for _, k := range b.Kernels {
			kernels[k.GetId()] = k
		}
		for _, c := range b.Callstacks {
			stacks[c.GetId()] = c
		}
		for _, l := range b.Launches {
			if wanted(l.GetSeq()) {
				get(l.GetSeq()).Launch = l
			}
		}
		for _, s := range b.Memory {
			if !wanted(s.GetLaunchSeq()) {
				continue
			}
			r := get(s.GetLaunchSeq())
			switch s.GetPoint() {
			case pb.MemoryState_BEFORE:
				r.Before = cmp.Or(r.Before, s)
			case pb.MemoryState_AFTER:
				r.After = cmp.Or(r.After, s)
			}
		}
		return deliver(false)
	})
	if err == nil {
		err = deliver(true)
	}
	if errors.Is(err, ErrStop) {
		err = nil
	}
	return res, err
}

// complete reports whether a held launch has every record it will get: its
// launch record and the memory states its plan promised.
func complete(r *LaunchRecord, memoryMode string) bool {
	if r == nil || r.Launch == nil {
		return false
	}
	plan := r.Launch.GetMemory()
	switch {
	case memoryMode == "":
		return true
	case plan == nil: // a writer that left the plan out: an AFTER state may come
		return r.After != nil
	case plan.GetStatus() == pb.MemoryPlan_HASH:
		return r.After != nil
	case plan.GetStatus() == pb.MemoryPlan_SNAPSHOT:
		// A lost state stands for both points of its job.
		return r.After != nil && (r.Before != nil || r.After.GetLost())
	}
	return true // skipped: no state will come
}
