package recording_test

import (
	"slices"
	"testing"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func TestRangesPathsAndEnds(t *testing.T) {
	rs := recording.NewRanges()
	rs.Add(&pb.Batch{Ranges: []*pb.Range{
		{Id: 1, Message: "step 5", StartNs: 10, Pushed: true},
		{Id: 2, ParentId: 1, Message: "forward", StartNs: 11, EndNs: 20, Pushed: true},
		{Id: 3, ParentId: 1, StartNs: 21, Pushed: true},
		{Id: 4, ParentId: 9, Message: "orphan", StartNs: 22, Pushed: true}, // its parent's record was lost
	}})
	for id, want := range map[uint64]string{1: "step 5", 2: "step 5 / forward", 3: "step 5 / range 3", 4: "orphan", 5: ""} {
		if got := rs.Path(id); got != want {
			t.Errorf("path of %d: %q, want %q", id, got, want)
		}
	}
	if r := rs.Get(2); r == nil || r.Depth != 1 {
		t.Errorf("range 2: %+v", r)
	}
	if got := ids(rs.TakeClosed()); !slices.Equal(got, []uint64{2}) {
		t.Errorf("closed in the frame: %v", got)
	}
	if rs.Get(2) != nil {
		t.Error("a taken range is forgotten")
	}
	rs.Add(&pb.Batch{RangeEnds: []*pb.RangeEnd{{Id: 3, EndNs: 30}, {Id: 1, EndNs: 31}, {Id: 77, EndNs: 32}}})
	closed := rs.TakeClosed()
	if got := ids(closed); !slices.Equal(got, []uint64{3, 1}) || closed[1].GetEndNs() != 31 {
		t.Errorf("closed by later ends: %v", got)
	}
	if got := ids(rs.Open()); !slices.Equal(got, []uint64{4}) {
		t.Errorf("open: %v", got)
	}
}

func TestAllRanges(t *testing.T) {
	d := &recording.Data{
		Ranges:    []*pb.Range{{Id: 1, Message: "a"}, {Id: 2, ParentId: 1, Message: "b", EndNs: 5}, {Id: 3, Message: "c"}},
		RangeEnds: []*pb.RangeEnd{{Id: 1, EndNs: 9}},
	}
	all := d.AllRanges()
	if got := ids(all); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("ranges %v", got)
	}
	if all[0].GetEndNs() != 9 || all[1].Path != "a / b" || all[2].GetEndNs() != 0 {
		t.Errorf("ranges %+v", all)
	}
}

func ids(rs []*recording.Range) []uint64 {
	var out []uint64
	for _, r := range rs {
		out = append(out, r.GetId())
	}
	return out
}
