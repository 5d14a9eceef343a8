package testrec

import (
	"fmt"

	"github.com/gpurr/gpurr/memhash"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// WriteBig writes a hash-mode recording of one process with n launches
// into dir, for benchmarks of readers over large recordings: frames of 4096
// launches (as the agent writes them), 2 regions each, 3 streams, 50
// kernels. The launch numbered differAt (1-based; 0 for none) gets other
// region hashes than in any other recording WriteBig makes. It returns the
// process.
func WriteBig(dir string, n, differAt int) (*recording.Process, error) {
	w, err := recording.Create(dir, "box-1", &pb.Batch{Process: &pb.Process{Hostname: "box", Pid: 1,
		Memory: &pb.MemoryConfig{Mode: "hash", ChunkBytes: memhash.ChunkSize}}})
	if err != nil {
		return nil, err
	}
	batch := &pb.Batch{}
	for k := uint64(1); k <= 50; k++ {
		batch.Kernels = append(batch.Kernels, &pb.Kernel{Id: k, Identity: 7000 + k, Name: fmt.Sprintf("kernel_%d", k)})
	}
	h := func(seq, r uint64) []byte {
		s := memhash.Sum{uint32(seq), uint32(r), 1, 2}.Bytes()
		return s[:]
	}
	for i := 1; i <= n; i++ {
		seq := uint64(i)
		batch.Launches = append(batch.Launches, &pb.Launch{Seq: seq, KernelId: seq%50 + 1, Stream: seq % 3, CallstackId: seq % 97,
			Params:  make([]byte, 64),
			Regions: []*pb.Region{{Address: 1 << 40, Size: 1 << 16, ParamOffsets: []uint32{0}}, {Address: 2 << 40, Size: 4096, ParamOffsets: []uint32{8}}},
			Memory:  &pb.MemoryPlan{Status: pb.MemoryPlan_HASH}})
		st := &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER}
		for r := uint64(0); r < 2; r++ {
			hh := h(seq, r)
			if i == differAt {
				hh = h(seq, r+10)
			}
			st.Regions = append(st.Regions, &pb.RegionState{Hash: hh, ChunkHashes: hh})
		}
		batch.Memory = append(batch.Memory, st)
		if len(batch.Launches) == 4096 || i == n {
			if i == n {
				batch.End = &pb.End{Reason: "exit"}
			}
			if err := w.Write(batch); err != nil {
				return nil, err
			}
			batch = &pb.Batch{}
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	set, err := recording.Open(dir)
	if err != nil {
		return nil, err
	}
	return set.Processes[0], nil
}
