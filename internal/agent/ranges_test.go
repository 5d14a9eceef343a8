package agent

import (
	"testing"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// TestRangeRecords drives NVTX calls through the agent's callback on this
// thread, as CUPTI would, and drains the ring into the writer: ranges nest
// per domain, registered strings and domains are named, a start/end range
// is closed through NVTX's id, and a pop with nothing open is counted.
func TestRangeRecords(t *testing.T) {
	r := testRecorder(t)
	cannedRing(1 << 16)
	ranges0, dropped0 := rangeCounters()
	const dom, str = 0xd0d0, 0x5150
	nvtxPushA("step 1")
	nvtxDomainCreate("torch", dom)
	nvtxRegisterString(dom, "backward", str)
	nvtxDomainPush(dom, "forward", 0, 7)
	nvtxPushA("inner")
	nvtxDomainPush(dom, "", str, 0)
	nvtxPop(dom) // backward
	nvtxPop(dom) // forward, below inner
	nvtxStartA("load", 77)
	r.drain()
	r.writeFrame() // what follows closes ranges of an earlier frame
	nvtxPop(0)     // inner
	nvtxPop(0)     // step 1
	nvtxEnd(77)
	nvtxEnd(78) // no start seen
	nvtxPop(0)  // nothing open
	r.drain()

	ranges, dropped := rangeCounters()
	if ranges-ranges0 != 5 || dropped-dropped0 != 1 {
		t.Errorf("counters: %d ranges, %d dropped; want 5, 1", ranges-ranges0, dropped-dropped0)
	}
	if r.nvtx.unmatched != 1 {
		t.Errorf("%d unmatched ends, want 1", r.nvtx.unmatched)
	}
	ends := map[uint64]bool{}
	for _, e := range r.batch.RangeEnds {
		ends[e.Id] = true
	}
	if len(r.batch.RangeEnds) != 3 {
		t.Fatalf("range ends %v, want 3 (inner, step 1, load)", r.batch.RangeEnds)
	}
	for _, id := range []uint64{1, 3, 5} {
		if !ends[id] {
			t.Errorf("no end for range %d: %v", id, r.batch.RangeEnds)
		}
	}
}

// TestRangeOpenNames checks the ranges one frame holds: parents, domains,
// messages (ASCII and registered) and ends set in place.
func TestRangeOpenNames(t *testing.T) {
	r := testRecorder(t)
	cannedRing(1 << 16)
	r.drain()
	first := nextRangeID(t, r)
	const dom, str = 0xd1d1, 0x5151
	nvtxDomainCreate("torch", dom)
	nvtxRegisterString(dom, "backward", str)
	nvtxPushA("step")
	nvtxDomainPush(dom, "", str, 3)
	nvtxPop(dom)
	nvtxDomainPush(0x999, "unnamed domain", 0, 0)
	nvtxPop(0x999)
	nvtxPop(0)
	r.drain()
	got := r.batch.Ranges
	if len(got) != 3 {
		t.Fatalf("ranges %v", got)
	}
	want := []*pb.Range{
		{Id: first, Message: "step", Pushed: true},
		{Id: first + 1, ParentId: first, Domain: "torch", Message: "backward", Category: 3, Pushed: true},
		{Id: first + 2, ParentId: first, Domain: "domain 0x999", Message: "unnamed domain", Pushed: true},
	}
	for i, g := range got {
		if g.Tid == 0 {
			t.Errorf("range %d: no thread", g.Id)
		}
		g.Tid, g.StartNs, g.EndNs = 0, 0, 0
		equal(t, "range", g, want[i])
	}
	if len(r.batch.RangeEnds) != 0 {
		t.Errorf("ends of ranges in the same frame are set in place, not written: %v", r.batch.RangeEnds)
	}
}

// nextRangeID is the id the next range opened will get: ids are
// process-wide, shared with earlier tests.
func nextRangeID(t *testing.T, r *recorder) uint64 {
	t.Helper()
	nvtxPushA("probe")
	nvtxPop(0)
	r.drain()
	n := len(r.batch.Ranges)
	if n == 0 {
		t.Fatal("no range record")
	}
	id := r.batch.Ranges[n-1].Id
	r.writeFrame()
	return id + 1
}

// TestRangeDecode decodes canned range records as the C side lays them out.
func TestRangeDecode(t *testing.T) {
	r := testRecorder(t)
	r.record(cannedNvtxName(0x10, true, "app"))
	r.record(cannedRangeOpen(&pb.Range{Id: 1, Tid: 5, Message: "epoch", StartNs: 100, Pushed: true}, 0))
	r.record(cannedRangeOpen(&pb.Range{Id: 2, ParentId: 1, Tid: 5, Message: "load", StartNs: 110}, 9))
	r.record(cannedRangeEnd(0, 9, 120))
	r.record(cannedRangeEnd(1, 0, 130))
	r.record(cannedLaunch(&pb.Launch{Seq: 1, RangeId: 1}, nil))
	want := []*pb.Range{
		{Id: 1, Tid: 5, Message: "epoch", StartNs: 100, EndNs: 130, Pushed: true},
		{Id: 2, ParentId: 1, Tid: 5, Message: "load", StartNs: 110, EndNs: 120},
	}
	if len(r.batch.Ranges) != 2 {
		t.Fatalf("ranges %v", r.batch.Ranges)
	}
	for i := range want {
		equal(t, "range", r.batch.Ranges[i], want[i])
	}
	if l := r.batch.Launches; len(l) != 1 || l[0].RangeId != 1 {
		t.Errorf("launch range id: %v", l)
	}
}
