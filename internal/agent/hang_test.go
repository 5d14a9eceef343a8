package agent

import (
	"slices"
	"testing"
	"time"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func TestHangWatch(t *testing.T) {
	h := newHangWatch(2 * time.Second)
	const s = uint64(time.Second)
	mk := func(seq uint64, corr uint32, at uint64, stream uint32) *pb.Launch {
		return &pb.Launch{Seq: seq, CorrelationId: corr, HostNs: at, StreamId: stream, KernelId: 7,
			Grid: &pb.Dim3{X: 4, Y: 1, Z: 1}, Block: &pb.Dim3{X: 128, Y: 1, Z: 1}}
	}
	h.launch(mk(1, 101, 1*s, 1))
	h.launch(mk(2, 102, 1*s, 1))
	h.launch(mk(3, 103, 2*s, 2))
	h.launch(&pb.Launch{Seq: 4, CorrelationId: 104, HostNs: 1 * s, Captured: true}) // builds a graph node, runs nothing
	h.launch(&pb.Launch{Seq: 5, CorrelationId: 105, HostNs: 1 * s, Result: 1})      // failed: never ran
	h.finished(&pb.KernelActivity{CorrelationId: 101, EndNs: 1})
	if got := h.overdue(2 * s); got != nil {
		t.Fatalf("overdue before the timeout: %v", got)
	}
	got := h.overdue(3*s + 1)
	if len(got) != 1 || got[0].GetSeq() != 2 {
		t.Fatalf("overdue at 3 s: %v, want launch 2 only", got)
	}
	hang := h.hangRecord(got, 3*s+1, true)
	if l := hang.GetLaunch(); l.GetSeq() != 2 || l.GetUnfinished() != 1 || l.GetGrid().GetX() != 4 || len(hang.Streams) != 1 ||
		hang.Streams[0].GetSeq() != 3 || hang.Streams[0].GetStreamId() != 2 || hang.TimeoutNs != 2*s || !hang.Killed {
		t.Errorf("hang %v: want launch 2, and launch 3 of stream 2 unfinished, after 2 s, killed", hang)
	}
	if got := h.overdue(10 * s); len(got) != 2 || got[0].GetSeq() != 2 || got[1].GetSeq() != 3 {
		t.Errorf("overdue at 10 s: %v, want launches 2 and 3, oldest first", got)
	}
	// Bounded: past max entries the oldest is forgotten, and counted.
	b := newHangWatch(time.Second)
	b.max = 2
	for i := range uint32(4) {
		b.launch(mk(uint64(i+1), i+1, s, 0))
	}
	if len(b.pending) != 2 || b.Lost != 2 || b.pending[1] != nil || b.pending[4] == nil {
		t.Errorf("bounded watch: %d pending, %d lost", len(b.pending), b.Lost)
	}
	// A kernel's record that comes before its launch's still finishes it.
	e := newHangWatch(time.Second)
	e.finished(&pb.KernelActivity{CorrelationId: 9, EndNs: 1})
	e.launch(mk(1, 9, 0, 0))
	if got := e.overdue(10 * s); got != nil {
		t.Errorf("a launch whose kernel finished first is overdue: %v", got)
	}
	// A suspicion first: the next check, after a forced flush, reports what is still overdue.
	c := newHangWatch(time.Second)
	c.launch(mk(1, 1, 0, 0))
	c.launch(mk(2, 2, 0, 0))
	if stuck, flush := c.check(2 * s); stuck != nil || !flush {
		t.Errorf("first check: %v, flush %v; want a forced flush and no report", stuck, flush)
	}
	c.finished(&pb.KernelActivity{CorrelationId: 1, EndNs: 5})   // the flush handed over launch 1's record,
	c.finished(&pb.KernelActivity{CorrelationId: 2, StartNs: 4}) // and launch 2's incomplete one: it still runs
	if stuck, flush := c.check(3 * s); len(stuck) != 1 || stuck[0].GetSeq() != 2 || flush {
		t.Errorf("second check: %v, flush %v; want launch 2 reported", stuck, flush)
	}
	c.finished(&pb.KernelActivity{CorrelationId: 2, EndNs: 9})
	if stuck, flush := c.check(4 * s); stuck != nil || flush {
		t.Errorf("nothing overdue, yet %v, flush %v", stuck, flush)
	}
	c.launch(mk(3, 3, 4*s, 0))
	if stuck, flush := c.check(6 * s); stuck != nil || !flush {
		t.Errorf("a new suspicion after a clear check: %v, flush %v; want a forced flush first", stuck, flush)
	}
	var none *hangWatch
	none.launch(mk(1, 1, 0, 0))
	if none.overdue(100*s) != nil || newHangWatch(0) != nil {
		t.Error("no timeout, yet a watch")
	}
}

// TestHangReportNamesLines: the hang report names each unfinished launch by the line that made
// it, from the callstacks the agent met: the program's own line and the library line below it,
// native frames where there is no Python frame, and for a launch of autograd's backward the
// forward line whose backward it computes.
func TestHangReportNamesLines(t *testing.T) {
	r := testRecorder(t)
	r.hang = newHangWatch(5 * time.Second)
	torch := "/usr/lib/python3.12/site-packages/torch/nn/functional.py"
	python := &pb.Callstack{Id: 11, Frames: []*pb.Frame{
		{Kind: pb.Frame_PYTHON, File: torch, Function: "linear", Line: 2380},
		{Kind: pb.Frame_PYTHON, File: "train.py", Function: "step", Line: 42},
		{Kind: pb.Frame_PYTHON, File: "train.py", Function: "<module>", Line: 7},
	}}
	r.record(cannedStack(python, 1, 0))
	native := &pb.Callstack{Id: 12, Frames: []*pb.Frame{
		{Kind: pb.Frame_NATIVE, File: "/usr/lib/x86_64-linux-gnu/libcuda.so.1", Pc: 0x7f0000000010, Offset: 0x10},
		{Kind: pb.Frame_NATIVE, File: "/nonexistent/libsolver.so", Pc: 0x7f0000123456, Offset: 0x3456},
	}}
	r.record(cannedStack(native, 2, 0))
	r.record(cannedKernel(0x7f00001000, &pb.Kernel{Id: 3, Name: "_Z4spinPVi"}))
	const s = uint64(time.Second)
	one := &pb.Dim3{X: 1, Y: 1, Z: 1}
	launch := func(seq uint64, stream uint32, callstack uint64) *pb.Launch {
		return &pb.Launch{Seq: seq, StreamId: stream, KernelId: 3, CorrelationId: uint32(100 + seq), HostNs: s,
			CallstackId: callstack, Grid: one, Block: one}
	}
	r.record(cannedLaunch(launch(1, 7, 11), &cannedAutograd{thread: 1, seq: 40})) // a forward launch: it hangs
	r.record(cannedLaunch(launch(2, 7, 11), nil))                                 // waits behind it
	r.record(cannedLaunch(launch(3, 9, 12), nil))
	// A launch of the backward of node 39, which launch 1 created, on autograd's thread: no
	// callstack of its own.
	r.record(cannedNodeClass(1, true, "N5torch8autograd9generated11MmBackward0E"))
	r.record(cannedLaunch(launch(4, 13, 0), &cannedAutograd{thread: 1, seq: 39, class: 1}))
	r.record(cannedLaunch(launch(5, 15, 99), nil)) // a callstack the agent never met

	if stuck, flush := r.hang.check(10 * s); stuck != nil || !flush {
		t.Fatalf("first check: %v, flush %v; want a forced flush first", stuck, flush)
	}
	stuck, _ := r.hang.check(11 * s)
	r.reportHang(stuck, 11*s)
	spin := "spin(int volatile*), grid 1x1x1, block 1x1x1, device 0, stream "
	want := []string{
		"hang: launch 1 (" + spin + "7) has not finished on the GPU after 5s; launched at train.py:42 step via " + torch + ":2380 linear; 1 more unfinished launch waits behind it on its stream",
		"hang: also unfinished: launch 3 (" + spin + "9), made 10s before; launched at libsolver.so+0x3456",
		"hang: also unfinished: launch 4 (" + spin + "13), made 10s before; launched in the backward of train.py:42 step via " + torch + ":2380 linear",
		"hang: also unfinished: launch 5 (" + spin + "15), made 10s before; callstack 99 not recorded",
	}
	if got := logs(r, "error"); !slices.Equal(got, want) {
		t.Errorf("report in the log:\n%q\nwant\n%q", got, want)
	}
	if len(r.batch.Hangs) != 1 {
		t.Fatalf("hang records %v, want one", r.batch.Hangs)
	}
	h := r.batch.Hangs[0]
	if h.GetLaunch().GetSeq() != 1 || h.GetLaunch().GetUnfinished() != 2 || h.GetHostNs() != 11*s || len(h.GetStreams()) != 3 ||
		h.GetStreams()[1].GetForwardCallstackId() != 11 {
		t.Errorf("hang record %v", h)
	}
}
