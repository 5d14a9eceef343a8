package testrec

import (
	"encoding/binary"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/chunkstore"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Replayable describes the recording WriteReplayable writes: one process,
// in snapshot mode, whose launch 2 (a SAXPY over two regions) has
// snapshots before and after it, and whose launches 1 (no snapshot) and 3
// (captured into a graph) do not. It was recorded with --probe saxpy too, but
// launch 2 ran without probes (the probe buffers were all in use), so probe
// replays it.
type Replayable struct {
	Process       string
	Module        []byte
	X, Y          uint64 // the regions' addresses (Y is read and written)
	XBefore       []byte
	YBefore       []byte
	YAfter        []byte
	ParamsLaunch2 []byte
}

// WriteReplayable writes a small snapshot-mode recording into dir, for the
// tests of replay and extract, which need no GPU to load launches.
func WriteReplayable(dir string) (Replayable, error) { return writeReplayable(dir, true, false, nil) }

// WriteReplayableModule writes WriteReplayable's recording with module as its module image
// (a fat binary, say) instead of a stand-in cubin.
func WriteReplayableModule(dir string, module []byte) (Replayable, error) {
	return writeReplayable(dir, true, false, module)
}

// WriteReplayableUntimed writes WriteReplayable's recording as recorded with GPU timing
// off: no launch has a kernel run, nor a duration.
func WriteReplayableUntimed(dir string) (Replayable, error) {
	return writeReplayable(dir, false, false, nil)
}

// Launch 4 of WriteReplayableTorn, on stream TornStream, tears launch 2's state after it.
const (
	TornLaunch = 4
	TornStream = 5
)

// WriteReplayableTorn writes WriteReplayable's recording with one more launch, TornLaunch, on
// stream TornStream: it reaches launch 2's region Y, and its kernel ran while gpurr's kernel
// took launch 2's state after it, on launch 2's stream (0), which is therefore torn. Its state
// before it was taken alone.
func WriteReplayableTorn(dir string) (Replayable, error) {
	return writeReplayable(dir, true, true, nil)
}

func writeReplayable(dir string, timed, torn bool, module []byte) (Replayable, error) {
	r := Replayable{Process: "box-9", X: 0x7f3a_0020_0000, Y: 0x7f3a_0040_0000,
		Module: []byte("\x7fELF fake cubin of saxpy_gridstride")}
	if module != nil {
		r.Module = module
	}
	if err := recording.CreateSet(dir, []string{"python", "saxpy.py"}); err != nil {
		return r, err
	}
	sha, err := recording.PutModule(dir, r.Module)
	if err != nil {
		return r, err
	}
	proc := &pb.Process{Hostname: "box", Pid: 9, Argv: []string{"python", "saxpy.py"},
		Memory: &pb.MemoryConfig{Mode: recording.MemorySnapshot, ChunkBytes: memhash.ChunkSize, SnapshotKernels: "saxpy"}, Probe: "saxpy:entry,exit", GpuTiming: timed}
	w, err := recording.Create(dir, r.Process, &pb.Batch{Process: proc,
		Devices: []*pb.Device{{Ordinal: 0, Name: "NVIDIA H100 80GB HBM3", CcMajor: 9, CcMinor: 0}}})
	if err != nil {
		return r, err
	}
	store, err := chunkstore.Create(w.Dir(), chunkstore.Options{})
	if err != nil {
		return r, err
	}
	const n = 40000 // floats: more than one chunk
	r.XBefore, r.YBefore, r.YAfter = make([]byte, 4*n), make([]byte, 4*n), make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(r.XBefore[4*i:], uint32(i))
		binary.LittleEndian.PutUint32(r.YBefore[4*i:], uint32(3*i))
		binary.LittleEndian.PutUint32(r.YAfter[4*i:], uint32(5*i))
	}
	state := func(data []byte) *pb.RegionState {
		region, chunks := memhash.Hash(data)
		h := region.Bytes()
		rs := &pb.RegionState{Hash: h[:]}
		for k, c := range chunks {
			ch := c.Bytes()
			rs.ChunkHashes = append(rs.ChunkHashes, ch[:]...)
			lo := k * memhash.ChunkSize
			if err == nil {
				err = store.Put(ch, data[lo:min(lo+memhash.ChunkSize, len(data))])
			}
		}
		return rs
	}
	r.ParamsLaunch2 = make([]byte, 32)
	binary.LittleEndian.PutUint64(r.ParamsLaunch2[0:], r.X)
	binary.LittleEndian.PutUint64(r.ParamsLaunch2[8:], r.Y+16) // an interior pointer
	binary.LittleEndian.PutUint32(r.ParamsLaunch2[16:], 0x40000000)
	binary.LittleEndian.PutUint64(r.ParamsLaunch2[24:], n-4)
	regions := []*pb.Region{{Address: r.X, Size: 4 * n, ParamOffsets: []uint32{0}, AllocationId: 1},
		{Address: r.Y, Size: 4 * n, ParamOffsets: []uint32{8}, AllocationId: 2}}
	stack := &pb.Callstack{Id: 77, Source: "python", Frames: []*pb.Frame{{Kind: pb.Frame_PYTHON, File: "saxpy.py", Line: 12, Function: "main"}}}
	b := &pb.Batch{
		Modules:     []*pb.Module{{Sha256: sha, Size: uint64(len(r.Module)), KernelNames: []string{"saxpy_gridstride"}, Stored: true}},
		Kernels:     []*pb.Kernel{{Id: 1, Identity: 11, Name: "saxpy_gridstride", ModuleSha256: sha, ParamBytes: 32, Params: []*pb.ParamInfo{{Offset: 0, Size: 8}, {Offset: 8, Size: 8}, {Offset: 16, Size: 4}, {Offset: 24, Size: 8}}}},
		Callstacks:  []*pb.Callstack{stack},
		Allocations: []*pb.Allocation{{Id: 1, Address: r.X, Size: 4 * n}, {Id: 2, Address: r.Y, Size: 4 * n}},
		Launches: []*pb.Launch{
			{Seq: 1, KernelId: 1, CorrelationId: 101, HostNs: 1000, Grid: &pb.Dim3{X: 16, Y: 1, Z: 1}, Block: &pb.Dim3{X: 64, Y: 1, Z: 1}, Params: r.ParamsLaunch2, Regions: regions,
				Memory: &pb.MemoryPlan{Status: pb.MemoryPlan_HASH}},
			{Seq: 2, KernelId: 1, CorrelationId: 102, HostNs: 2000, Grid: &pb.Dim3{X: 16, Y: 1, Z: 1}, Block: &pb.Dim3{X: 64, Y: 1, Z: 1}, Params: r.ParamsLaunch2, Regions: regions,
				CallstackId: 77, Memory: &pb.MemoryPlan{Status: pb.MemoryPlan_SNAPSHOT, SnapshotSelected: true}},
			{Seq: 3, KernelId: 1, CorrelationId: 103, HostNs: 3000, Captured: true, Grid: &pb.Dim3{X: 16, Y: 1, Z: 1}, Block: &pb.Dim3{X: 64, Y: 1, Z: 1}, Params: r.ParamsLaunch2,
				Memory: &pb.MemoryPlan{Status: pb.MemoryPlan_SKIPPED_CAPTURE}},
		},
	}
	// Each eager launch ran on the GPU (the captured one only built a graph node).
	if timed {
		b.Activities = []*pb.KernelActivity{{CorrelationId: 101, StartNs: 1500, EndNs: 1800, Name: "saxpy_gridstride"},
			{CorrelationId: 102, StartNs: 2500, EndNs: 2900, Name: "saxpy_gridstride"}}
	}
	if torn {
		b.Launches = append(b.Launches, &pb.Launch{Seq: TornLaunch, KernelId: 1, CorrelationId: 104, StreamId: TornStream, HostNs: 4000,
			Grid: &pb.Dim3{X: 1, Y: 1, Z: 1}, Block: &pb.Dim3{X: 64, Y: 1, Z: 1}, Params: r.ParamsLaunch2, Regions: regions[1:],
			Memory: &pb.MemoryPlan{Status: pb.MemoryPlan_HASH}})
		b.Activities = append(b.Activities, &pb.KernelActivity{CorrelationId: 104, StreamId: TornStream, StartNs: 2950, EndNs: 3050, Name: "saxpy_gridstride"})
		// gpurr's kernels: launch 2's state before it, alone; after it, beside launch 4's kernel.
		b.OwnActivities = []*pb.KernelActivity{{StartNs: 2300, EndNs: 2400, Name: "gpurr_memcap"}, {StartNs: 2910, EndNs: 3000, Name: "gpurr_memcap"}}
	}
	b.ProbeKernels = []*pb.ProbeKernel{{KernelId: 1, Instrumented: true}}
	b.Probes = []*pb.ProbeResult{{LaunchSeq: 2, Skipped: "probe buffers all in use"}}
	b.Memory = []*pb.MemoryState{
		{LaunchSeq: 1, Point: pb.MemoryState_AFTER, Regions: []*pb.RegionState{state(r.XBefore), state(r.YBefore)}},
		{LaunchSeq: 2, Point: pb.MemoryState_BEFORE, Snapshot: true, Regions: []*pb.RegionState{state(r.XBefore), state(r.YBefore)}},
		{LaunchSeq: 2, Point: pb.MemoryState_AFTER, Snapshot: true, Regions: []*pb.RegionState{state(r.XBefore), state(r.YAfter)}},
	}
	if err != nil {
		return r, err
	}
	b.End = &pb.End{Reason: "exit"}
	if err := store.Close(); err != nil {
		return r, err
	}
	if err := w.Write(b); err != nil {
		return r, err
	}
	return r, w.Close()
}
