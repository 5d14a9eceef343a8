package agent

import (
	"strings"
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
	line := h.report(got, func(uint64) string { return "spin_on_flag" })
	for _, want := range []string{"launch 2 (spin_on_flag, grid 4x1x1, block 128x1x1", "after 2s", "stream 1: 1, stream 2: 1"} {
		if !strings.Contains(line, want) {
			t.Errorf("report %q lacks %q", line, want)
		}
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
