package testrec

import (
	"google.golang.org/protobuf/proto"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// program builds one rank's records in the order the agent would write
// them, keeping the sequence numbers, correlation ids and clock consistent.
type program struct {
	rank  int
	seq   uint64
	now   uint64
	stats *pb.Stats
	nodes uint64  // last capture-time node id
	mem   *memory // nil when memory capture is off
	// linked: the agent reads PyTorch's autograd state, and every launch
	// carries its context; nextNode is the forward thread's next autograd
	// sequence number.
	linked   bool
	nextNode uint64
	copies   bool // launches carry end_ns (format 1.15)
}

func newProgram(rank int) *program {
	return &program{rank: rank, now: startNS + uint64(rank)*1000, stats: &pb.Stats{}}
}

func (p *program) tick() uint64 {
	p.now += launchGapNS
	return p.now
}

// correlation ids: CUPTI numbers API calls; every launch is one call.
func (p *program) correlation() uint32 { return 100 + uint32(p.seq) }

func dim(x, y, z uint32) *pb.Dim3 { return &pb.Dim3{X: x, Y: y, Z: z} }

// launch describes a launch of kernel k made at the current time; a
// captured one builds a graph node and runs nothing.
func (p *program) launch(k int, cs *pb.Callstack, salt uint64, captured bool) *pb.Launch {
	p.seq++
	p.stats.Launches++
	spec := kernels[k]
	l := &pb.Launch{
		Seq:            p.seq,
		Tid:            pid(p.rank),
		Device:         uint32(p.rank),
		Context:        contextHandle,
		ContextUid:     1,
		Stream:         defaultStream,
		StreamId:       defaultSID,
		KernelId:       kernelID(k),
		Grid:           dim(spec.gridX, 1, 1),
		Block:          dim(spec.block, 1, 1),
		Params:         params(p.rank, k, salt),
		CorrelationId:  p.correlation(),
		HostNs:         p.tick(),
		Api:            307, // cuLaunchKernel
		SharedMemBytes: 0,
	}
	if p.copies {
		l.EndNs = l.HostNs + LaunchCallNS
		p.now = l.EndNs // what the thread does next comes after the call returned
	}
	if k == kGemm {
		l.Api = 652 // cuLaunchKernelEx: cuBLAS names a cluster
		l.Cluster = dim(2, 1, 1)
		l.SharedMemBytes = 98304
		l.Grid = dim(spec.gridX, 2, 1)
	}
	if cs != nil {
		l.CallstackId = cs.Id
	}
	if p.linked {
		l.Autograd = &pb.Autograd{Thread: forwardThread, SequenceNr: p.nextNode}
	}
	if captured {
		p.nodes++
		l.Stream, l.StreamId = captureStream, captureSID
		l.Captured = true
		l.GraphNodeId = 0x1000 + p.nodes
	}
	p.describeMemory(l, spec.name)
	return l
}

// activity is the GPU execution of kernel k, correlated with corr.
func (p *program) activity(k int, corr uint32, stream uint32, start uint64) *pb.KernelActivity {
	p.stats.Activities++
	spec := kernels[k]
	a := &pb.KernelActivity{
		CorrelationId:      corr,
		Device:             uint32(p.rank),
		ContextUid:         1,
		StreamId:           stream,
		StartNs:            start,
		EndNs:              start + spec.gpuNS + uint64(p.rank)*100,
		Name:               spec.name,
		Grid:               dim(spec.gridX, 1, 1),
		Block:              dim(spec.block, 1, 1),
		RegistersPerThread: spec.registers,
	}
	if k == kGemm {
		a.Grid = dim(spec.gridX, 2, 1)
		a.SharedMemBytes = 98304
	}
	return a
}

func (p *program) eager(k int, cs *pb.Callstack, salt uint64) (*pb.Launch, *pb.KernelActivity) {
	l := p.launch(k, cs, salt, false)
	return l, p.activity(k, l.CorrelationId, l.StreamId, l.HostNs+queueNS)
}

// capture makes a launch during stream capture: it builds a graph node and
// runs nothing.
func (p *program) capture(k int, cs *pb.Callstack) (*pb.Launch, *pb.GraphNode) {
	l := p.launch(k, cs, 9, true)
	return l, &pb.GraphNode{NodeId: l.GraphNodeId, GraphId: capturedGraph, LaunchSeq: l.Seq}
}

// replay launches the executable graph; its kernels run with the replay's
// correlation id and the executable graph's node ids.
func (p *program) replay(cs *pb.Callstack, ks []int, execNodes []uint64) (*pb.GraphLaunch, []*pb.KernelActivity) {
	p.seq++
	p.stats.GraphLaunches++
	g := &pb.GraphLaunch{
		Seq:           p.seq,
		Tid:           pid(p.rank),
		GraphExec:     graphExec,
		Stream:        captureStream,
		StreamId:      captureSID,
		CorrelationId: p.correlation(),
		HostNs:        p.tick(),
		CallstackId:   cs.Id,
		Device:        uint32(p.rank),
	}
	var acts []*pb.KernelActivity
	start := g.HostNs + queueNS
	for i, k := range ks {
		if p.mem != nil {
			p.mem.run(params(p.rank, k, 9))
		}
		a := p.activity(k, g.CorrelationId, captureSID, start)
		a.GraphId = execGraph
		a.GraphNodeId = execNodes[i]
		acts = append(acts, a)
		start = a.EndNs + 500
	}
	return g, acts
}

// Batches returns the frames rank's process writes, in order, for a
// complete recording that lost nothing.
func Batches(rank int) []*pb.Batch { return build(rank, options{}) }

// options say how the agent recorded the program.
type options struct {
	lossy      bool             // report what was lost (dropped launches and activities, a module it could not store)
	memory     *pb.MemoryConfig // --memory; nil when off
	stopMemory bool             // memory capture stops near the end (disk full): a state lost, a launch skipped
	autograd   *pb.AutogradInfo // PyTorch's autograd as the agent found it; nil: no torch, and no training step
	diverge    bool             // a backward kernel computes another result than in the run without it
	stepRange  string           // --step-range
	probe      bool             // --probe ProbeRecorded
	hang       bool             // --hang-timeout 5s --hang-kill: the program hangs at the end, and is ended (no End record)
	copies     bool             // format 1.15: copies, memsets, waits and launch calls' host time (copyBatch)
	graphNodes bool             // a graph built node by node through the graph API (graphNodesBatch)
	// storeChunk, with a snapshot memory config, is handed each chunk the agent would write
	// to the process's chunk store.
	storeChunk func(hash [16]byte, data []byte)
}

// Memory capture configurations of the Memory variant.
func snapshotConfig() *pb.MemoryConfig {
	return &pb.MemoryConfig{Mode: recording.MemorySnapshot, ChunkBytes: memhash.ChunkSize, SnapshotKernels: "gemm", OnFull: "backpressure", StagingBytes: 2 << 20, NanScan: []string{"bf16"}}
}

func hashConfig() *pb.MemoryConfig {
	return &pb.MemoryConfig{Mode: recording.MemoryHash, ChunkBytes: memhash.ChunkSize, OnFull: "backpressure", StagingBytes: 64 << 20, NanScan: []string{"bf16"}}
}

// Device memory of the program: its kernels' pointer parameters (see
// params) point into the weights (param words 0 and 1) and the activations
// (word 2); a workspace is allocated from the stream-ordered pool and
// freed, and the weights are reallocated, larger, at the same address.
const (
	weightsBytes    = 1<<20 + 40<<10
	activationBytes = 64 << 10
	workspaceBytes  = 256 << 10
	newWeightsBytes = 3 << 20
)

func deviceBase(rank int) uint64 { return 0x7f3a_0000_0000 + uint64(rank)<<32 }

// build writes a short training step.
func build(rank int, o options) []*pb.Batch {
	p := newProgram(rank)
	if o.memory != nil {
		p.mem = newMemory(o.memory)
		p.mem.store = o.storeChunk
		// The training step's NaN must be the first one.
		p.mem.finite = o.autograd != nil
	}
	p.linked = o.autograd.GetLinked()
	p.copies = o.copies
	fill, gemm, triton := callstack(csFill), callstack(csGemm), callstack(csTriton)
	capture, replay, nat := callstack(csCapture), callstack(csReplay), callstack(csNative)
	rk := int32(rank)

	var batches []*pb.Batch
	// Every frame after the first carries the counters as of itself, and
	// the memory states the GPU completed since the frame before.
	emit := func(b *pb.Batch) {
		p.stats.FramesWritten++
		if b.Process == nil {
			b.Memory, b.OwnActivities = p.completed()
			b.Stats = proto.CloneOf(p.stats)
		}
		batches = append(batches, b)
	}

	emit(&pb.Batch{
		Process: &pb.Process{
			Pid: pid(rank), Ppid: 4200, Hostname: "gpu-box",
			Argv: []string{"python", script, "--steps", "2"},
			Rank: &rk, LocalRank: &rk, WorldSize: ptr(int32(Ranks)),
			StartNs: p.now, StartUnixNs: startUnixNS,
			AgentVersion: "0.1.0", CuptiPath: "/usr/local/cuda/lib64/libcupti.so.13", CuptiApiVersion: 130000,
			DriverVersion: 13000, CallstackMode: "auto", Python: "CPython 3.12.3", Memory: o.memory,
			Autograd: o.autograd, Nvtx: true, StepRange: o.stepRange,
		},
		Devices: []*pb.Device{{
			Ordinal: uint32(rank), Uuid: []string{"GPU-6f1c2d3e-4a5b-6c7d-8e9f-0a1b2c3d4e5f", "GPU-0b9a8c7d-6e5f-4a3b-2c1d-0e9f8a7b6c5d"}[rank],
			Name: "NVIDIA H100 80GB HBM3", CcMajor: 9, CcMinor: 0, SmCount: 132, MemoryBytes: 85_520_809_984, ContextUid: 1,
		}},
		Log: []*pb.LogEntry{{HostNs: p.now, Level: "info", Message: "recording started (callstacks auto, kernels all)"}},
	})

	mods := moduleRecords(rank)
	p.stats.Modules = uint64(len(mods))
	p.stats.Callstacks = 6
	b := &pb.Batch{Modules: mods, Kernels: kernelRecords(), Callstacks: []*pb.Callstack{fill, gemm, triton}}
	probeTriton, probeAdd := probeKernels()
	if o.probe {
		batches[0].Process.Probe = ProbeRecorded
		b.ProbeKernels = []*pb.ProbeKernel{probeTriton}
	}
	var weights, workspace *pb.Allocation
	if p.mem != nil {
		base := deviceBase(rank)
		weights = p.alloc(pb.Allocation_MEM_ALLOC, base, weightsBytes)
		activations := p.alloc(pb.Allocation_MEM_ALLOC, base+2<<20, activationBytes)
		workspace = p.alloc(pb.Allocation_MEM_ALLOC_ASYNC, base+8<<20, workspaceBytes)
		b.Allocations = []*pb.Allocation{weights, activations, workspace}
	}
	// Initialization fills many small tensors: the most launched kernel,
	// though not the one that takes the GPU's time. It runs in NVTX ranges:
	// "init" (closed in the next frame) and, in it, "weights" around the
	// gemms; a start/end range "load" never ends.
	tid := pid(rank)
	initRange := &pb.Range{Id: 1, Tid: tid, Message: "init", StartNs: p.now + 1, Pushed: true}
	load := &pb.Range{Id: 2, ParentId: 1, Tid: tid, Domain: "data", Message: "load", StartNs: p.now + 2}
	b.Ranges = []*pb.Range{initRange, load}
	for i := range 6 {
		l, a := p.eager(kFill, fill, uint64(i))
		l.RangeId = initRange.Id
		b.Launches, b.Activities = append(b.Launches, l), append(b.Activities, a)
	}
	weightsRange := &pb.Range{Id: 3, ParentId: 1, Tid: tid, Message: "weights", Category: 2, StartNs: p.now + 1, Pushed: true}
	b.Ranges = append(b.Ranges, weightsRange)
	for i := range 3 {
		if i == 2 && p.mem != nil {
			b.Allocations = append(b.Allocations, p.free(weights.Id), p.alloc(pb.Allocation_MEM_ALLOC, weights.Address, newWeightsBytes))
		}
		l, a := p.eager(kGemm, gemm, uint64(i))
		l.RangeId = weightsRange.Id
		b.Launches, b.Activities = append(b.Launches, l), append(b.Activities, a)
	}
	weightsRange.EndNs = p.now + 1
	p.stats.Ranges = 3
	l, a := p.eager(kTriton, triton, 2)
	l.RangeId = initRange.Id
	b.Launches = append(b.Launches, l)
	// Activity buffers arrive later than the launches they describe.
	late := a
	emit(b)
	if o.copies {
		emit(p.copyBatch())
	}

	b = &pb.Batch{Callstacks: []*pb.Callstack{capture}, Activities: []*pb.KernelActivity{late},
		RangeEnds: []*pb.RangeEnd{{Id: initRange.Id, EndNs: p.now + 1}}}
	var captureNodes []*pb.GraphNode
	for _, k := range []int{kGemm, kTriton} {
		l, n := p.capture(k, capture)
		b.Launches = append(b.Launches, l)
		captureNodes = append(captureNodes, n)
	}
	b.GraphNodes = captureNodes
	if o.probe {
		// The probes' records come when the launch has finished, with its activity.
		b.Probes = []*pb.ProbeResult{probedTriton(), {LaunchSeq: SkippedLaunch, Skipped: "captured into a CUDA graph: its replays run without probes"}}
		p.stats.ProbeLaunches, p.stats.ProbeSkipped = 1, 1
	}
	emit(b)

	// Instantiation clones every node. The gemm node is cloned straight
	// from the captured graph; the triton node went through cuGraphClone
	// first, so its chain has two hops.
	b = &pb.Batch{Callstacks: []*pb.Callstack{replay}}
	b.GraphNodes = []*pb.GraphNode{
		{NodeId: 0x3001, GraphId: clonedGraph, OriginalNodeId: captureNodes[1].NodeId},
		{NodeId: 0x4001, GraphId: execGraph, OriginalNodeId: captureNodes[0].NodeId},
		{NodeId: 0x4002, GraphId: execGraph, OriginalNodeId: 0x3001},
	}
	for range 2 {
		g, acts := p.replay(replay, []int{kGemm, kTriton}, []uint64{0x4001, 0x4002})
		b.GraphLaunches = append(b.GraphLaunches, g)
		b.Activities = append(b.Activities, acts...)
	}
	emit(b)
	if o.graphNodes {
		emit(p.graphNodesBatch(replay))
	}

	b = &pb.Batch{Callstacks: []*pb.Callstack{nat}}
	if p.mem != nil {
		b.Allocations = []*pb.Allocation{p.free(workspace.Id)}
	}
	l, a = p.eager(kAdd, nat, 3)
	b.Launches = append(b.Launches, l)
	if o.probe {
		b.ProbeKernels = []*pb.ProbeKernel{probeAdd}
	}
	if o.lossy {
		p.stats.Activities--
		p.stats.ActivitiesDropped = 1
	} else {
		b.Activities = append(b.Activities, a)
	}
	if o.stopMemory {
		why := "chunk store: write pack: no space left on device"
		p.stopMemory(why)
		p.stats.Errors++
		b.Log = append(b.Log, &pb.LogEntry{HostNs: p.now + 1, Level: "error", Message: "memory capture stopped: " + why})
	}
	l = p.launch(kAdd, nil, 4, false) // no callstack: the agent took none
	b.Launches = append(b.Launches, l)
	b.Activities = append(b.Activities, p.activity(kAdd, l.CorrelationId, l.StreamId, l.HostNs+queueNS))
	if o.lossy {
		p.stats.LaunchesDropped = 3
		p.stats.RingBytesDropped = 3 * 412
		p.stats.ModulesFailed = 1
		p.stats.Errors = 1
		p.stats.CallstacksFailed = 1
		b.Modules = []*pb.Module{{Sha256: digest([]byte("lost module")), CuptiModuleId: 9, Size: 11, HostNs: p.tick(), ContextUid: 1}}
		b.Log = []*pb.LogEntry{
			{HostNs: p.now, Level: "warn", Message: "event ring full: 3 launches dropped"},
			{HostNs: p.now + 1, Level: "error", Message: "store module " + digest([]byte("lost module"))[:16] + ": no space left on device"},
		}
	}
	emit(b)

	if o.autograd != nil {
		emit(p.trainStep(o.diverge))
	}
	if o.hang {
		emit(p.hang(batches))
		return batches
	}
	emit(&pb.Batch{End: &pb.End{EndNs: p.tick(), Reason: "exit"}})
	return batches
}

func ptr[T any](v T) *T { return &v }
