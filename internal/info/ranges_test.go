package info

import (
	"reflect"
	"testing"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// A kernel counts once under each name of its range and the ranges around
// it; steps fold into one name.
func TestRangeCounter(t *testing.T) {
	d := &recording.Data{Process: &pb.Process{Nvtx: true}, Ranges: []*pb.Range{
		{Id: 1, Message: "step 1", EndNs: 9},
		{Id: 2, ParentId: 1, Message: "forward", EndNs: 5},
		{Id: 3, ParentId: 2, Message: "forward", EndNs: 4}, // a nested range of the same name
		{Id: 4, Message: "step 2"},
		{Id: 5, ParentId: 4, Message: "backward", EndNs: 8},
	}}
	rc, s := newRangeCounter(d)
	rc.add(3, 100)
	rc.add(2, 10)
	rc.add(5, 1000)
	rc.add(0, 7) // in no range
	want := []RangeUse{
		{Name: "step N", Ranges: 2, Runs: 3, GPUTimeNS: 1110},
		{Name: "backward", Ranges: 1, Runs: 1, GPUTimeNS: 1000},
		{Name: "forward", Ranges: 2, Runs: 2, GPUTimeNS: 110},
	}
	if got := rc.top(); !reflect.DeepEqual(got, want) {
		t.Errorf("top %+v, want %+v", got, want)
	}
	if s.Count != 5 || s.Open != 1 || !s.Recorded {
		t.Errorf("summary %+v", s)
	}
	if rc, s := newRangeCounter(&recording.Data{Process: &pb.Process{}}); rc != nil || s != nil {
		t.Error("a recording older than 1.7 has no range summary")
	}
}
