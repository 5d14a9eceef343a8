package recording_test

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/cubin"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// realRecordings were made by the agent on an H100 (scripts/gen-testdata
// regenerates them). Unlike the synthetic ones of internal/testrec, they
// hold whatever the driver, CUPTI and PyTorch really did. killed.py was
// SIGKILLed a second after its last launch, so its recording has no End but
// lost nothing: the agent writes a frame at least every 100 ms.
var realRecordings = []struct {
	name, dir string
	complete  bool
}{
	{"torch-graphs", "../testdata/recordings/torch-graphs", true},
	{"killed", "../testdata/recordings/killed", false},
	{"demo", "../internal/demo/bundled/rec", true},
}

// TestRealRecordings checks, on every real recording, that the records
// refer to each other the way docs/format.md says.
func TestRealRecordings(t *testing.T) {
	images := 0
	for _, rr := range realRecordings {
		t.Run(rr.name, func(t *testing.T) {
			set, err := recording.Open(filepath.FromSlash(rr.dir))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range set.Processes {
				d, err := p.Load()
				if err != nil {
					t.Fatal(err)
				}
				if d.Complete() != rr.complete || d.Truncated {
					t.Errorf("%s: complete=%v truncated=%v; want complete=%v, not truncated", p.Name, d.Complete(), d.Truncated, rr.complete)
				}
				checkReal(t, d)
				images += checkModules(t, p, d)
			}
		})
	}
	if images == 0 {
		t.Error("no real recording holds a module image; the demo's should")
	}
}

// checkModules checks that each module image the recording holds defines
// the functions its Module record lists, in that order, and returns how
// many images it read. The PyTorch fixtures keep no images (they are
// large); the demo recording keeps its one.
func checkModules(t *testing.T, p *recording.Process, d *recording.Data) int {
	read := 0
	for _, m := range d.Modules {
		image, err := os.ReadFile(p.ModulePath(m.GetSha256()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		read++
		f, err := cubin.Parse(image)
		if err != nil {
			t.Errorf("module %s: %v", m.GetSha256(), err)
			continue
		}
		if got, err := f.Functions(); err != nil || !slices.Equal(got, m.GetKernelNames()) {
			t.Errorf("module %s defines %q (%v); its record lists %q", m.GetSha256(), got, err, m.GetKernelNames())
		}
	}
	return read
}

// checkReal checks what holds for every process of a real recording
// whose workload is small enough that nothing was dropped.
func checkReal(t *testing.T, d *recording.Data) {
	if len(d.Launches) == 0 || len(d.Activities) == 0 {
		t.Fatalf("%d launches, %d activities; the workloads make both", len(d.Launches), len(d.Activities))
	}
	links := d.Links()

	modules := map[string]bool{}
	for _, m := range d.Modules {
		modules[m.Sha256] = true
	}
	kernelIDs := map[uint64]bool{}
	for _, k := range d.Kernels {
		if kernelIDs[k.Id] {
			t.Errorf("kernel id %d described twice", k.Id)
		}
		kernelIDs[k.Id] = true
		if k.ModuleSha256 != "" && !modules[k.ModuleSha256] {
			t.Errorf("kernel %s names module %s, which the recording does not describe", k.Name, k.ModuleSha256)
		}
		if got := recording.KernelIdentity(k.ModuleSha256, k.Name); got != k.Identity {
			t.Errorf("kernel %s: identity %016x, but its module and name give %016x", k.Name, k.Identity, got)
		}
		if got := recording.Demangle(k.Name); got != k.Demangled {
			t.Errorf("kernel %s: demangled %q, but Demangle gives %q", k.Name, k.Demangled, got)
		}
	}

	callstackIDs := map[uint64]bool{}
	for _, c := range d.Callstacks {
		if callstackIDs[c.Id] {
			t.Errorf("callstack %d described twice", c.Id)
		}
		callstackIDs[c.Id] = true
		if got := recording.CallstackID(c.GetFrames()); got != c.Id {
			t.Errorf("callstack %d: its frames hash to %d (FNV-1a over file, line, function, offset)", c.Id, got)
		}
	}
	checkCallstack := func(what string, seq, id uint64) {
		if id != 0 && links.Callstack(id) == nil {
			t.Errorf("%s %d: callstack %d is not in the recording", what, seq, id)
		}
	}

	// Launches and graph launches share one sequence, and each thread
	// numbers its calls in the order it makes them.
	type call struct {
		what        string
		seq, hostNs uint64
	}
	seqs := map[uint64]bool{}
	byTid := map[uint32][]call{}
	addCall := func(tid uint32, c call) {
		if c.seq == 0 || seqs[c.seq] {
			t.Errorf("%s: seq %d is zero or used twice", c.what, c.seq)
		}
		seqs[c.seq] = true
		byTid[tid] = append(byTid[tid], c)
	}
	nodes := map[uint64]*pb.GraphNode{}
	for _, n := range d.GraphNodes {
		nodes[n.NodeId] = n
	}
	for _, l := range d.Launches {
		addCall(l.Tid, call{"launch", l.Seq, l.HostNs})
		if links.Kernel(l.KernelId) == nil {
			t.Errorf("launch %d: kernel %d is not in the recording", l.Seq, l.KernelId)
		}
		checkCallstack("launch", l.Seq, l.CallstackId)
		if l.Result != 0 {
			t.Errorf("launch %d returned CUresult %d", l.Seq, l.Result)
		}
		if l.Captured {
			if n := nodes[l.GraphNodeId]; n == nil || n.LaunchSeq != l.Seq {
				t.Errorf("captured launch %d: graph node %d does not name it (%v)", l.Seq, l.GraphNodeId, n)
			}
		}
	}
	for _, g := range d.GraphLaunches {
		addCall(g.Tid, call{"graph launch", g.Seq, g.HostNs})
		checkCallstack("graph launch", g.Seq, g.CallstackId)
	}
	for tid, calls := range byTid {
		slices.SortFunc(calls, func(a, b call) int { return cmp.Compare(a.seq, b.seq) })
		for i := 1; i < len(calls); i++ {
			if prev, c := calls[i-1], calls[i]; c.hostNs < prev.hostNs {
				t.Errorf("thread %d: %s %d at %d ns is earlier than %s %d at %d ns", tid, c.what, c.seq, c.hostNs, prev.what, prev.seq, prev.hostNs)
			}
		}
	}

	// Every kernel the GPU ran links to its launch, and (one clock) started
	// after the host made the call that ran it.
	ranCalls := map[uint64]bool{}
	err := d.JoinKernels(links, func(a *pb.KernelActivity, l *pb.Launch, g *pb.GraphLaunch) error {
		if a.EndNs < a.StartNs {
			t.Errorf("activity %d ends at %d before it starts at %d", a.CorrelationId, a.EndNs, a.StartNs)
		}
		if l == nil {
			t.Errorf("activity %s (correlation %d, graph %d node %d) links to no launch", a.Name, a.CorrelationId, a.GraphId, a.GraphNodeId)
			return nil
		}
		if k := links.Kernel(l.KernelId); k.GetName() != a.Name {
			t.Errorf("activity %s links to launch %d of %s", a.Name, l.Seq, k.GetName())
		}
		calledNs := l.HostNs
		if a.GraphId != 0 {
			if !l.Captured || g == nil {
				t.Errorf("graph activity %d: launch %d captured=%v, graph launch %v", a.CorrelationId, l.Seq, l.Captured, g)
				return nil
			}
			calledNs = g.HostNs
			ranCalls[g.Seq] = true
		} else {
			if l.Captured || l.CorrelationId != a.CorrelationId {
				t.Errorf("eager activity %d links to launch %d (correlation %d, captured %v)", a.CorrelationId, l.Seq, l.CorrelationId, l.Captured)
			}
			ranCalls[l.Seq] = true
		}
		if a.StartNs < calledNs {
			t.Errorf("activity %d started at %d ns, before its call at %d ns", a.CorrelationId, a.StartNs, calledNs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// ... and every call that ran a kernel has its activity: nothing is
	// dropped in these small workloads.
	for _, l := range d.Launches {
		if !l.Captured && !ranCalls[l.Seq] {
			t.Errorf("launch %d (%s) has no GPU activity", l.Seq, links.Kernel(l.KernelId).GetName())
		}
	}
	for _, g := range d.GraphLaunches {
		if !ranCalls[g.Seq] {
			t.Errorf("graph launch %d has no GPU activity", g.Seq)
		}
	}

	// The counters agree with the records, and nothing was lost.
	s := d.Stats
	if s.Launches != uint64(len(d.Launches)) || s.GraphLaunches != uint64(len(d.GraphLaunches)) ||
		s.Activities != uint64(len(d.Activities)) || s.Callstacks != uint64(len(d.Callstacks)) || s.Modules != uint64(len(d.Modules)) {
		t.Errorf("stats %v disagree with the records: %d launches, %d graph launches, %d activities, %d callstacks, %d modules",
			s, len(d.Launches), len(d.GraphLaunches), len(d.Activities), len(d.Callstacks), len(d.Modules))
	}
	if s.LaunchesDropped+s.ActivitiesDropped+s.CallstacksFailed+s.ModulesFailed+s.Errors+s.RingBytesDropped != 0 {
		t.Errorf("stats report losses: %v", s)
	}
}
