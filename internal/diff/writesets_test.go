package diff

import (
	"slices"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func scanVariant(t *testing.T, v testrec.Variant) *Run {
	t.Helper()
	r, err := Scan(testrec.Open(t, v).Processes[0])
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Runs recorded with write sets (format 1.11): a carried state compares as any other; a launch
// whose state holds a region carried from a lost state is compared with none, even where the
// regions known differ; the runs part ways where they do.
func TestWriteSetsAlign(t *testing.T) {
	a, b := scanVariant(t, testrec.WriteSets), scanVariant(t, testrec.WriteSetsDiverged)
	if a.WriteSets != "learned" || a.AuditEvery != 3 || len(a.Misses) != 1 || a.Misses[0].GetAuditSeq() != testrec.WriteSetsMissAudit {
		t.Fatalf("write sets %q, audit every %d, misses %v", a.WriteSets, a.AuditEvery, a.Misses)
	}
	for _, l := range a.Launches {
		if l.Unknown != (l.Seq == testrec.WriteSetsUnknown) || l.HasState == (l.Seq == testrec.WriteSetsLost) {
			t.Errorf("launch %d: state %v, unknown %v", l.Seq, l.HasState, l.Unknown)
		}
	}
	same := Align(a, scanVariant(t, testrec.WriteSets))
	if same.First != nil || same.Matched != 9 || same.Compared != 7 || same.Unknown != 1 || same.Differ != 0 {
		t.Errorf("a run with itself: %+v", same)
	}
	// Every launch from 6 differs in A's region; launch 9's too, but its W is unknown.
	res := Align(a, b)
	if res.First == nil || a.Launches[res.First.A].Seq != 6 || res.Compared != 7 || res.Unknown != 1 || res.Differ != 2 {
		t.Errorf("diverged: %+v", res)
	}
}

// One side unknown is enough to leave a launch uncompared; a state without one compares.
func TestUnknownOnOneSide(t *testing.T) {
	a, b := run([]uint64{1, 2, 3}, []byte{1, 2, 3}, nil), run([]uint64{1, 2, 3}, []byte{1, 9, 9}, nil)
	b.Launches[1].Unknown = true
	res := Align(a, b)
	if res.First == nil || *res.First != (Pair{2, 2}) || res.Compared != 2 || res.Unknown != 1 || res.Differ != 1 {
		t.Errorf("%+v", res)
	}
}

// Which misses leave room for an earlier divergence: those whose unseen write may have come
// before the launch reported, earliest first; all of them when the runs agree.
func TestUncertain(t *testing.T) {
	r := &Run{Misses: []*pb.WriteSetMiss{{AuditSeq: 90, SinceSeq: 70}, {AuditSeq: 40, SinceSeq: 8}, {AuditSeq: 12, SinceSeq: 11}}}
	since := func(ms []*pb.WriteSetMiss) []uint64 {
		var out []uint64
		for _, m := range ms {
			out = append(out, m.GetSinceSeq())
		}
		return out
	}
	for first, want := range map[uint64][]uint64{0: {8, 11, 70}, 12: {8}, 13: {8, 11}, 9: nil, 71: {8, 11}, 200: {8, 11, 70}} {
		if got := since(r.Uncertain(first)); !slices.Equal(got, want) {
			t.Errorf("Uncertain(%d): since %v, want %v", first, got, want)
		}
	}
}

// The regions of a launch whose state is unknown on a side are listed as such, not as
// differing, not as equal; the others are compared as always.
func TestDifferencesUnknown(t *testing.T) {
	procA := testrec.Open(t, testrec.WriteSets).Processes[0]
	procB := testrec.Open(t, testrec.WriteSetsDiverged).Processes[0]
	sa, err := ReadLaunch(procA, testrec.WriteSetsUnknown)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := ReadLaunch(procB, testrec.WriteSetsUnknown)
	if err != nil {
		t.Fatal(err)
	}
	regions, err := Differences(sa, sb, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(regions) != 2 {
		t.Fatalf("%d regions listed, want 2: %+v", len(regions), regions)
	}
	if r := regions[0]; r.Index != 0 || !r.UnknownA || !r.UnknownB || r.FirstChunk != -1 || r.DifferentChunks != 0 {
		t.Errorf("the unknown region: %+v", r)
	}
	if r := regions[1]; r.Index != 1 || r.UnknownA || r.UnknownB || r.FirstChunk != 0 || r.DifferentChunks != 1 {
		t.Errorf("the region that differs: %+v", r)
	}
	same, err := Differences(sa, sa, nil, 0)
	if err != nil || len(same) != 1 || !same[0].UnknownA {
		t.Errorf("the launch with itself: %+v, %v", same, err)
	}
}

// A carried state holds its source's region hash only: where it differs, Differences says
// where its chunk hashes are instead of comparing none as all different.
func TestDifferencesOfCarriedRegions(t *testing.T) {
	hashed := &pb.RegionState{Hash: make([]byte, 16), ChunkHashes: make([]byte, 32)}
	carried := &pb.RegionState{Hash: []byte("0123456789abcdef"), Carried: pb.RegionState_LEARNED_READ_ONLY, CarriedFrom: 4}
	side := func(rs *pb.RegionState) *Side {
		return &Side{Launch: &pb.Launch{Regions: []*pb.Region{{Size: 1 << 17}}}, After: &pb.MemoryState{Regions: []*pb.RegionState{rs}}, ChunkBytes: 1 << 16}
	}
	d, err := Differences(side(hashed), side(carried), nil, 0)
	if err != nil || len(d) != 1 {
		t.Fatalf("differences %v, %v", d, err)
	}
	if d[0].FirstChunk != -1 || d[0].DifferentChunks != 0 || d[0].Note != "not hashed after this launch (in B carried from launch 4, whose state holds its chunk hashes): compare there for the chunks that differ" {
		t.Errorf("carried region: %+v", d[0])
	}
	if d, _ := Differences(side(hashed), side(hashed), nil, 0); len(d) != 0 {
		t.Errorf("equal regions differ: %+v", d)
	}
}
