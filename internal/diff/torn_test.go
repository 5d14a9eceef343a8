package diff

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// A state taken while another stream's kernel that reaches the same memory ran is torn: two
// runs whose torn states differ do not part ways there (the launch is compared with none, and
// listed), while the same difference in a state nothing overlapped is a divergence. The torn
// states are read only once launches differ (AlignTorn).
func TestTornStatesNotCompared(t *testing.T) {
	scan := func(overlap bool, fill byte) *Run {
		bs := testrec.TornBatches(overlap)
		rs, _ := testrec.RegionState(bytes.Repeat([]byte{fill}, 1<<20), nil)
		bs[1].Memory[0].Regions = []*pb.RegionState{rs} // launch 1's state after it
		r, err := Scan(testrec.OpenBatches(t, bs...).Processes[0])
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := scan(true, 1), scan(true, 9)
	if res := Align(a, b); res.First == nil || len(a.Torn) != 0 {
		t.Fatalf("before MarkTorn: first %v, torn %v; want launch 1 differing, nothing marked", res.First, a.Torn)
	}
	res, err := AlignTorn(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if res.First != nil || res.Torn != 1 || res.Compared != 2 {
		t.Errorf("torn: first %v, torn %d, compared %d; want none, 1, 2", res.First, res.Torn, res.Compared)
	}
	if len(a.Torn) != 1 || a.Torn[0].Seq != 1 || !strings.Contains(strings.Join(a.Torn[0].Tears, ";"), "(launch 2) ran while it was taken") {
		t.Errorf("torn launches %+v, want launch 1 torn by launch 2", a.Torn)
	}
	a, b = scan(false, 1), scan(false, 9)
	if res, err = AlignTorn(a, b); err != nil {
		t.Fatal(err)
	}
	if res.First == nil || a.Launches[res.First.A].Seq != 1 || res.Torn != 0 || len(a.Torn) != 0 {
		t.Errorf("not torn: first %v, torn %d %v; want launch 1 differing", res.First, res.Torn, a.Torn)
	}
}

// The report names each torn launch, the other stream's kernel that tore it, and counts the
// rest past MaxListed.
func TestTornStatesReported(t *testing.T) {
	p := &PairReport{A: "a", B: "b", Outcome: "agree", Memory: true, Matched: 3, Compared: 2, NotCompared: 1,
		TornA:    []TornLaunch{{Seq: 1, Tears: []string{"stream 8's kernel write_own (launch 2) ran while it was taken"}}},
		TornMore: 2}
	var out strings.Builder
	if err := p.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"torn     launch 1 of A, not compared: stream 8's kernel write_own (launch 2) ran while it was taken",
		"... and 2 more torn launches"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
