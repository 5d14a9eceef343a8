package info

import (
	"reflect"
	"testing"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// A kernel counts once under each name of its range and the ranges around
// it; steps fold into one name.
func TestRangeCounter(t *testing.T) {
	info := &pb.Process{Nvtx: true}
	rc := newRangeCounter()
	rc.add(&pb.Batch{Ranges: []*pb.Range{
		{Id: 1, Message: "step 1", EndNs: 9},
		{Id: 2, ParentId: 1, Message: "forward", EndNs: 5},
		{Id: 3, ParentId: 2, Message: "forward", EndNs: 4}, // a nested range of the same name
		{Id: 4, Message: "step 2"},
		{Id: 5, ParentId: 4, Message: "backward", EndNs: 8},
	}})
	rc.count(rc.at(3), 100)
	rc.count(rc.at(2), 10)
	rc.count(rc.at(5), 1000)
	rc.count(rc.at(0), 7) // in no range
	rc.closeFrame()
	s := rc.summarize(info)
	want := []RangeUse{
		{Name: "step N", Ranges: 2, Runs: 3, GPUTimeNS: 1110},
		{Name: "backward", Ranges: 1, Runs: 1, GPUTimeNS: 1000},
		{Name: "forward", Ranges: 2, Runs: 2, GPUTimeNS: 110},
	}
	if got := s.Top; !reflect.DeepEqual(got, want) {
		t.Errorf("top %+v, want %+v", got, want)
	}
	if s.Count != 5 || s.Open != 1 || !s.Recorded {
		t.Errorf("summary %+v", s)
	}
	if rc.at(1) != nil || rc.at(4) == nil {
		t.Error("a range closed in a frame read is forgotten; one open is not")
	}
	if s := newRangeCounter().summarize(&pb.Process{}); s != nil {
		t.Error("a recording older than 1.7 has no range summary")
	}
}
