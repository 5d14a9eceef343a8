package recording_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func TestOrdered(t *testing.T) {
	hash := &pb.MemoryPlan{Status: pb.MemoryPlan_HASH}
	snap := &pb.MemoryPlan{Status: pb.MemoryPlan_SNAPSHOT}
	skipped := &pb.MemoryPlan{Status: pb.MemoryPlan_SKIPPED_NO_REGIONS}
	after := func(seq uint64) *pb.MemoryState { return &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER} }
	before := func(seq uint64) *pb.MemoryState { return &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_BEFORE} }
	batches := []*pb.Batch{
		{Process: &pb.Process{Pid: 1, Memory: &pb.MemoryConfig{Mode: "snapshot"}},
			Kernels:    []*pb.Kernel{{Id: 1, Name: "k"}},
			Callstacks: []*pb.Callstack{{Id: 5}},
			// Two threads: launch 2 is written ahead of launch 1.
			Launches: []*pb.Launch{{Seq: 2, KernelId: 1, Memory: hash}, {Seq: 1, KernelId: 1, CallstackId: 5, Memory: snap}}},
		// Launch 2's state lands first; launch 1's BEFORE a frame after its AFTER.
		{Memory: []*pb.MemoryState{after(2), after(1)},
			Launches: []*pb.Launch{{Seq: 3, KernelId: 1, Memory: skipped}}},
		{Memory: []*pb.MemoryState{before(1)}},
		// Launch 4's state comes before its launch record; launch 5 is not asked for.
		{Memory: []*pb.MemoryState{after(4), after(5)}},
		{Launches: []*pb.Launch{{Seq: 4, KernelId: 9, Memory: hash}, {Seq: 5, Memory: hash}},
			Memory: []*pb.MemoryState{after(2)}}, // late duplicate: dropped
		// Launch 6 was planned but its state never came (the program was killed).
		{Launches: []*pb.Launch{{Seq: 6, Memory: hash}}},
	}
	dir := t.TempDir()
	writeProcess(t, dir, "p-1", batches)
	p := openOne(t, filepath.Join(dir, "p-1"))
	var got []string
	_, err := p.Ordered([]uint64{1, 2, 3, 4, 6}, func(r *recording.LaunchRecord) error {
		got = append(got, fmt.Sprintf("%d k=%t cs=%t b=%t a=%t", r.Launch.GetSeq(), r.Kernel != nil, r.Callstack != nil, r.Before != nil, r.After != nil))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "1 k=true cs=true b=true a=true|2 k=true cs=false b=false a=true|3 k=true cs=false b=false a=false|4 k=false cs=false b=false a=true|6 k=false cs=false b=false a=false"
	if strings.Join(got, "|") != want {
		t.Errorf("Ordered delivered\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}

	n := 0
	_, err = p.Ordered([]uint64{1, 2, 3}, func(*recording.LaunchRecord) error {
		n++
		return recording.ErrStop
	})
	if err != nil || n != 1 {
		t.Errorf("ErrStop: err %v after %d calls, want nil after 1", err, n)
	}
	boom := errors.New("boom")
	if _, err := p.Ordered([]uint64{2}, func(*recording.LaunchRecord) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("fn's error: got %v", err)
	}
}
