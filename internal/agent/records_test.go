package agent

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/gpurr/gpurr/internal/agentcfg"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// testRecorder is a recorder writing into a temporary directory, with
// memory capture's Go side on, as in a --memory recording.
func testRecorder(t *testing.T) *recorder {
	t.Helper()
	r, err := newRecorder(t.TempDir(), agentcfg.Config{Callstack: agentcfg.CallstackAuto})
	if err != nil {
		t.Fatal(err)
	}
	r.mem = &memoryCapture{pending: map[pointKey]*pendingPoint{}}
	t.Cleanup(r.closeFiles)
	return r
}

// logs returns the batch's log messages at level.
func logs(r *recorder, level string) []string {
	var out []string
	for _, l := range r.batch.Log {
		if l.Level == level {
			out = append(out, l.Message)
		}
	}
	return out
}

func equal(t *testing.T, what string, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, prototext.Format(got), prototext.Format(want))
	}
}

// demoCubin is gpurr's demo kernels built for sm_90: the module of the demo's bundled recording.
func demoCubin(t *testing.T) []byte {
	t.Helper()
	cubins, err := filepath.Glob(filepath.Join("..", "demo", "bundled", "rec", "modules", "*.cubin"))
	if err != nil || len(cubins) == 0 {
		t.Fatalf("no cubin in the demo's bundled recording: %v", err)
	}
	image, err := os.ReadFile(cubins[0])
	if err != nil {
		t.Fatal(err)
	}
	return image
}

func TestRecordDecodesEveryType(t *testing.T) {
	r := testRecorder(t)
	image := demoCubin(t)

	r.record(cannedModule(image, 7, 1000))
	if len(r.batch.Modules) != 1 {
		t.Fatalf("modules %v", r.batch.Modules)
	}
	mod := r.batch.Modules[0]
	if mod.CuptiModuleId != 7 || mod.Size != uint64(len(image)) || mod.HostNs != 1000 || !mod.Stored || len(mod.Sha256) != 64 ||
		!strings.Contains(strings.Join(mod.KernelNames, " "), "gpurr_demo_saxpy") {
		t.Errorf("module %v", mod)
	}

	kernel := &pb.Kernel{Id: 3, Name: "gpurr_demo_saxpy", ParamBytes: 24,
		Params: []*pb.ParamInfo{{Offset: 0, Size: 8}, {Offset: 8, Size: 4}, {Offset: 16, Size: 8}}}
	r.record(cannedKernel(0x7f00001000, kernel))
	mangled := &pb.Kernel{Id: 4, Name: "_Z6kernelPfi", ParamBytes: 12,
		Params: []*pb.ParamInfo{{Offset: 0, Size: 8}, {Offset: 8, Size: 4}}}
	r.record(cannedKernel(0x7f00002000, mangled))
	if len(r.batch.Kernels) != 2 {
		t.Fatalf("kernels %v", r.batch.Kernels)
	}
	k := r.batch.Kernels[0]
	if k.ModuleSha256 != mod.Sha256 || k.Identity == 0 || k.Demangled != "gpurr_demo_saxpy" {
		t.Errorf("kernel of the module: %v", k)
	}
	kernel.ModuleSha256, kernel.Identity, kernel.Demangled = k.ModuleSha256, k.Identity, k.Demangled
	equal(t, "kernel", k, kernel)
	if k := r.batch.Kernels[1]; k.Demangled != "kernel(float*, int)" || k.ModuleSha256 != "" || !proto.Equal(k.Params[1], mangled.Params[1]) {
		t.Errorf("kernel of no module: %v", k)
	}

	python := &pb.Callstack{Id: 11, Source: "python", Cut: "depth", Frames: []*pb.Frame{
		{Kind: pb.Frame_PYTHON, File: "train.py", Function: "step", Line: 42},
		{Kind: pb.Frame_PYTHON, File: "train.py", Function: "<module>", Line: 7},
	}}
	r.record(cannedStack(python, 1, 1)) // GP_UNWIND_MAX
	r.record(cannedStack(python, 1, 1)) // the same stack again: written once
	native := &pb.Callstack{Id: 12, Source: "native", Frames: []*pb.Frame{
		{Kind: pb.Frame_NATIVE, File: "/nonexistent/libfoo.so", Pc: 0x7f0000123456, Offset: 0x3456},
	}}
	r.record(cannedStack(native, 2, 0))
	if len(r.batch.Callstacks) != 2 {
		t.Fatalf("callstacks %v", r.batch.Callstacks)
	}
	equal(t, "python stack", r.batch.Callstacks[0], python)
	equal(t, "native stack", r.batch.Callstacks[1], native)
	if w := logs(r, "warn"); len(w) != 1 || !strings.Contains(w[0], "/nonexistent/libfoo.so") {
		t.Errorf("warnings %q, want one for the native frame's object", w)
	}

	launch := &pb.Launch{Seq: 1, Tid: 100, Device: 1, Context: 0x5555, ContextUid: 2, Stream: 0x7000, StreamId: 13,
		KernelId: 3, Grid: &pb.Dim3{X: 64, Y: 2, Z: 1}, Block: &pb.Dim3{X: 256, Y: 1, Z: 1}, Cluster: &pb.Dim3{X: 2, Y: 1, Z: 1},
		SharedMemBytes: 1024, Params: []byte("\x00\x00\x20\x00\x7e\x00\x00\x00\x05\x00\x00\x00\xff\xff\xff\xff\x00\x00\x40\x00\x7e\x00\x00\x00"),
		CorrelationId: 77, HostNs: 123456789, CallstackId: 11, Api: 652, Result: 0,
		Memory: &pb.MemoryPlan{Status: pb.MemoryPlan_SNAPSHOT, SnapshotSelected: true},
		Regions: []*pb.Region{
			{Address: 0x7e00200000, Size: 1 << 20, AllocationId: 5, ParamOffsets: []uint32{0}},
			{Address: 0x7e00400000, Size: 4096, ParamOffsets: []uint32{16}},
		}}
	r.record(cannedLaunch(launch, &cannedAutograd{thread: 1, seq: 40}))
	launch.Autograd = &pb.Autograd{Thread: 1, SequenceNr: 40}
	// A launch without memory capture, parameters of an odd length.
	plain := &pb.Launch{Seq: 2, Tid: 100, KernelId: 4, Grid: &pb.Dim3{X: 1, Y: 1, Z: 1}, Block: &pb.Dim3{X: 32, Y: 1, Z: 1},
		Params: []byte{1, 2, 3}, Captured: true, GraphNodeId: 9, Api: 307, Result: 719, Untimed: true}
	r.record(cannedLaunch(plain, nil))
	// A backward launch of node 39, which the forward launch above (made
	// with the thread's next number at 40) created.
	r.record(cannedNodeClass(1, true, "N5torch8autograd9generated11MmBackward0E"))
	backward := &pb.Launch{Seq: 3, Tid: 101, KernelId: 4, Grid: &pb.Dim3{}, Block: &pb.Dim3{}, CallstackId: 0}
	r.record(cannedLaunch(backward, &cannedAutograd{thread: 1, seq: 39, class: 1}))
	backward.Autograd = &pb.Autograd{Thread: 1, SequenceNr: 39, BackwardNode: "MmBackward0", ForwardCallstackId: 11, Link: pb.Autograd_NEXT_LAUNCH}
	if len(r.batch.Launches) != 3 {
		t.Fatalf("launches %v", r.batch.Launches)
	}
	equal(t, "launch", r.batch.Launches[0], launch)
	equal(t, "plain launch", r.batch.Launches[1], plain)
	equal(t, "backward launch", r.batch.Launches[2], backward)
	if r.stats.BackwardLaunches != 1 || r.stats.BackwardLinked != 1 || r.mem.snapshotSelected != 1 {
		t.Errorf("backward launches %d, linked %d, snapshots selected %d", r.stats.BackwardLaunches, r.stats.BackwardLinked, r.mem.snapshotSelected)
	}

	activity := &pb.KernelActivity{CorrelationId: 77, Device: 1, ContextUid: 2, StreamId: 13, StartNs: 1000, EndNs: 2500,
		Name: "gpurr_demo_saxpy", GraphId: 3, GraphNodeId: 4, Grid: &pb.Dim3{X: 64, Y: 2, Z: 1}, Block: &pb.Dim3{X: 256, Y: 1, Z: 1},
		RegistersPerThread: 32, SharedMemBytes: 1024, StaticSharedMemBytes: 48}
	own := proto.Clone(activity).(*pb.KernelActivity)
	own.Name = "gpurr_memcap"
	r.record(cannedActivity(activity, false))
	r.record(cannedActivity(own, true))
	if len(r.batch.Activities) != 1 || len(r.batch.OwnActivities) != 1 {
		t.Fatalf("activities %v, own %v", r.batch.Activities, r.batch.OwnActivities)
	}
	equal(t, "activity", r.batch.Activities[0], activity)
	equal(t, "own activity", r.batch.OwnActivities[0], own)

	node := &pb.GraphNode{NodeId: 0x9000, GraphId: 0x42, OriginalNodeId: 0x8000, LaunchSeq: 1, NodeType: 0}
	r.record(cannedGraphNode(node))
	graphLaunch := &pb.GraphLaunch{Seq: 4, Tid: 100, GraphExec: 0xe0e0, Stream: 0x7000, StreamId: 13, CorrelationId: 78,
		HostNs: 200, CallstackId: 11, Device: 1, Result: -1}
	r.record(cannedGraphLaunch(graphLaunch))
	equal(t, "graph node", r.batch.GraphNodes[0], node)
	equal(t, "graph launch", r.batch.GraphLaunches[0], graphLaunch)

	device := &pb.Device{Ordinal: 1, Name: "NVIDIA H100 80GB HBM3", CcMajor: 9, CcMinor: 0, SmCount: 132,
		MemoryBytes: 80 << 30, ContextUid: 2, Uuid: "GPU-00112233-4455-6677-8899-aabbccddeeff"}
	uuid := [16]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}
	r.record(cannedDevice(device, uuid))
	r.record(cannedDevice(&pb.Device{Ordinal: 1, Name: "described again"}, uuid))
	if len(r.batch.Devices) != 1 {
		t.Fatalf("devices %v", r.batch.Devices)
	}
	equal(t, "device", r.batch.Devices[0], device)

	alloc := &pb.Allocation{Id: 5, Kind: pb.Allocation_MEM_MAP, Address: 0x7e00200000, Size: 1 << 20, HostNs: 300, Freed: true, Device: 1}
	r.record(cannedAlloc(alloc))
	equal(t, "allocation", r.batch.Allocations[0], alloc)
	cleared := &pb.Allocation{Id: 6, Kind: pb.Allocation_MEM_ALLOC_ASYNC, Address: 0x7e00400000, Size: 4096, HostNs: 310, Cleared: true, LaunchSeq: 9}
	r.record(cannedAlloc(cleared))
	equal(t, "cleared allocation", r.batch.Allocations[1], cleared)

	r.record(cannedMemLost(1, 2, 1, "dropped: staging ring full"))
	if len(r.batch.Memory) != 1 {
		t.Fatalf("memory states %v", r.batch.Memory)
	}
	equal(t, "lost memory state", r.batch.Memory[0], &pb.MemoryState{LaunchSeq: 1, Point: pb.MemoryState_AFTER, Lost: true,
		LostReason: "dropped: staging ring full"})

	unknown := cannedGraphNode(node)
	unknown[0] = 99
	r.record(unknown)
	if e := logs(r, "error"); len(e) != 1 || e[0] != "unknown agent record type 99" {
		t.Errorf("errors %q", e)
	}
}

// cannedOfEveryType is one record of each type, built afresh: a module
// record owns its image, which decoding frees.
func cannedOfEveryType() map[string][]byte {
	return map[string][]byte{
		"launch": cannedLaunch(&pb.Launch{Seq: 1, Params: bytes.Repeat([]byte{0xab}, 20),
			Memory:  &pb.MemoryPlan{Status: pb.MemoryPlan_HASH},
			Regions: []*pb.Region{{Address: 1 << 40, Size: 64, ParamOffsets: []uint32{0, 8}}}}, &cannedAutograd{thread: 1, seq: 2}),
		"kernel":       cannedKernel(1, &pb.Kernel{Id: 1, Name: "k", Params: []*pb.ParamInfo{{Offset: 0, Size: 8}}}),
		"stack":        cannedStack(&pb.Callstack{Id: 1, Frames: []*pb.Frame{{Kind: pb.Frame_PYTHON, File: "a.py", Function: "f", Line: 1}}}, 1, 0),
		"module":       cannedModule([]byte("not a cubin"), 1, 1),
		"activity":     cannedActivity(&pb.KernelActivity{Name: "k"}, false),
		"own activity": cannedActivity(&pb.KernelActivity{Name: "gpurr_memcap"}, true),
		"graph node":   cannedGraphNode(&pb.GraphNode{NodeId: 1}),
		"graph launch": cannedGraphLaunch(&pb.GraphLaunch{Seq: 1}),
		"device":       cannedDevice(&pb.Device{Ordinal: 3, Name: strings.Repeat("x", 300)}, [16]byte{}),
		"allocation":   cannedAlloc(&pb.Allocation{Id: 1}),
		"memory lost":  cannedMemLost(1, 1, 1, strings.Repeat("y", 100)),
		"node class":   cannedNodeClass(1, false, "CompiledFunctionBackward"),
		"range":        cannedRangeOpen(&pb.Range{Id: 1, Message: strings.Repeat("r", 40), Pushed: true}, 0),
		"range end":    cannedRangeEnd(1, 0, 5),
		"nvtx name":    cannedNvtxName(1, true, "domain"),
	}
}

// TestRecordTruncated feeds every prefix of a record of each type: one
// shorter than its type's fixed part is dropped with an error, a longer one
// decodes what it holds, and none reads past its end (each prefix is a
// buffer of its own, so go test -race's pointer checks would catch it).
func TestRecordTruncated(t *testing.T) {
	for name, full := range cannedOfEveryType() {
		t.Run(name, func(t *testing.T) {
			fixed := recordFixedSize(full)
			r := testRecorder(t)
			for n := range len(full) {
				r.batch = &pb.Batch{}
				rec := cannedOfEveryType()[name] // a module of its own each time
				raw := bytes.Clone(rec[:n])
				r.record(raw)
				errs := logs(r, "error")
				switch {
				case n < 8:
					if len(errs) != 0 {
						t.Errorf("%d bytes: errors %q, want none (not even a header)", n, errs)
					}
				case n < fixed:
					if len(errs) != 1 || !strings.Contains(errs[0], "truncated agent record") {
						t.Errorf("%d of %d bytes: errors %q, want the record dropped", n, fixed, errs)
					}
				default:
					if len(errs) != 0 {
						t.Errorf("%d bytes (fixed part %d): errors %q", n, fixed, errs)
					}
				}
			}
		})
	}
	// A launch whose region tail is cut keeps its parameters and loses its regions.
	r := testRecorder(t)
	rec := cannedOfEveryType()["launch"]
	r.record(rec[:len(rec)-8])
	if l := r.batch.Launches; len(l) != 1 || len(l[0].Params) != 20 || l[0].Regions != nil || l[0].Memory.GetStatus() != pb.MemoryPlan_HASH {
		t.Errorf("cut launch decoded as %v", l)
	}
	// Fixed-size text without its NUL is read to the field's end, no further.
	r.record(cannedOfEveryType()["device"])
	r.record(cannedOfEveryType()["memory lost"])
	if d := r.batch.Devices; len(d) != 1 || d[0].Name != strings.Repeat("x", 256) {
		t.Errorf("device without a NUL: %v", d)
	}
	if m := r.batch.Memory; len(m) != 1 || m[0].LostReason != strings.Repeat("y", 64) {
		t.Errorf("lost state without a NUL: %v", m)
	}
}

// TestRecordGarbage decodes random bytes under every record type's header
// but the module's (whose record carries a pointer the C side owns): lengths
// and counts that claim more than the record holds must neither crash nor
// read past it.
func TestRecordGarbage(t *testing.T) {
	types := []uint32{1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xffffffff}
	rng := rand.New(rand.NewPCG(1, 2))
	r := testRecorder(t)
	for i := range 20000 {
		raw := make([]byte, 8+rng.IntN(600))
		for j := range raw {
			raw[j] = byte(rng.Uint32())
		}
		if i%2 == 0 { // lengths and counts near the top of their range
			for j := 8; j+4 <= len(raw); j += 4 {
				if rng.IntN(4) == 0 {
					copy(raw[j:], []byte{0xff, 0xff, 0xff, byte(rng.IntN(256))})
				}
			}
		}
		copy(raw, leBytes32(types[rng.IntN(len(types))]))
		r.record(raw)
		if i%1000 == 0 {
			r.batch = &pb.Batch{} // as writeFrame does
		}
	}
}

// TestRingDrain pushes records through the C ring as the program's threads
// do, wrapping around a small ring many times and overflowing it, and
// drains it as the writer does: every record that fit is decoded, in
// order, and every one that did not is counted.
func TestRingDrain(t *testing.T) {
	r := testRecorder(t)
	cannedRing(4096)
	dropped0, bytes0 := ringCounters()
	var want []uint64
	var refused, refusedBytes uint64
	seq := uint64(0)
	for round := range 50 {
		for range 4 + round%20 {
			seq++
			rec := cannedLaunch(&pb.Launch{Seq: seq, Params: make([]byte, int(seq*37)%300)}, nil)
			if ringPush(rec) {
				want = append(want, seq)
			} else {
				refused++
				refusedBytes += uint64(len(rec))
			}
		}
		r.drain()
		ringLog(1, "round done") // into the emptied ring: it fits
	}
	r.drain()
	var got []uint64
	for _, l := range r.batch.Launches {
		got = append(got, l.Seq)
	}
	if !slices.Equal(got, want) {
		t.Errorf("launches drained %v, pushed %v", got, want)
	}
	if refused == 0 {
		t.Error("the ring never filled: the test does not cover a full ring")
	}
	dropped, droppedBytes := ringCounters()
	if dropped-dropped0 != refused || droppedBytes-bytes0 != refusedBytes {
		t.Errorf("ring counted %d records, %d bytes dropped; %d, %d were refused", dropped-dropped0, droppedBytes-bytes0, refused, refusedBytes)
	}
	if w := logs(r, "warn"); len(w) != 50 || w[0] != "round done" {
		t.Errorf("log records from gp_log: %q", w)
	}
}

// TestRingInitEmpties: a ring handed a new buffer is empty, whatever the old one held
// undrained; the reader takes what is pushed after, not the new buffer's zeroes.
func TestRingInitEmpties(t *testing.T) {
	r := testRecorder(t)
	cannedRing(4096)
	if !ringPush(cannedLaunch(&pb.Launch{Seq: 1}, nil)) {
		t.Fatal("the first record did not fit an empty ring")
	}
	cannedRing(4096) // launch 1 left in the old buffer, undrained
	if !ringPush(cannedLaunch(&pb.Launch{Seq: 2}, nil)) {
		t.Fatal("a record did not fit a new ring")
	}
	r.drain()
	if n := len(r.batch.Launches); n != 1 || r.batch.Launches[0].Seq != 2 {
		t.Errorf("drained %v, want launch 2 only", r.batch.Launches)
	}
}

// TestRingPrefault: the writer faults in the ring's first lap ahead of the
// records (MADV_POPULATE_WRITE), leaving what lies further on untouched and
// the records already there intact.
func TestRingPrefault(t *testing.T) {
	const size, ahead = 16 << 20, 4 << 20
	r := testRecorder(t)
	base := mappedRing(size)
	if in := residentPages(base, 0, size); in != 0 {
		t.Fatalf("a fresh mapping has %d pages in memory", in)
	}
	var want []uint64
	for seq := uint64(1); seq <= 2000; seq++ { // ~600 KiB of records, faulted in as written
		if !ringPush(cannedLaunch(&pb.Launch{Seq: seq, Params: make([]byte, 256)}, nil)) {
			t.Fatalf("record %d did not fit", seq)
		}
		want = append(want, seq)
	}
	got := ringPrefault(ahead)
	if got == size {
		t.Skip("this kernel cannot populate pages ahead (MADV_POPULATE_WRITE is Linux 5.14+): they fault in as written")
	}
	page := os.Getpagesize()
	if got < ahead || got > 5<<20 {
		t.Fatalf("faulted in %d bytes, want the records' ~600 KiB and %d more", got, ahead)
	}
	if in, all := residentPages(base, 0, int(got)), (int(got)+page-1)/page; in != all {
		t.Errorf("%d of the first %d pages in memory, want all", in, all)
	}
	if in := residentPages(base, 8<<20, 8<<20); in != 0 {
		t.Errorf("%d pages past the records and what is ahead of them are in memory, want none", in)
	}
	if again := ringPrefault(ahead); again != got {
		t.Errorf("a second prefault with no new records moved to %d from %d", again, got)
	}
	r.drain()
	var seqs []uint64
	for _, l := range r.batch.Launches {
		seqs = append(seqs, l.Seq)
	}
	if !slices.Equal(seqs, want) {
		t.Errorf("records drained %d, pushed %d: the prefault changed them", len(seqs), len(want))
	}
}

// BenchmarkWriterLaunches is the writer's cost per launch record, from the ring's bytes to the
// events file (decoded, batched, framed, compressed, written), by the size of the launch's
// parameters: past what it keeps up with, a program launching faster fills the ring and
// launch records are dropped (bench/run.py --only launch_params saw it at 300,000 launches a
// second with up to 4000 bytes of parameters).
func BenchmarkWriterLaunches(b *testing.B) {
	for _, size := range []int{64, 512, 4000} {
		b.Run(fmt.Sprintf("params=%d", size), func(b *testing.B) {
			r := testRecorder(&testing.T{})
			params := make([]byte, size)
			for i := range params { // pointers and sizes, as kernels' parameters hold: some repetition
				params[i] = byte(i*7 + i/64)
			}
			raw := cannedLaunch(&pb.Launch{Seq: 1, Tid: 100, KernelId: 3, Grid: &pb.Dim3{X: 64, Y: 1, Z: 1},
				Block: &pb.Dim3{X: 256, Y: 1, Z: 1}, Params: params, CallstackId: 11, Api: 307}, nil)
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				r.record(raw)
				if len(r.batch.Launches) >= frameLaunches {
					r.writeFrame()
				}
			}
			r.writeFrame()
		})
	}
}

// A step digest two of whose three jobs came back, the third never enqueued (no room), is
// recorded as lost when the recording ends, not dropped without a word; a launch's point
// likewise.
func TestPendingPointsRecordedLost(t *testing.T) {
	r := testRecorder(t)
	digest := pointKey{seq: 40, point: uint32(pb.MemoryState_DIGEST)}
	p := r.mem.point(digest, 3)
	p.received = 2
	p.state.Step = 4
	after := pointKey{seq: 12, point: uint32(pb.MemoryState_AFTER)}
	r.mem.point(after, 2).received = 1
	r.mem.abandonPending(r)
	if len(r.mem.pending) != 0 {
		t.Fatalf("%d points still pending", len(r.mem.pending))
	}
	equal(t, "digest", &pb.Batch{Digests: r.batch.Digests}, &pb.Batch{Digests: []*pb.MemoryState{{LaunchSeq: 40, Point: pb.MemoryState_DIGEST,
		Step: 4, Lost: true, LostReason: "only 2 of its 3 memory jobs were enqueued: no room for the rest"}}})
	equal(t, "launch state", &pb.Batch{Memory: r.batch.Memory}, &pb.Batch{Memory: []*pb.MemoryState{{LaunchSeq: 12, Point: pb.MemoryState_AFTER,
		Lost: true, LostReason: "only 1 of its 2 memory jobs were enqueued: no room for the rest"}}})
}

// A batch whose memory states' hashes reach frameStateBytes is written out at once: hashes do
// not compress, and a frame holds at most 256 MiB (XLA's preallocated pool, hashed whole after
// each launch and copy, made a 346 MB frame).
func TestFrameBoundedByStates(t *testing.T) {
	r := testRecorder(t)
	state := func(seq uint64) *pb.MemoryState {
		return &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER,
			Regions: []*pb.RegionState{{Hash: make([]byte, 16), ChunkHashes: make([]byte, 2<<20-16)}}}
	}
	for seq := uint64(1); seq <= 40; seq++ {
		s := state(seq)
		r.batch.Memory = append(r.batch.Memory, s)
		r.addedState(s)
	}
	if r.stats.FramesWritten != 1 || len(r.batch.Memory) != 8 || r.stateBytes != 8<<21 {
		t.Fatalf("%d frames written, %d states and %d hash bytes left in the batch; want 1 frame of 32 states, 8 left (16 MiB)",
			r.stats.FramesWritten, len(r.batch.Memory), r.stateBytes)
	}
}
