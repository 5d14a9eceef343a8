package recording

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// StateKey names a launch's memory state: its launch and point (before or after).
type StateKey struct {
	Seq   uint64
	Point pb.MemoryState_Point
}

// Tear is a kernel of another stream that ran while gpurr's kernel took a memory state, and
// that reaches an allocation of that state: the state's bytes may be part from before that
// kernel wrote, part from after.
type Tear struct {
	Stream uint32 // CUPTI stream id of the other kernel
	Launch uint64 // its launch's seq
	Kernel string // its name, as the GPU timeline has it (mangled)
}

// String says it as the verbs do: "stream 7's kernel K (launch 12) ran while it was taken".
func (t Tear) String() string {
	return fmt.Sprintf("stream %d's kernel %s (launch %d) ran while it was taken", t.Stream, t.Kernel, t.Launch)
}

// JoinTears says every tear of a state, as String does, in order, joined by "; ".
func JoinTears(tears []Tear) string {
	parts := make([]string, len(tears))
	for i, t := range tears {
		parts[i] = t.String()
	}
	return strings.Join(parts, "; ")
}

// Timeline finds torn memory states from the GPU timeline: a state is taken by gpurr's own
// kernel on its launch's stream, right before (BEFORE) or after (AFTER) the launch; when a
// kernel of another stream that reaches one of the same allocations runs at the same time,
// the state may hold a mix of that kernel's writes and what was there before.
//
// gpurr's kernels carry no launch: the one that took a launch's AFTER state is the first of
// them on the launch's stream that starts at or after the launch's kernel ended, and before
// the stream's next kernel of the program; its BEFORE state, the last one that ended before
// the launch's kernel started, after the stream's previous kernel. A state whose launch has
// no kernel record (GPU timing off or sampled, a graph) or whose gpurr kernel ran on another
// stream (--defer-hashes) cannot be placed, and is not called torn.
//
// Add each batch of a process in order (as Process.Scan gives them), then call Torn.
type Timeline struct {
	launches map[uint32]*pb.Launch // eager launches by correlation id
	bySeq    map[uint64]*pb.Launch
	runs     []timedRun
	own      []*pb.KernelActivity
	states   []StateKey
}

type timedRun struct {
	a *pb.KernelActivity
	l *pb.Launch
}

// NewTimeline returns an empty timeline.
func NewTimeline() *Timeline {
	return &Timeline{launches: map[uint32]*pb.Launch{}, bySeq: map[uint64]*pb.Launch{}}
}

// Add takes a batch's launches, kernel runs, gpurr's kernel runs and memory states.
func (t *Timeline) Add(b *pb.Batch) {
	for _, l := range b.GetLaunches() {
		if !l.GetCaptured() && len(l.GetRegions()) > 0 {
			t.launches[l.GetCorrelationId()] = l
			t.bySeq[l.GetSeq()] = l
		}
	}
	for _, a := range b.GetActivities() {
		if a.GetGraphId() != 0 {
			continue // a graph's kernel: its launch has no states
		}
		if l := t.launches[a.GetCorrelationId()]; l != nil {
			t.runs = append(t.runs, timedRun{a, l})
		}
	}
	t.own = append(t.own, b.GetOwnActivities()...)
	for _, s := range b.GetMemory() {
		if !s.GetLost() && (s.GetPoint() == pb.MemoryState_BEFORE || s.GetPoint() == pb.MemoryState_AFTER) {
			t.states = append(t.states, StateKey{s.GetLaunchSeq(), s.GetPoint()})
		}
	}
}

// streamKey is one stream of one context of one device.
type streamKey struct {
	device, context, stream uint32
}

func keyOf(a *pb.KernelActivity) streamKey {
	return streamKey{a.GetDevice(), a.GetContextUid(), a.GetStreamId()}
}

func byStart(a, b *pb.KernelActivity) int {
	return cmp.Or(cmp.Compare(a.GetStartNs(), b.GetStartNs()), cmp.Compare(a.GetEndNs(), b.GetEndNs()))
}

// Torn gives each state that other streams' kernels may have torn, with those kernels, by
// stream then launch.
func (t *Timeline) Torn() map[StateKey][]Tear {
	slices.SortFunc(t.runs, func(a, b timedRun) int { return byStart(a.a, b.a) })
	slices.SortFunc(t.own, byStart)
	program := map[streamKey][]*pb.KernelActivity{}
	runOf := map[uint64]*pb.KernelActivity{} // a launch's kernel run
	var maxDur uint64
	for _, r := range t.runs {
		program[keyOf(r.a)] = append(program[keyOf(r.a)], r.a)
		runOf[r.l.GetSeq()] = r.a
		maxDur = max(maxDur, r.a.GetEndNs()-min(r.a.GetStartNs(), r.a.GetEndNs()))
	}
	own := map[streamKey][]*pb.KernelActivity{}
	for _, a := range t.own {
		own[keyOf(a)] = append(own[keyOf(a)], a)
	}
	out := map[StateKey][]Tear{}
	for _, key := range t.states {
		l, run := t.bySeq[key.Seq], runOf[key.Seq]
		if l == nil || run == nil {
			continue
		}
		taker := takerOf(run, key.Point, program[keyOf(run)], own[keyOf(run)])
		if taker == nil {
			continue
		}
		var tears []Tear
		// Runs that may overlap the taker start before it ends and at most maxDur before it starts.
		from, _ := slices.BinarySearchFunc(t.runs, taker.GetStartNs()-min(maxDur, taker.GetStartNs()), func(r timedRun, ns uint64) int { return cmp.Compare(r.a.GetStartNs(), ns) })
		for _, r := range t.runs[from:] {
			if r.a.GetStartNs() >= taker.GetEndNs() {
				break
			}
			if r.a.GetEndNs() <= taker.GetStartNs() || r.a.GetStreamId() == run.GetStreamId() || r.a.GetDevice() != run.GetDevice() || !shareAllocation(l, r.l) {
				continue
			}
			tears = append(tears, Tear{Stream: r.a.GetStreamId(), Launch: r.l.GetSeq(), Kernel: r.a.GetName()})
		}
		if len(tears) > 0 {
			slices.SortFunc(tears, func(a, b Tear) int { return cmp.Or(cmp.Compare(a.Stream, b.Stream), cmp.Compare(a.Launch, b.Launch)) })
			out[key] = tears
		}
	}
	return out
}

// takerOf finds the gpurr kernel that took run's launch's state at point, among own (gpurr's
// kernels on run's stream) and program (the program's kernels there), both sorted by start.
func takerOf(run *pb.KernelActivity, point pb.MemoryState_Point, program, own []*pb.KernelActivity) *pb.KernelActivity {
	i, _ := slices.BinarySearchFunc(program, run, byStart)
	if point == pb.MemoryState_AFTER {
		next := ^uint64(0)
		if i+1 < len(program) {
			next = program[i+1].GetStartNs()
		}
		j, _ := slices.BinarySearchFunc(own, run.GetEndNs(), func(a *pb.KernelActivity, ns uint64) int { return cmp.Compare(a.GetStartNs(), ns) })
		if j < len(own) && own[j].GetStartNs() < next {
			return own[j]
		}
		return nil
	}
	prev := uint64(0)
	if i > 0 {
		prev = program[i-1].GetEndNs()
	}
	j, _ := slices.BinarySearchFunc(own, run.GetStartNs(), func(a *pb.KernelActivity, ns uint64) int { return cmp.Compare(a.GetStartNs(), ns) })
	for j--; j >= 0; j-- {
		if own[j].GetEndNs() <= run.GetStartNs() {
			if own[j].GetStartNs() >= prev {
				return own[j]
			}
			return nil
		}
	}
	return nil
}

// shareAllocation: launches a and b reach a common allocation (by id, or by address where
// the driver's range query found one).
func shareAllocation(a, b *pb.Launch) bool {
	for _, ra := range a.GetRegions() {
		for _, rb := range b.GetRegions() {
			if ra.GetAllocationId() != 0 && ra.GetAllocationId() == rb.GetAllocationId() {
				return true
			}
			if ra.GetAddress() < rb.GetAddress()+rb.GetSize() && rb.GetAddress() < ra.GetAddress()+ra.GetSize() {
				return true
			}
		}
	}
	return false
}

// TornStates is Timeline.Torn over the whole process d.
func (d *Data) TornStates() map[StateKey][]Tear {
	t := NewTimeline()
	t.Add(&pb.Batch{Launches: d.Launches, Activities: d.Activities, OwnActivities: d.OwnActivities, Memory: d.Memory})
	return t.Torn()
}
