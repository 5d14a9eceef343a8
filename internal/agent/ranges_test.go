package agent

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// nvtxRecording makes the agent NVTX's injection library for these tests'
// NVTX calls and starts recording them, once for the process.
var nvtxRecording = sync.OnceValue(func() bool {
	ok := nvtxInject()
	nvtxStart()
	return ok
})

// onNVTXThread keeps the calling test on one OS thread until the function it returns is
// called: NVTX nests ranges per thread, and a goroutine may move between threads across
// cgo calls, which would push on one thread's stack and pop another's.
func onNVTXThread() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// TestRangeNamesBeforeStart: domains and strings NVTX makes before the
// agent records (NVTX loaded it first) are named when it starts, and ranges
// pushed before it are not recorded.
func TestRangeNamesBeforeStart(t *testing.T) {
	defer onNVTXThread()()
	r := testRecorder(t)
	cannedRing(1 << 16)
	if !nvtxInject() {
		t.Fatal("the agent refused NVTX's export table")
	}
	dom := nvtxDomainCreate("early")
	str := nvtxRegisterString(dom, "early string")
	if dom == 0 || str == 0 || dom == str {
		t.Fatalf("handles %#x, %#x: want two, not 0", dom, str)
	}
	ranges0, _ := rangeCounters()
	if nvtxPushA("before the start") != 0 || nvtxPop(0) != 0 {
		t.Error("NVTX calls before the start did not answer 0")
	}
	if ranges, _ := rangeCounters(); ranges != ranges0 {
		t.Skip("the agent was recording NVTX already (tests shuffled?)")
	}
	if !nvtxRecording() {
		t.Fatal("the agent refused NVTX's export table")
	}
	nvtxDomainPush(dom, "", str, 0)
	nvtxPop(dom)
	r.drain()
	if n := len(r.batch.Ranges); n != 1 {
		t.Fatalf("ranges %v, want 1", r.batch.Ranges)
	}
	if g := r.batch.Ranges[0]; g.Domain != "early" || g.Message != "early string" {
		t.Errorf("range %v: want domain early, message early string", g)
	}
}

// TestRangeRecords drives NVTX calls through the agent's slots on this
// thread, as NVTX would, and drains the ring into the writer: ranges nest
// per domain and return their levels, registered strings and domains are
// named, a start/end range is closed through the id it returned, and a pop
// with nothing open is counted.
func TestRangeRecords(t *testing.T) {
	defer onNVTXThread()()
	r := testRecorder(t)
	cannedRing(1 << 16)
	if !nvtxRecording() {
		t.Fatal("the agent refused NVTX's export table")
	}
	ranges0, dropped0 := rangeCounters()
	first := nvtxPushA("step 1")
	dom := nvtxDomainCreate("torch")
	str := nvtxRegisterString(dom, "backward")
	nvtxDomainPush(dom, "forward", 0, 7)
	inner := nvtxPushA("inner")
	nvtxDomainPush(dom, "", str, 0)
	nvtxPop(dom) // backward
	nvtxPop(dom) // forward, below inner
	load := nvtxStartA("load")
	r.drain()
	r.writeFrame()                   // what follows closes ranges of an earlier frame
	if got := nvtxPop(0); got != 1 { // inner: levels count the ranges of its own domain
		t.Errorf("pop of inner returned level %d, want 1", got)
	}
	nvtxPop(0) // step 1
	nvtxEnd(load)
	nvtxEnd(load + 1000) // no start seen
	if got := nvtxPop(0); got >= 0 {
		t.Errorf("pop with nothing open returned %d, want < 0", got)
	}
	r.drain()

	if first != 0 || inner != 1 || load == 0 {
		t.Errorf("levels %d, %d and range id %d: want 0, 1 and an id", first, inner, load)
	}
	ranges, dropped := rangeCounters()
	if ranges-ranges0 != 5 || dropped-dropped0 != 1 {
		t.Errorf("counters: %d ranges, %d dropped; want 5, 1", ranges-ranges0, dropped-dropped0)
	}
	if r.nvtx.unmatched != 1 {
		t.Errorf("%d unmatched ends, want 1", r.nvtx.unmatched)
	}
	if len(r.batch.RangeEnds) != 3 {
		t.Fatalf("range ends %v, want 3 (inner, step 1, load)", r.batch.RangeEnds)
	}
	ends := map[uint64]bool{}
	for _, e := range r.batch.RangeEnds {
		ends[e.Id] = true
	}
	if !ends[load] {
		t.Errorf("no end for the start/end range %d: %v", load, r.batch.RangeEnds)
	}
}

// TestRangeOpenNames checks the ranges one frame holds: parents, domains,
// messages (ASCII and registered) and ends set in place.
func TestRangeOpenNames(t *testing.T) {
	defer onNVTXThread()()
	r := testRecorder(t)
	cannedRing(1 << 16)
	if !nvtxRecording() {
		t.Fatal("the agent refused NVTX's export table")
	}
	r.drain()
	first := nextRangeID(t, r)
	// Names of their own: a name made by an earlier test was recorded there, and
	// making it again gives its handle back without a new record.
	dom := nvtxDomainCreate("torch (open names)")
	str := nvtxRegisterString(dom, "backward (open names)")
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
		{Id: first + 1, ParentId: first, Domain: "torch (open names)", Message: "backward (open names)", Category: 3, Pushed: true},
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

// TestRangeWide: wide-character messages and domain names are recorded
// without their text, the domain then named by its handle, and nothing of
// the program's memory is read past the calls.
func TestRangeWide(t *testing.T) {
	defer onNVTXThread()()
	r := testRecorder(t)
	cannedRing(1 << 16)
	if !nvtxRecording() {
		t.Fatal("the agent refused NVTX's export table")
	}
	r.drain()
	if level := nvtxPushW(); level != 0 {
		t.Errorf("nvtxRangePushW returned level %d, want 0", level)
	}
	dom := nvtxDomainCreateW()
	if dom == 0 {
		t.Fatal("nvtxDomainCreateW returned no handle")
	}
	nvtxDomainPush(dom, "in a wide domain", 0, 0)
	nvtxPop(dom)
	nvtxPop(0)
	r.drain()
	got := r.batch.Ranges
	if len(got) != 2 {
		t.Fatalf("ranges %v, want 2", got)
	}
	if got[0].Message != "" || got[0].Domain != "" {
		t.Errorf("wide push: %v, want no message in the default domain", got[0])
	}
	if want := fmt.Sprintf("domain %#x", dom); got[1].Domain != want || got[1].Message != "in a wide domain" {
		t.Errorf("range in a wide-named domain: %v, want domain %q", got[1], want)
	}
}

// TestRangeNamesAgain: registering the same string, or creating the same
// domain, again gives back the first handle and writes no new name record;
// another text, or the same text in another domain, gets its own.
func TestRangeNamesAgain(t *testing.T) {
	defer onNVTXThread()()
	r := testRecorder(t)
	cannedRing(1 << 16)
	if !nvtxRecording() {
		t.Fatal("the agent refused NVTX's export table")
	}
	r.drain()
	names0 := len(r.nvtx.domains) + len(r.nvtx.strings)
	dom := nvtxDomainCreate("again")
	other := nvtxDomainCreate("again, other")
	str := nvtxRegisterString(dom, "every step")
	for range 1000 {
		if d, s := nvtxDomainCreate("again"), nvtxRegisterString(dom, "every step"); d != dom || s != str {
			t.Fatalf("handles %#x, %#x again; want %#x, %#x", d, s, dom, str)
		}
	}
	if s := nvtxRegisterString(other, "every step"); s == str {
		t.Error("the same string in another domain got the first domain's handle")
	}
	r.drain()
	if got := len(r.nvtx.domains) + len(r.nvtx.strings) - names0; got != 4 {
		t.Errorf("%d names recorded, want 4 (2 domains, 2 strings)", got)
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
