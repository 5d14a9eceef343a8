package nanscan

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/gpurr/gpurr/chunkstore"
	"github.com/gpurr/gpurr/dtype"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/memhash"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func f32s(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// TestScanInLaunchOrder: the recording holds the states of later launches
// ahead of earlier ones (the GPU finished them first, or a flight recorder
// wrote them at exit); nan still reports the first launch in launch order,
// and sees a BEFORE state written frames after its AFTER.
func TestScanInLaunchOrder(t *testing.T) {
	nan := float32(math.NaN())
	w, err := recording.Create(t.TempDir(), "p-1", &pb.Batch{Process: &pb.Process{Pid: 1,
		Memory: &pb.MemoryConfig{Mode: "snapshot", ChunkBytes: memhash.ChunkSize}}})
	if err != nil {
		t.Fatal(err)
	}
	store, err := chunkstore.Create(w.Dir(), chunkstore.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	state := func(seq uint64, point pb.MemoryState_Point, data []byte) *pb.MemoryState {
		rs, err := testrec.RegionState(data, store)
		if err != nil {
			t.Fatal(err)
		}
		return &pb.MemoryState{LaunchSeq: seq, Point: point, Snapshot: true, Regions: []*pb.RegionState{rs}}
	}
	plan := &pb.MemoryPlan{Status: pb.MemoryPlan_SNAPSHOT}
	launch := func(seq uint64) *pb.Launch {
		return &pb.Launch{Seq: seq, KernelId: seq, Memory: plan, Regions: []*pb.Region{{Address: seq << 20, Size: 8}}}
	}
	for _, b := range []*pb.Batch{
		{Kernels: []*pb.Kernel{{Id: 1, Name: "one"}, {Id: 2, Name: "two"}, {Id: 3, Name: "three"}},
			Launches: []*pb.Launch{launch(1), launch(2), launch(3)}},
		{Memory: []*pb.MemoryState{state(3, pb.MemoryState_BEFORE, f32s(0, 0)), state(3, pb.MemoryState_AFTER, f32s(nan, nan)),
			state(1, pb.MemoryState_BEFORE, f32s(0, 0)), state(1, pb.MemoryState_AFTER, f32s(1, 2)), state(2, pb.MemoryState_AFTER, f32s(3, nan))}},
		{Memory: []*pb.MemoryState{state(2, pb.MemoryState_BEFORE, f32s(0, nan))}, End: &pb.End{Reason: "exit"}},
	} {
		if err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	set, err := recording.Open(w.Dir())
	if err != nil {
		t.Fatal(err)
	}
	f32, err := dtype.Parse("f32")
	if err != nil {
		t.Fatal(err)
	}
	found, st, err := Scan(set.Processes[0], []*dtype.Type{f32})
	if err != nil {
		t.Fatal(err)
	}
	if found == nil || found.Launch.GetSeq() != 2 || found.Kernel.GetName() != "two" || len(found.Regions) != 1 {
		t.Fatalf("found %+v, want launch 2", found)
	}
	r := found.Regions[0]
	if c := r.Counts[0]; c.NaN != 1 || c.First != 4 || !r.Before || r.Region.GetAddress() != 2<<20 {
		t.Errorf("region %+v counts %+v, want 1 NaN at byte 4, there before", r, r.Counts)
	}
	if st.Launches != 2 {
		t.Errorf("%d launches scanned, want 2 (launch 3 comes after the finding)", st.Launches)
	}
}
