package diff

import (
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// threaded scans a testrec.Threaded run, and returns the seqs of each worker's launches.
func threaded(t *testing.T, o testrec.Threaded) (*Run, [][]uint64) {
	t.Helper()
	batches, seqs := testrec.ThreadedBatches(o)
	r, err := Scan(testrec.OpenBatches(t, batches...).Processes[0])
	if err != nil {
		t.Fatal(err)
	}
	return r, seqs
}

// Orders in which 8 workers reach their launches.
var (
	created  = []int{0, 1, 2, 3, 4, 5, 6, 7}
	shuffled = []int{5, 2, 7, 0, 3, 6, 1, 4}
	reversed = []int{7, 6, 5, 4, 3, 2, 1, 0}
)

// Eight threads that each launch on a stream of their own, in another order in each run: their
// launches pair thread by thread, so runs with equal memory per thread agree, where numbering
// streams by first use paired the first thread to launch in one run with the first in the
// other.
func TestThreadsPaired(t *testing.T) {
	for _, c := range []struct {
		name     string
		a, b     testrec.Threaded
		launches int // of each worker
	}{
		{"one launch each", testrec.Threaded{Workers: 8, Order: created}, testrec.Threaded{Workers: 8, Order: shuffled}, 1},
		{"written late", testrec.Threaded{Workers: 8, Order: reversed, Late: true}, testrec.Threaded{Workers: 8, Order: shuffled, Late: true}, 1},
		{"three rounds", testrec.Threaded{Workers: 8, Order: shuffled, Launches: 3}, testrec.Threaded{Workers: 8, Order: reversed, Launches: 3, Late: true}, 3},
	} {
		a, _ := threaded(t, c.a)
		b, _ := threaded(t, c.b)
		n := 1 + 8*c.launches
		res := Align(a, b)
		if res.First != nil || res.Matched != n || res.Compared != n || len(res.OnlyA)+len(res.OnlyB) > 0 {
			t.Errorf("%s: %+v, want %d launches matched and compared, none differing", c.name, res, n)
		}
		if len(a.Units) != 9 || a.Units[0].Tid != 4242 || a.Units[1].Tid != testrec.WorkerTID(0) || a.Units[8].Tid != testrec.WorkerTID(7) {
			t.Errorf("%s: units %+v, want the main thread's, then each worker's in creation order", c.name, a.Units)
		}
		if got := a.AlikeThreads(); got != 8 {
			t.Errorf("%s: %d threads alike, want 8", c.name, got)
		}
		// The problem: numbered in order of first use, the k-th thread to launch in A pairs
		// with the k-th in B, and their launches differ where those are other threads.
		others := 0
		for k := range c.a.Order {
			if c.a.Order[k] != c.b.Order[k] {
				others++
			}
		}
		a.NumberByFirstUse()
		b.NumberByFirstUse()
		if old := Align(a, b); old.Differ != others*c.launches {
			t.Errorf("%s: by first use %d launches differ, want %d: the test no longer shows the problem", c.name, old.Differ, others*c.launches)
		}
	}
}

// Numbering by thread keeps a launch's entry at 40 bytes: a run of ten million launches holds
// ten million of them.
func TestLaunchSize(t *testing.T) {
	if n := unsafe.Sizeof(Launch{}); n != 40 {
		t.Errorf("a Launch takes %d bytes, want 40", n)
	}
}

// One thread's data differs: the report names that thread's launch in both runs, whatever
// order the threads launched in.
func TestThreadsPairedChanged(t *testing.T) {
	for _, changed := range []int{1, 4, 8} {
		a, seqsA := threaded(t, testrec.Threaded{Workers: 8, Order: shuffled, Launches: 2})
		b, seqsB := threaded(t, testrec.Threaded{Workers: 8, Order: reversed, Launches: 2, Late: true, Changed: changed})
		res := Align(a, b)
		w := changed - 1
		if res.First == nil || a.Launches[res.First.A].Seq != seqsA[w][0] || b.Launches[res.First.B].Seq != seqsB[w][0] || res.Differ != 2 || res.Compared != 17 {
			t.Errorf("worker %d changed: %+v, want the first at its launches %d of A and %d of B, 2 differing", w, res, seqsA[w][0], seqsB[w][0])
		}
	}
}

// Threads rank main first, then by tid; a stream belongs to the first thread in that ranking
// that launched on it, and each thread's streams are numbered in the order it first used
// them, whatever order the launches are added in.
func TestThreadsNumbering(t *testing.T) {
	const pid = 100
	type launch struct {
		seq    uint64
		tid    uint32
		stream uint64
	}
	launches := []launch{{1, 105, 0xa}, {2, 103, 0xb}, {3, pid, 0xc}, {4, 103, 0xa}, {5, pid, 0xd}, {6, 103, 0xe}, {7, 105, 0xc}}
	want := map[uint64]struct {
		number int32
		tid    uint32
		seq    uint64
	}{0xc: {0, pid, 3}, 0xd: {1, pid, 5}, 0xb: {2, 103, 2}, 0xa: {3, 103, 4}, 0xe: {4, 103, 6}}
	for _, reverse := range []bool{false, true} {
		ls := slices.Clone(launches)
		if reverse {
			slices.Reverse(ls)
		}
		th := NewThreads(pid)
		added := map[uint64]int32{}
		for _, l := range ls {
			added[l.stream] = th.Add(&pb.Launch{Seq: l.seq, Tid: l.tid, Stream: l.stream})
		}
		units, number := th.Units()
		for handle, w := range want {
			u := units[number[added[handle]]]
			if number[added[handle]] != w.number || u.Handle != handle || u.Tid != w.tid || u.Seq != w.seq {
				t.Errorf("reverse %v: stream %#x is %d %+v, want %d owned by %d from launch %d", reverse, handle, number[added[handle]], u, w.number, w.tid, w.seq)
			}
		}
		if first := units[number[added[0xa]]].FirstSeq; first != 1 {
			t.Errorf("reverse %v: stream 0xa first used at %d, want 1", reverse, first)
		}
	}
	// Without thread ids (all 0), streams are numbered in order of first use.
	th := NewThreads(pid)
	for _, l := range []launch{{3, 0, 0xc}, {1, 0, 0xa}, {2, 0, 0xb}, {4, 0, 0xa}} {
		th.Add(&pb.Launch{Seq: l.seq, Stream: l.stream})
	}
	units, _ := th.Units()
	if got := []uint64{units[0].Handle, units[1].Handle, units[2].Handle}; !slices.Equal(got, []uint64{0xa, 0xb, 0xc}) {
		t.Errorf("without tids: %#x, want streams by first use", got)
	}
}

// PyTorch: the main thread runs the forward pass and autograd's engine thread the backward,
// on the same (current) stream, which stays one stream aligned in launch order, numbered as
// in order of first use; a side stream only the main thread uses follows it.
func TestThreadsAutograd(t *testing.T) {
	const pid, engine = 4242, 4242 + 11
	const current, side = 0x5581_0000_0100, 0x5581_0000_0200
	h := func(b byte) *pb.RegionState {
		hash := make([]byte, recording.HashBytes)
		hash[0] = b
		return &pb.RegionState{Hash: hash}
	}
	steps := func(late bool, gradient byte) *Run {
		var launches []*pb.Launch
		var states []*pb.MemoryState
		add := func(tid uint32, stream, kernel uint64) {
			seq := uint64(len(launches) + 1)
			launches = append(launches, &pb.Launch{Seq: seq, Tid: tid, Stream: stream, KernelId: kernel, CallstackId: kernel, HostNs: seq})
			state := byte(seq)
			if tid == engine && kernel == 3 {
				state = gradient
			}
			states = append(states, &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER, Regions: []*pb.RegionState{h(state)}})
		}
		for range 2 {
			add(pid, current, 1)    // forward
			add(pid, side, 2)       // a copy kernel on a side stream
			add(pid, current, 1)    // forward
			add(engine, current, 3) // backward
			add(engine, current, 1)
			add(pid, current, 4) // optimizer step
		}
		first := &pb.Batch{Process: &pb.Process{Pid: pid, Memory: &pb.MemoryConfig{Mode: "hash"}},
			Kernels: []*pb.Kernel{{Id: 1, Identity: 11}, {Id: 2, Identity: 22}, {Id: 3, Identity: 33}, {Id: 4, Identity: 44}}}
		batches := []*pb.Batch{first}
		if late { // the engine thread's launches reach the recording after the main thread's
			main, eng := &pb.Batch{}, &pb.Batch{}
			for i, l := range launches {
				b := main
				if l.Tid == engine {
					b = eng
				}
				b.Launches, b.Memory = append(b.Launches, l), append(b.Memory, states[i])
			}
			batches = append(batches, main, eng)
		} else {
			batches = append(batches, &pb.Batch{Launches: launches, Memory: states})
		}
		r, err := Scan(testrec.OpenBatches(t, batches...).Processes[0])
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a := steps(false, 30)
	for i, l := range a.Launches {
		if want := int32(0); a.KernelID(l) == 2 {
			if l.Stream != 1 {
				t.Errorf("launch %d on the side stream: stream %d, want 1", i+1, l.Stream)
			}
		} else if l.Stream != want {
			t.Errorf("launch %d: stream %d, want 0 (main and engine thread on the current stream)", i+1, l.Stream)
		}
	}
	if len(a.Units) != 2 || a.Units[0].Tid != pid || a.AlikeThreads() != 0 {
		t.Errorf("units %+v, %d alike; want the current stream then the side stream, both the main thread's", a.Units, a.AlikeThreads())
	}
	if res := Align(a, steps(true, 30)); res.First != nil || res.Matched != 12 || res.Compared != 12 {
		t.Errorf("same steps, engine's launches late: %+v", res)
	}
	res := Align(a, steps(true, 31))
	if res.First == nil || a.Launches[res.First.A].Seq != 4 || res.Differ != 2 {
		t.Errorf("a gradient differs: %+v, want the first at launch 4", res)
	}
}

// A recording of threads scanned from a file: what Scan keeps is what it keeps of the same
// launches read in seq order.
func TestThreadsScanCompact(t *testing.T) {
	p, err := testrec.WriteThreaded(filepath.Join(t.TempDir(), "threads"), testrec.Threaded{Workers: 8, Order: shuffled, Launches: 2, Late: true})
	if err != nil {
		t.Fatal(err)
	}
	late, err := Scan(p)
	if err != nil {
		t.Fatal(err)
	}
	inOrder, _ := threaded(t, testrec.Threaded{Workers: 8, Order: shuffled, Launches: 2})
	if !slices.Equal(late.Launches, inOrder.Launches) || !slices.Equal(late.Units, inOrder.Units) {
		t.Errorf("written late: %+v\nin order: %+v", late.Units, inOrder.Units)
	}
}
