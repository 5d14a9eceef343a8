package recording_test

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

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

// nested is n ranges, each inside the one before, named "level N".
func nested(n int) *pb.Batch {
	b := &pb.Batch{}
	for i := range n {
		b.Ranges = append(b.Ranges, &pb.Range{Id: uint64(i + 1), ParentId: uint64(i), Message: fmt.Sprintf("level %d", i+1), Pushed: true})
	}
	return b
}

func TestRangePathsBounded(t *testing.T) {
	rs := recording.NewRanges()
	rs.Add(nested(recording.PathHead + recording.PathTail))
	if got := rs.PathWarning("p"); got != "" {
		t.Errorf("paths of %d levels are whole, yet: %s", recording.PathHead+recording.PathTail, got)
	}
	rs.Add(&pb.Batch{Ranges: []*pb.Range{{Id: 100, ParentId: 12, Message: "level 13"}}})
	want := "level 1 / level 2 / level 3 / level 4 / … 1 more … / level 6 / level 7 / level 8 / level 9 / level 10 / level 11 / level 12 / level 13"
	if got := rs.Path(100); got != want {
		t.Errorf("path 13 deep:\n%s\nwant\n%s", got, want)
	}
	if r := rs.Get(100); r.Depth != 12 {
		t.Errorf("depth %d, want 12", r.Depth)
	}
	if got := rs.PathWarning("p"); !strings.Contains(got, "p: NVTX ranges nest 13 deep") {
		t.Errorf("shortened: %q", got)
	}

	long := recording.NewRanges()
	long.Add(&pb.Batch{Ranges: []*pb.Range{{Id: 1, Message: strings.Repeat("é", 200)}}})
	if p := long.Path(1); len(p) > recording.PathNameBytes || !strings.HasSuffix(p, "…") || !utf8.ValidString(p) {
		t.Errorf("a long name in a path: %d bytes %q", len(p), p)
	}
	if got := long.PathWarning("p"); !strings.Contains(got, "cut") {
		t.Errorf("shortened: %q", got)
	}
}

// Ranges nested n deep cost memory in proportion to n: whole paths would cost n² bytes
// (2.5 GB for 20000 levels, 150 MB for these 5000).
func TestRangePathsMemoryLinear(t *testing.T) {
	const n = 5000
	b := nested(n)
	var pathBytes int
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rs := recording.NewRanges()
	rs.Add(b)
	runtime.ReadMemStats(&after)
	for i := range n {
		pathBytes += len(rs.Path(uint64(i + 1)))
	}
	if limit := n * 200; pathBytes > limit {
		t.Errorf("paths of %d nested ranges hold %d bytes, want at most %d", n, pathBytes, limit)
	}
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(n*2048); got > limit {
		t.Errorf("indexing %d nested ranges allocated %d bytes, want at most %d", n, got, limit)
	}
}
