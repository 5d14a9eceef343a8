package testrec

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// The JAX program: recording/internal/xla/testdata's jax_mlp.py, its XLA dump beside its
// events (JAXDump names the dump's folder). XLA's compilation thread (JAXCompileTID) autotunes,
// with stream_executor's buffer fill and redzone check around a candidate of loop_reduce_fusion,
// before the main thread runs jit_multiply (init's weight scaling) and one step of jit_step:
// ten kernels, each at the line of the program XLA's metadata gives it. The last launch is a
// loop_multiply_fusion of a module the dump does not tell apart (three modules have one, none
// with its grid): it keeps its own line and its op_name says why. It was recorded with
// --memory hash --nan-scan f32: the redzone check's scratch memory holds NaN, as does the
// loss's loop_subtract_fusion (JAXNaNKernel). The diverged run autotunes one candidate more,
// its scratch memory holds other bytes, and gemm_fusion_dot_3 (JAXDivergedKernel) computed
// another result, as a nondeterministic kernel does. At the end the program replays a CUDA
// graph that XLA built node by node (a command buffer: no launch built its nodes) of the
// step's gemm_fusion_dot_1 and gemm_fusion_dot.
const (
	JAXMainTID    = 5000
	JAXCompileTID = 5010
	JAXScript     = "/work/main/scratch/jax_mlp.py"
	jaxPxla       = "/opt/venv/lib/python3.12/site-packages/jax/_src/interpreters/pxla.py"
)

// JAXDump is the XLA dump the JAX recording carries, relative to the module root.
const JAXDump = "recording/internal/xla/testdata/dump"

type jaxKernel struct {
	name        string
	module      string
	grid, block uint32
}

var jaxStep = []jaxKernel{
	{"gemm_fusion_dot_2", "step", 128, 128}, {"loop_reduce_fusion", "step", 128, 128}, {"gemm_fusion_dot_3", "step", 32, 128},
	{"loop_subtract_fusion", "step", 10, 128}, {"input_reduce_fusion", "step", 1, 96}, {"loop_multiply_fusion_1", "step", 1, 1},
	{"gemm_fusion_dot_1", "step", 8, 128}, {"gemm_fusion_dot_general_8", "step", 32, 128}, {"loop_multiply_fusion", "step", 512, 128},
	{"gemm_fusion_dot", "step", 64, 128},
}

const (
	JAXNaNKernel      = "loop_subtract_fusion"
	JAXDivergedKernel = "gemm_fusion_dot_3"
)

const (
	jaxRepeat  = "_ZN15stream_executor3gpu22RepeatBufferKernelImplEPcll"
	jaxRedzone = "_ZN15stream_executor3gpu26RedzoneAllocatorKernelImplEPhhmPj"
)

// JAXBatches are the JAX program's frames, of the diverged run or not.
func JAXBatches(diverged bool) []*pb.Batch { return jaxBatches(diverged, false) }

// JAXPoolBatches are the JAX program's frames with XLA's memory preallocated: every launch,
// autotuning's included, reaches the one pool, so the NaN the redzone check leaves in its
// scratch is counted after every later launch, and the loss's NaN adds one.
func JAXPoolBatches() []*pb.Batch { return jaxBatches(false, true) }

func jaxBatches(diverged, pool bool) []*pb.Batch {
	rank := int32(0)
	proc := &pb.Process{Pid: pid(0), Ppid: 4200, Hostname: "gpu-box", Argv: []string{"python", JAXScript},
		Rank: &rank, WorldSize: ptr(int32(1)), StartNs: startNS, StartUnixNs: startUnixNS, AgentVersion: "0.1.0",
		CallstackMode: "auto", GpuTiming: true,
		Memory: &pb.MemoryConfig{Mode: recording.MemoryHash, ChunkBytes: memhash.ChunkSize, OnFull: "backpressure", StagingBytes: 64 << 20, NanScan: []string{"f32"}}}
	modules := map[string][]string{"step": nil, "multiply": {"loop_multiply_fusion"}, "other": {"loop_multiply_fusion"},
		"candidate": {"loop_reduce_fusion"}, "repeat": {jaxRepeat}, "redzone": {jaxRedzone}}
	for _, k := range jaxStep {
		modules["step"] = append(modules["step"], k.name)
	}
	sha := func(m string) string { return fmt.Sprintf("%064x", len(m)*7919+int(m[0])) }
	b := &pb.Batch{Process: proc}
	for _, m := range []string{"repeat", "candidate", "redzone", "multiply", "step", "other"} {
		b.Modules = append(b.Modules, &pb.Module{Sha256: sha(m), KernelNames: modules[m], Size: 4096})
	}
	kernelIDs := map[[2]string]uint64{}
	kernel := func(name, module string) uint64 {
		key := [2]string{name, module}
		if id, ok := kernelIDs[key]; ok {
			return id
		}
		id := uint64(len(kernelIDs) + 1)
		kernelIDs[key] = id
		b.Kernels = append(b.Kernels, &pb.Kernel{Id: id, Name: name, Demangled: name, ModuleSha256: sha(module)})
		return id
	}
	dispatch := &pb.Callstack{Id: 1, Frames: []*pb.Frame{
		native("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "cuLaunchKernelEx", 0x2f1b00),
		py(jaxPxla, 420, "ExecuteReplicated.__call__"),
		py(JAXScript, 29, "<module>"),
	}}
	b.Callstacks = []*pb.Callstack{dispatch}
	now := uint64(startNS)
	stats := &pb.Stats{Callstacks: 1, Modules: uint64(len(b.Modules))}
	const base = 0x7f00_0000_0000
	const poolID = 999
	if pool {
		b.Allocations = append(b.Allocations, &pb.Allocation{Id: poolID, Kind: pb.Allocation_MEM_ALLOC, Address: base, Size: 1 << 30, HostNs: now})
	}
	poolNaN := uint64(0)
	launch := func(tid uint32, k jaxKernel, cs uint64) {
		seq := uint64(len(b.Launches) + 1)
		now += launchGapNS
		l := &pb.Launch{Seq: seq, Tid: tid, ContextUid: 1, Stream: defaultStream, StreamId: defaultSID,
			KernelId: kernel(k.name, k.module), Grid: dim(k.grid, 1, 1), Block: dim(k.block, 1, 1),
			CorrelationId: uint32(100 + seq), HostNs: now, Api: 652, CallstackId: cs,
			Params: binary.LittleEndian.AppendUint64(nil, base+seq<<20), Memory: &pb.MemoryPlan{Status: pb.MemoryPlan_HASH},
			Regions: []*pb.Region{{Address: base + seq<<20, Size: 4096, ParamOffsets: []uint32{0}, AllocationId: seq}}}
		if pool {
			l.Regions = []*pb.Region{{Address: base, Size: 1 << 30, ParamOffsets: []uint32{0}, AllocationId: poolID}}
		} else {
			b.Allocations = append(b.Allocations, &pb.Allocation{Id: seq, Kind: pb.Allocation_MEM_ALLOC, Address: base + seq<<20, Size: 4096, HostNs: now - 1})
		}
		// What the launch wrote: the same in both runs but for the planted difference and
		// autotuning's scratch memory.
		data := make([]byte, 4096)
		salt := uint64(len(k.name))<<32 ^ uint64(k.grid)<<8 ^ uint64(k.block)
		if tid == JAXCompileTID {
			salt ^= seq << 40
			if diverged {
				salt ^= 0xd1
			}
		}
		if diverged && k.name == JAXDivergedKernel {
			salt ^= 0xd2
		}
		for i := 0; i+8 <= len(data); i += 8 {
			binary.LittleEndian.PutUint64(data[i:], uint64(i)*0x9e3779b97f4a7c15^salt)
		}
		rs, _ := RegionState(data, nil) // without a chunk store it cannot fail
		rs.NanCount, rs.InfCount = []uint64{0}, []uint64{0}
		if k.name == JAXNaNKernel || k.name == jaxRedzone {
			rs.NanCount[0] = 1
			poolNaN++
		}
		if pool {
			rs.NanCount[0] = poolNaN
		}
		b.Memory = append(b.Memory, &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER, Regions: []*pb.RegionState{rs}})
		if !pool {
			stats.Allocations++
		}
		stats.MemoryLaunches++
		stats.MemoryStates++
		stats.BytesHashed += 4096
		b.Launches = append(b.Launches, l)
		b.Activities = append(b.Activities, &pb.KernelActivity{CorrelationId: l.CorrelationId, ContextUid: 1, StreamId: defaultSID,
			StartNs: now + queueNS, EndNs: now + queueNS + 1000*seq, Name: k.name, Grid: l.Grid, Block: l.Block})
	}
	launch(JAXCompileTID, jaxKernel{jaxRepeat, "repeat", 158, 256}, 0)
	launch(JAXCompileTID, jaxKernel{"loop_reduce_fusion", "candidate", 128, 128}, 0)
	if diverged {
		launch(JAXCompileTID, jaxKernel{"loop_reduce_fusion", "candidate", 256, 64}, 0)
	}
	launch(JAXCompileTID, jaxKernel{jaxRedzone, "redzone", 8192, 1024}, 0)
	launch(JAXMainTID, jaxKernel{"loop_multiply_fusion", "multiply", 40, 128}, dispatch.Id)
	for _, k := range jaxStep {
		launch(JAXMainTID, k, dispatch.Id)
	}
	launch(JAXMainTID, jaxKernel{"loop_multiply_fusion", "other", 7, 128}, dispatch.Id)
	now += launchGapNS
	g := &pb.GraphLaunch{Seq: uint64(len(b.Launches) + 1), Tid: JAXMainTID, GraphExec: 0x5000, StreamId: defaultSID,
		CorrelationId: uint32(100 + len(b.Launches) + 1), HostNs: now, CallstackId: dispatch.Id}
	b.GraphLaunches = append(b.GraphLaunches, g)
	for i, k := range []jaxKernel{jaxStep[6], jaxStep[9]} {
		b.Activities = append(b.Activities, &pb.KernelActivity{CorrelationId: g.CorrelationId, ContextUid: 1, StreamId: defaultSID,
			StartNs: now + queueNS + uint64(i)*20_000, EndNs: now + queueNS + uint64(i)*20_000 + 15_000, Name: k.name,
			Grid: dim(k.grid, 1, 1), Block: dim(k.block, 1, 1), GraphId: 9, GraphNodeId: 0x900 + uint64(i)})
	}
	stats.Launches, stats.GraphLaunches, stats.Activities = uint64(len(b.Launches)), 1, uint64(len(b.Activities))
	if pool {
		stats.Allocations = 1
	}
	return []*pb.Batch{b, {Stats: stats, End: &pb.End{EndNs: now + 1_000_000, Reason: "exit"}}}
}

// WriteJAX writes the JAX program's recording, of the diverged run or not, into dir, with
// the XLA dump of the module root's JAXDump folder (root: the path of the module's root
// directory).
func WriteJAX(dir, root string, diverged bool) error {
	if err := recording.CreateSet(dir, []string{"python", JAXScript}); err != nil {
		return err
	}
	if _, err := writeFrames(dir, 0, JAXBatches(diverged)); err != nil {
		return err
	}
	src := filepath.Join(root, filepath.FromSlash(JAXDump))
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	dst := filepath.Join(dir, recording.XLADir)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
