package agent

import (
	"bytes"
	"testing"

	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// A copy's state (format 1.17) goes to copy_states, not to the launches' states: named by the
// call's correlation id, after launch call seq, with the allocations it hashed. Two copies
// after the same launch call are two states; neither is a launch's last state of its
// allocation, which write sets carry from.
func TestCopyStatesApart(t *testing.T) {
	r := testRecorder(t)
	r.mem.last = map[uint64]allocState{}
	const addr, size = 0x7f0000000000, 2 * memhash.ChunkSize
	h := [16]byte{1}
	for _, call := range []uint32{41, 42} {
		v, _ := cannedJob(0, uint64(call), 0, false, []cannedJobRegion{{addr: addr, size: size, allocID: 3, chunkHashes: [][16]byte{h, h}}}, nil)
		cannedCopyJob(v, 5, call)
		jobToWriter(r, v)
	}
	if len(r.batch.Memory) != 0 || len(r.batch.CopyStates) != 2 {
		t.Fatalf("%d launch states, %d copy states; want 0, 2", len(r.batch.Memory), len(r.batch.CopyStates))
	}
	for i, s := range r.batch.CopyStates {
		if s.GetPoint() != pb.MemoryState_COPY || s.GetLaunchSeq() != 5 || s.GetCorrelationId() != uint32(41+i) || s.GetLost() {
			t.Errorf("copy state %d: %v", i, s)
		}
		want := &pb.Region{Address: addr, Size: size, AllocationId: 3}
		if len(s.GetCopyRegions()) != 1 || len(s.GetRegions()) != 1 {
			t.Fatalf("copy state %d: regions %v, states %v; want one", i, s.GetCopyRegions(), s.GetRegions())
		}
		equal(t, "copy region", s.GetCopyRegions()[0], want)
		if !bytes.Equal(s.GetRegions()[0].GetChunkHashes(), append(h[:], h[:]...)) {
			t.Errorf("copy state %d: chunk hashes %x", i, s.GetRegions()[0].GetChunkHashes())
		}
	}
	if len(r.mem.last) != 0 {
		t.Errorf("write sets took a copy's state for a launch's: %v", r.mem.last)
	}
	var st pb.Stats
	r.mem.fill(&st)
	if st.CopyStates != 2 || st.CopyStatesLost != 0 || st.MemoryStates != 0 {
		t.Errorf("stats: %d copy states, %d lost, %d memory states; want 2, 0, 0", st.CopyStates, st.CopyStatesLost, st.MemoryStates)
	}
}

// A copy state the agent could not take, or whose kernel could not be launched, is a lost
// copy state that still names what the copy wrote: readers take that allocation's state for
// unknown after it.
func TestCopyStatesLostNameTheirRegions(t *testing.T) {
	r := testRecorder(t)
	wrote := []*pb.Region{{Address: 0x7f0000000000, Size: 4096, AllocationId: 7}, {Address: 0x7f0000200000, Size: 8192, AllocationId: 8}}
	r.record(cannedCopyLost(9, 51, wrote, "it wrote memory of another device than its context's"))
	v, _ := cannedJob(0, 1, 0, false, []cannedJobRegion{{addr: 0x7f0000400000, size: 4096, allocID: 9}}, nil)
	cannedCopyJob(v, 9, 52)
	cannedJobLost(v)
	jobToWriter(r, v)
	if len(r.batch.CopyStates) != 2 || len(r.batch.Memory) != 0 {
		t.Fatalf("%d copy states, %d launch states; want 2, 0", len(r.batch.CopyStates), len(r.batch.Memory))
	}
	equal(t, "lost copy state", r.batch.CopyStates[0], &pb.MemoryState{LaunchSeq: 9, Point: pb.MemoryState_COPY, Lost: true,
		LostReason: "it wrote memory of another device than its context's", CorrelationId: 51, CopyRegions: wrote})
	second := r.batch.CopyStates[1]
	if !second.GetLost() || second.GetCorrelationId() != 52 || len(second.GetCopyRegions()) != 1 || second.GetCopyRegions()[0].GetAllocationId() != 9 {
		t.Errorf("copy state whose kernel failed: %v", second)
	}
	var st pb.Stats
	r.mem.fill(&st)
	if st.CopyStatesLost != 2 || st.MemoryStatesLost != 0 {
		t.Errorf("stats: %d copy states lost, %d memory states lost; want 2, 0", st.CopyStatesLost, st.MemoryStatesLost)
	}
}
