package recording_test

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func loadSynthetic(t *testing.T, rank int) *recording.Data {
	t.Helper()
	dir := t.TempDir()
	writeProcess(t, dir, "p", testrec.Batches(rank))
	d, err := openOne(t, dir).Load()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestJoinKernelsEveryActivity(t *testing.T) {
	d := loadSynthetic(t, 0)
	links := d.Links()
	var eager, graph int
	err := d.JoinKernels(links, func(a *pb.KernelActivity, l *pb.Launch, replay *pb.GraphLaunch) error {
		if l == nil {
			t.Fatalf("activity %v has no launch", a)
		}
		if k := links.Kernel(l.KernelId); k.GetName() != a.Name {
			t.Errorf("activity %s linked to a launch of %s", a.Name, k.GetName())
		}
		if a.GraphId != 0 {
			graph++
			if !l.Captured {
				t.Errorf("graph activity linked to launch %d, which was not captured", l.Seq)
			}
			if replay == nil || replay.CorrelationId != a.CorrelationId {
				t.Errorf("graph activity has no graph launch")
			}
			return nil
		}
		eager++
		if l.CorrelationId != a.CorrelationId || l.Captured {
			t.Errorf("eager activity %d linked to launch %d (correlation %d, captured %v)", a.CorrelationId, l.Seq, l.CorrelationId, l.Captured)
		}
		if replay != nil {
			t.Errorf("eager activity has a graph launch")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if eager+graph != len(d.Activities) || eager == 0 || graph == 0 {
		t.Fatalf("synthetic recording has %d eager and %d graph activities of %d; want both, all", eager, graph, len(d.Activities))
	}
}

// chain builds executable node 1 -> 2 -> ... -> n, where node n was created
// by launch 7.
func chain(n uint64) *recording.Data {
	d := &recording.Data{Launches: []*pb.Launch{{Seq: 7, Captured: true, CorrelationId: 70}}}
	for id := uint64(1); id < n; id++ {
		d.GraphNodes = append(d.GraphNodes, &pb.GraphNode{NodeId: id, OriginalNodeId: id + 1})
	}
	d.GraphNodes = append(d.GraphNodes, &pb.GraphNode{NodeId: n, LaunchSeq: 7})
	return d
}

func TestCloneChains(t *testing.T) {
	act := &pb.KernelActivity{GraphId: 4, GraphNodeId: 1, CorrelationId: 90}
	for hops, found := range map[uint64]bool{0: true, 1: true, 16: true, 17: false} {
		l := chain(hops + 1).Links().CaptureLaunch(act)
		if (l != nil) != found {
			t.Errorf("%d clone hops: launch %v; want found=%v", hops, l, found)
		}
	}

	cycle := &recording.Data{GraphNodes: []*pb.GraphNode{
		{NodeId: 1, OriginalNodeId: 2},
		{NodeId: 2, OriginalNodeId: 3},
		{NodeId: 3, OriginalNodeId: 2},
	}}
	if n := cycle.Links().CaptureNode(1); n != nil {
		t.Errorf("cycle resolved to %v", n)
	}
	broken := &recording.Data{GraphNodes: []*pb.GraphNode{{NodeId: 1, OriginalNodeId: 5}}}
	if l := broken.Links().CaptureLaunch(act); l != nil {
		t.Errorf("broken chain resolved to %v", l)
	}
}

func TestCapturedLaunchNotCorrelated(t *testing.T) {
	d := chain(1)
	d.Activities = []*pb.KernelActivity{{CorrelationId: 70}}
	err := d.JoinKernels(d.Links(), func(_ *pb.KernelActivity, l *pb.Launch, _ *pb.GraphLaunch) error {
		if l != nil {
			t.Errorf("an eager activity linked to captured launch %d", l.Seq)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d.Links().CaptureLaunch(d.Activities[0]) != nil {
		t.Errorf("an eager kernel has a capture-time launch")
	}
}

func TestPythonFrames(t *testing.T) {
	d := loadSynthetic(t, 0)
	links := d.Links()
	for _, c := range d.Callstacks {
		top := links.TopPythonFrame(c.Id)
		if c.Source == "native" {
			if top != nil {
				t.Errorf("native callstack has Python frame %v", top)
			}
			continue
		}
		for _, f := range c.Frames {
			if f.Kind == pb.Frame_PYTHON {
				if f != top {
					t.Errorf("TopPythonFrame = %v, want the innermost Python frame %v", top, f)
				}
				break
			}
		}
	}
	var gemm *pb.Launch
	for _, l := range d.Launches {
		if links.Kernel(l.KernelId).GetName() == "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas" && !l.Captured {
			gemm = l
			break
		}
	}
	if got, want := links.PythonLine(gemm.CallstackId), "/home/ada/.venv/lib/python3.12/site-packages/torch/nn/modules/linear.py:125 Linear.forward"; got != want {
		t.Errorf("PythonLine = %q, want %q", got, want)
	}
	if links.TopPythonFrame(0) != nil || links.PythonLine(12345) != "" {
		t.Errorf("unknown callstacks must have no Python frame")
	}
	if links.Callstack(0) != nil {
		t.Errorf("callstack id 0 means none was taken")
	}
}

func TestKernelNames(t *testing.T) {
	d := loadSynthetic(t, 0)
	links := d.Links()
	for id, want := range map[uint64]string{
		1: "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
		3: "triton_poi_fused_add_mul_0",
		4: "add_kernel(float*, float const*, float const*, int)",
	} {
		if got := links.KernelName(links.Kernel(id)); got != want {
			t.Errorf("kernel %d: %q, want %q", id, got, want)
		}
	}
	if got := links.KernelName(&pb.Kernel{Name: "_Z1fv", Demangled: "agent's name"}); got != "agent's name" {
		t.Errorf("the agent's demangled name must win, got %q", got)
	}
}

func TestIsLibraryFile(t *testing.T) {
	for path, want := range map[string]bool{
		"/opt/torch/.venv/lib/python3.12/site-packages/torch/nn/modules/linear.py": true,
		"/usr/lib/python3/dist-packages/numpy/core/numeric.py":                     true,
		"/usr/lib/python3.12/threading.py":                                         true,
		"/root/.pyenv/versions/3.13.0t/lib/python3.13t/asyncio/events.py":          true,
		"<frozen runpy>":                                          true,
		"/home/ada/proj/train.py":                                 false,
		"/home/ada/lib/python_utils/model.py":                     false,
		"<string>":                                                false,
		"/work/main/testdata/workloads/torch_graphs.py":           false,
		"/home/ada/.venv/src/mylib/python3/site_packages_fake.py": false,
	} {
		if got := recording.IsLibraryFile(path); got != want {
			t.Errorf("IsLibraryFile(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestMemoryJoins follows every memory state of testrec's Memory variant to
// its launch, regions and allocations, and checks that each region hash is
// the gpurr-h128 of its chunk hashes.
func TestMemoryJoins(t *testing.T) {
	set := testrec.Open(t, testrec.Memory)
	for _, p := range set.Processes {
		d, err := p.Load()
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Allocations) == 0 || len(d.Memory) == 0 {
			t.Fatalf("%s: %d allocations, %d memory states", p.Name, len(d.Allocations), len(d.Memory))
		}
		links := d.Links()
		var lost int
		for _, st := range d.Memory {
			states := links.MemoryFor(st.LaunchSeq)
			if !slices.Contains(states, st) {
				t.Fatalf("launch %d: MemoryFor lacks its state %v", st.LaunchSeq, st)
			}
			if st.Lost {
				lost++
				continue
			}
			l := links.Launch(st.LaunchSeq)
			if len(st.Regions) != len(l.GetRegions()) || links.StateRegion(st, len(st.Regions)) != nil {
				t.Fatalf("launch %d: %d region states for %d regions", st.LaunchSeq, len(st.Regions), len(l.GetRegions()))
			}
			for i, rs := range st.Regions {
				r := links.StateRegion(st, i)
				var sums []memhash.Sum
				for _, h := range recording.ChunkHashes(rs) {
					sums = append(sums, sumOf(h))
				}
				if want := memhash.Region(sums, r.Size).Bytes(); !bytes.Equal(rs.Hash, want[:]) {
					t.Errorf("launch %d region %d: hash %s, want %s from its chunks", st.LaunchSeq, i, recording.HashText(rs.Hash), recording.HashText(want[:]))
				}
				a := links.Allocation(r.AllocationId)
				if a == nil || a.Address != r.Address || a.Size != r.Size || a.HostNs > l.HostNs {
					t.Errorf("launch %d region %d: allocation %v", st.LaunchSeq, i, a)
				}
				if f := links.Freed(r.AllocationId); f != nil && f.HostNs < l.HostNs {
					t.Errorf("launch %d region %d: allocation freed before the launch", st.LaunchSeq, i)
				}
			}
		}
		if want := int(d.Stats.MemoryStatesLost); lost != want {
			t.Errorf("%s: %d lost states, stats say %d", p.Name, lost, want)
		}
		for _, l := range d.Launches {
			if l.Captured && links.MemoryFor(l.Seq) != nil {
				t.Errorf("captured launch %d has memory states", l.Seq)
			}
		}
	}
}

func sumOf(h []byte) memhash.Sum {
	var s memhash.Sum
	for l := range s {
		s[l] = binary.LittleEndian.Uint32(h[4*l:])
	}
	return s
}

// TestMemoryOrder: a launch's states come BEFORE first, however they
// arrived, and allocation ids lead to the allocation and to its free.
func TestMemoryOrder(t *testing.T) {
	after := &pb.MemoryState{LaunchSeq: 3, Point: pb.MemoryState_AFTER}
	before := &pb.MemoryState{LaunchSeq: 3, Point: pb.MemoryState_BEFORE}
	alloc := &pb.Allocation{Id: 1, Address: 0x1000, Size: 64}
	free := &pb.Allocation{Id: 1, Freed: true}
	d := &recording.Data{
		Launches:    []*pb.Launch{{Seq: 3, Regions: []*pb.Region{{Address: 0x1000, Size: 64, AllocationId: 1}}}},
		Memory:      []*pb.MemoryState{after, before, {LaunchSeq: 4, Point: pb.MemoryState_AFTER}},
		Allocations: []*pb.Allocation{alloc, free, {Id: 2}},
	}
	links := d.Links()
	if got := links.MemoryFor(3); len(got) != 2 || got[0] != before || got[1] != after {
		t.Errorf("MemoryFor(3) = %v, want before, after", got)
	}
	if links.MemoryFor(5) != nil {
		t.Errorf("a launch without states has some")
	}
	if links.StateRegion(before, 0) != d.Launches[0].Regions[0] || links.StateRegion(before, -1) != nil || links.StateRegion(d.Memory[2], 0) != nil {
		t.Errorf("StateRegion does not follow Launch.regions")
	}
	if links.Allocation(1) != alloc || links.Freed(1) != free || links.Freed(2) != nil || links.Allocation(9) != nil {
		t.Errorf("allocation joins wrong")
	}
}

func TestChunkHashes(t *testing.T) {
	rs := &pb.RegionState{ChunkHashes: bytes.Repeat([]byte{1}, 2*recording.HashBytes+5)}
	got := recording.ChunkHashes(rs)
	if len(got) != 2 || len(got[1]) != recording.HashBytes || cap(got[0]) != recording.HashBytes {
		t.Errorf("ChunkHashes split %d bytes into %d hashes", len(rs.ChunkHashes), len(got))
	}
	if recording.HashText([]byte{0x0a, 0xff}) != "0aff" || recording.HashText(nil) != "" {
		t.Errorf("HashText is not lower-case hex")
	}
}

func TestEnumText(t *testing.T) {
	for _, tc := range []struct {
		e    protoreflect.Enum
		want string
	}{
		{pb.MemoryPlan_SKIPPED_RING_TOO_SMALL, "skipped_ring_too_small"},
		{pb.MemoryState_BEFORE, "before"},
		{pb.Allocation_MEM_ALLOC_ASYNC, "mem_alloc_async"},
		{pb.MemoryPlan_STATUS_UNSPECIFIED, ""},
		{pb.MemoryPlan_Status(99), "99"},
	} {
		if got := recording.EnumText(tc.e); got != tc.want {
			t.Errorf("EnumText(%v) = %q, want %q", tc.e, got, tc.want)
		}
	}
}

// A kernel of a conditional node's body reaches CUPTI with a node id of the executable graph
// that no clone record carries; the body's node was cloned into a graph of its own. It links
// to the one node whose launch ran its kernel there, and to none when two bodies ran it.
func TestConditionalBodyKernel(t *testing.T) {
	d := &recording.Data{
		Kernels:  []*pb.Kernel{{Id: 1, Name: "_Z7gn_bodyPffi"}, {Id: 2, Name: "_Z8gn_scalePffi"}},
		Launches: []*pb.Launch{{Seq: 1, Captured: true, KernelId: 2}, {Seq: 3, Captured: true, KernelId: 1}},
		GraphNodes: []*pb.GraphNode{
			{NodeId: 0x1_0000_0000, LaunchSeq: 1}, {NodeId: 0x2_0000_0000, LaunchSeq: 3},
			{NodeId: 0x3_0000_0000, GraphId: 3, OriginalNodeId: 0x1_0000_0000}, // the executable graph's copy
			{NodeId: 0x4_0000_0000, GraphId: 4, OriginalNodeId: 0x2_0000_0000}, // the body's copy
		},
	}
	body := &pb.KernelActivity{GraphId: 3, GraphNodeId: 0x3_0000_0006, Name: "_Z7gn_bodyPffi"}
	if l := d.Links().CaptureLaunch(body); l.GetSeq() != 3 {
		t.Errorf("body kernel linked to launch %d, want 3", l.GetSeq())
	}
	other := &pb.KernelActivity{GraphId: 3, GraphNodeId: 0x3_0000_0007, Name: "_Z5otherv"}
	if l := d.Links().CaptureLaunch(other); l != nil {
		t.Errorf("a kernel no body ran linked to launch %d", l.GetSeq())
	}
	d.Launches = append(d.Launches, &pb.Launch{Seq: 5, Captured: true, KernelId: 1})
	d.GraphNodes = append(d.GraphNodes, &pb.GraphNode{NodeId: 0x5_0000_0000, LaunchSeq: 5},
		&pb.GraphNode{NodeId: 0x6_0000_0000, GraphId: 6, OriginalNodeId: 0x5_0000_0000})
	if l := d.Links().CaptureLaunch(body); l != nil {
		t.Errorf("two bodies ran the kernel: linked to launch %d, want none", l.GetSeq())
	}
}

// An executable graph updated whole (cuGraphExecUpdate) from another graph runs that graph's
// nodes' work from the graph launches after the update on: the replays before it link to the
// launch that built the node it was instantiated from, those after to the other graph's.
func TestExecUpdateRepoints(t *testing.T) {
	d := &recording.Data{
		Kernels:  []*pb.Kernel{{Id: 1, Name: "_Z6gu_mulPffi"}},
		Launches: []*pb.Launch{{Seq: 10, Captured: true, KernelId: 1}, {Seq: 17, Captured: true, KernelId: 1}},
		GraphNodes: []*pb.GraphNode{
			{NodeId: 0x7_0000_0000, LaunchSeq: 10},                                                  // built with the graph API
			{NodeId: 0x8_0000_0000, GraphId: 8, OriginalNodeId: 0x7_0000_0000},                      // instantiated
			{NodeId: 0xa_0000_0000, GraphId: 10, LaunchSeq: 17},                                     // captured into another graph
			{NodeId: 0x8_0000_0000, GraphId: 8, OriginalNodeId: 0xa_0000_0000, UpdatedAfterSeq: 18}, // updated from it
		},
		GraphLaunches: []*pb.GraphLaunch{{Seq: 12, CorrelationId: 28}, {Seq: 19, CorrelationId: 41}},
	}
	links := d.Links()
	for corr, want := range map[uint32]uint64{28: 10, 41: 17} {
		a := &pb.KernelActivity{GraphId: 8, GraphNodeId: 0x8_0000_0000, CorrelationId: corr, Name: "_Z6gu_mulPffi"}
		if l := links.CaptureLaunch(a); l.GetSeq() != want {
			t.Errorf("graph launch of correlation %d: linked to launch %d, want %d", corr, l.GetSeq(), want)
		}
	}
}
