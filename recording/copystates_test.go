package recording_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Copy states (format 1.17) are loaded apart from the launches' states, and an allocation
// keeps whether gpurr cleared it and where it lies among the launches.
func TestCopyStatesLoad(t *testing.T) {
	alloc := &pb.Allocation{Id: 1, Kind: pb.Allocation_MEM_ALLOC_ASYNC, Address: 0x7f0000000000, Size: 4096, Cleared: true, LaunchSeq: 3}
	state := &pb.MemoryState{LaunchSeq: 4, Point: pb.MemoryState_COPY, CorrelationId: 77,
		CopyRegions: []*pb.Region{{Address: 0x7f0000000000, Size: 4096, AllocationId: 1}},
		Regions:     []*pb.RegionState{{Hash: make([]byte, recording.HashBytes)}}}
	dir := t.TempDir()
	writeProcess(t, dir, "host-1", []*pb.Batch{
		{Process: &pb.Process{Pid: 1}, Allocations: []*pb.Allocation{alloc}},
		{CopyStates: []*pb.MemoryState{state}},
	})
	d, err := openOne(t, dir).Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(d.CopyStates) != 1 || !proto.Equal(d.CopyStates[0], state) || len(d.Memory) != 0 {
		t.Errorf("copy states %v, memory %v; want the one copy state apart", d.CopyStates, d.Memory)
	}
	if len(d.Allocations) != 1 || !d.Allocations[0].GetCleared() || d.Allocations[0].GetLaunchSeq() != 3 {
		t.Errorf("allocations %v, want the cleared one after launch 3", d.Allocations)
	}
	if got := recording.EnumText(state.GetPoint()); got != "copy" {
		t.Errorf("point %q, want copy", got)
	}
}
