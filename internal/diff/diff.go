// Package diff aligns the kernel launches of two recordings of the same
// program and finds the first launch whose device memory after it differs
// between them: what `gpurr diff` reports when two runs that should be
// identical are not.
//
// Launches are aligned per stream (streams numbered in order of first use,
// since handles differ between runs) by kernel identity, in launch order;
// launches present in one run only (an extra warm-up, a different branch)
// are skipped over and listed. Each run is first reduced to one small entry
// per launch (Scan), so two recordings of a million launches each fit in a
// few hundred megabytes; the details of the divergent launch are read in a
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

// Launch is what alignment needs of one launch.
type Launch struct {
	Seq       uint64
	KernelID  uint64
	Identity  uint64 // Kernel.identity: the same kernel of the same module in any run
	Stream    int    // the launch's stream, numbered in order of first use
	Callstack uint64
	State     [16]byte // digest of the region hashes after the launch
	HasState  bool     // an AFTER state with hashes was recorded
	// Unknown: a region of that state is unknown (carried from a state that was lost, format
	// 1.11), so the launch is compared with none: neither equal nor different.
	Unknown bool
	Step    int // training step (recording.Stepper)
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
}

// Scan reads a process's recording once and keeps one Launch per launch.
func Scan(p *recording.Process) (*Run, error) {
	r := &Run{Process: p, Kernels: map[uint64]*pb.Kernel{}}
	type after struct {
		seq     uint64
		digest  [16]byte
		unknown bool
	}
	var states []after
	steps, err := recording.NewStepper(p.StepRange)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", p.Dir, err)
	}
	r.Steps = steps
	res, err := p.Scan(func(b *pb.Batch) error {
		if b.Process != nil {
			mem := b.Process.GetMemory()
			r.Mode, r.WriteSets, r.AuditEvery = mem.GetMode(), mem.GetWriteSets(), mem.GetAuditEvery()
		}
		r.Misses = append(r.Misses, b.WriteSetMisses...)
		for _, k := range b.Kernels {
			r.Kernels[k.GetId()] = &pb.Kernel{Id: k.GetId(), Identity: k.GetIdentity(), Name: k.GetName(), Demangled: k.GetDemangled()}
		}
		steps.Add(b)
		recording.EachCall(b, func(l *pb.Launch) {
			step := steps.Launch(l)
			if l.GetCaptured() {
				return // built a graph node; ran nothing
			}
			r.Launches = append(r.Launches, Launch{Seq: l.GetSeq(), KernelID: l.GetKernelId(),
				Stream: int(l.GetStream()), Callstack: l.GetCallstackId(), Step: step})
		}, func(g *pb.GraphLaunch) { steps.GraphLaunch(g) })
		for _, s := range b.Memory {
			if s.GetPoint() == pb.MemoryState_AFTER && !s.GetLost() {
				states = append(states, after{s.GetLaunchSeq(), StateDigest(s), recording.UnknownRegions(s) > 0})
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
	slices.SortFunc(r.Launches, func(a, b Launch) int { return cmp.Compare(a.Seq, b.Seq) })
	streams := Streams{}
	for i := range r.Launches {
		l := &r.Launches[i]
		if k := r.Kernels[l.KernelID]; k != nil {
			l.Identity = k.GetIdentity()
		}
		l.Stream = streams.Number(uint64(l.Stream))
	}
	for _, s := range states {
		if i, ok := r.find(s.seq); ok {
			r.Launches[i].State, r.Launches[i].HasState, r.Launches[i].Unknown = s.digest, true, s.unknown
		}
	}
	return r, nil
}

// Streams numbers a run's streams in the order its launches, in launch
// order, first use them: handles differ between runs, the order does not.
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

func (r *Run) find(seq uint64) (int, bool) {
	return slices.BinarySearchFunc(r.Launches, seq, func(l Launch, seq uint64) int { return cmp.Compare(l.Seq, seq) })
}

// StateDigest folds a state's region hashes (in launch region order) into
// one 128-bit value: equal digests, equal memory, unless a region's state is
// unknown (recording.UnknownRegions), whose empty hash counts as zeros: such a
// state compares with none.
func StateDigest(s *pb.MemoryState) [16]byte {
	hashes := make([][]byte, len(s.GetRegions()))
	for i, rs := range s.GetRegions() {
		hashes[i] = rs.GetHash()
	}
	return Digest(hashes)
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
func (r *Run) KernelName(l Launch) string {
	k := r.Kernels[l.KernelID]
	if k == nil {
		return fmt.Sprintf("kernel %d (not in the recording)", l.KernelID)
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
	Unknown  int   // matched launches with states on both sides not compared: a region's state unknown (Launch.Unknown)
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
		var xa, xb []int
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

func byStream(r *Run) [][]int {
	var out [][]int
	for i, l := range r.Launches {
		for l.Stream >= len(out) {
			out = append(out, nil)
		}
		out[l.Stream] = append(out[l.Stream], i)
	}
	return out
}

// alignStream walks two launch sequences of one stream. Equal kernels
// match; otherwise it takes the shortest run of launches in one sequence
// that brings the two back in step (within Window), and lists those
// launches as present on one side only.
func alignStream(a, b *Run, xa, xb []int, res *Result) {
	id := func(r *Run, x []int, i int) uint64 { return r.Launches[x[i]].Identity }
	i, j := 0, 0
	for i < len(xa) && j < len(xb) {
		if id(a, xa, i) == id(b, xb, j) {
			res.match(a, b, xa[i], xb[j])
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
			res.OnlyA = append(res.OnlyA, xa[i:i+skipA]...)
			i += skipA
		case skipB > 0:
			res.OnlyB = append(res.OnlyB, xb[j:j+skipB]...)
			j += skipB
		default: // no resync in sight: both launches stand alone
			res.OnlyA = append(res.OnlyA, xa[i])
			res.OnlyB = append(res.OnlyB, xb[j])
			i, j = i+1, j+1
		}
	}
	res.OnlyA = append(res.OnlyA, xa[i:]...)
	res.OnlyB = append(res.OnlyB, xb[j:]...)
}

func (res *Result) match(a, b *Run, ia, ib int) {
	res.Matched++
	la, lb := a.Launches[ia], b.Launches[ib]
	if !la.HasState || !lb.HasState {
		return
	}
	if la.Unknown || lb.Unknown {
		res.Unknown++
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
