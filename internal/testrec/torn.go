package testrec

import (
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Torn streams and launches of TornBatches.
const (
	TornStreamA = 7 // launch 1 (writes allocation 1), hashed after it by gpurr's kernel on this stream
	TornStreamB = 9 // launch 2 (writes allocation 1 too)
	TornStreamC = 11
)

// TornBatches is one process, "solo", recorded with --memory hash and GPU timing, whose
// launches ran on three streams. Launch 1 (stream A) and launch 2 (stream B) both reach
// allocation 1; launch 3 (stream C) reaches allocation 2 only. gpurr's kernel that hashed
// launch 1's AFTER state ran on stream A right after it. With overlap, launch 2's kernel ran
// while that hash kernel did (the state is torn), and launch 3's too (not torn by it: another
// allocation); without, launch 2's kernel ran after it (the control). Launches 2 and 3 are
// hashed after they ran, alone.
func TornBatches(overlap bool) []*pb.Batch {
	proc := &pb.Process{Hostname: "box", Pid: 5, Argv: []string{"./streams"}, GpuTiming: true,
		Memory: &pb.MemoryConfig{Mode: recording.MemoryHash, ChunkBytes: memhash.ChunkSize}}
	const a1, a2, size = 0x7f00_0000_0000, 0x7f00_0100_0000, 1 << 20
	launch := func(seq uint64, stream uint32, alloc, addr uint64) *pb.Launch {
		return &pb.Launch{Seq: seq, KernelId: 1, CorrelationId: uint32(100 + seq), StreamId: stream, HostNs: 1000 * seq,
			Grid: &pb.Dim3{X: 1, Y: 1, Z: 1}, Block: &pb.Dim3{X: 32, Y: 1, Z: 1}, Memory: &pb.MemoryPlan{Status: pb.MemoryPlan_HASH},
			Regions: []*pb.Region{{Address: addr, Size: size, ParamOffsets: []uint32{0}, AllocationId: alloc}}}
	}
	run := func(seq uint64, stream uint32, start, end uint64) *pb.KernelActivity {
		return &pb.KernelActivity{CorrelationId: uint32(100 + seq), StreamId: stream, StartNs: start, EndNs: end, Name: "write_own"}
	}
	hashRun := func(stream uint32, start, end uint64) *pb.KernelActivity {
		return &pb.KernelActivity{StreamId: stream, StartNs: start, EndNs: end, Name: "gpurr_memcap"}
	}
	hashed := func(seq uint64, fill byte) *pb.MemoryState {
		data := make([]byte, size)
		for i := range data {
			data[i] = fill
		}
		rs, _ := RegionState(data, nil) // without a store it cannot fail
		return &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER, Regions: []*pb.RegionState{rs}}
	}
	b2start := uint64(20_100)
	if !overlap {
		b2start = 30_000
	}
	b := &pb.Batch{
		Kernels:     []*pb.Kernel{{Id: 1, Identity: 21, Name: "write_own", ParamBytes: 8, Params: []*pb.ParamInfo{{Offset: 0, Size: 8}}}},
		Allocations: []*pb.Allocation{{Id: 1, Address: a1, Size: size}, {Id: 2, Address: a2, Size: size}},
		Launches:    []*pb.Launch{launch(1, TornStreamA, 1, a1), launch(2, TornStreamB, 1, a1), launch(3, TornStreamC, 2, a2)},
		Activities: []*pb.KernelActivity{run(1, TornStreamA, 10_000, 20_000), run(2, TornStreamB, b2start, b2start+300),
			run(3, TornStreamC, 20_050, 20_450)},
		OwnActivities: []*pb.KernelActivity{hashRun(TornStreamA, 20_010, 20_500), hashRun(TornStreamB, b2start+310, b2start+400),
			hashRun(TornStreamC, 20_460, 20_480)},
		Memory: []*pb.MemoryState{hashed(1, 1), hashed(2, 2), hashed(3, 3)},
		End:    &pb.End{Reason: "exit"},
	}
	return []*pb.Batch{{Process: proc, Devices: []*pb.Device{{Ordinal: 0, Name: "NVIDIA H200", CcMajor: 9}}}, b}
}
