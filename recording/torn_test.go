package recording_test

import (
	"reflect"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func TestTornStates(t *testing.T) {
	for _, overlap := range []bool{true, false} {
		set := testrec.OpenBatches(t, testrec.TornBatches(overlap)...)
		d, err := set.Processes[0].Load()
		if err != nil {
			t.Fatal(err)
		}
		got := d.TornStates()
		want := map[recording.StateKey][]recording.Tear{}
		if overlap {
			want[recording.StateKey{Seq: 1, Point: pb.MemoryState_AFTER}] = []recording.Tear{{Stream: testrec.TornStreamB, Launch: 2, Kernel: "write_own"}}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("overlap %v: torn %v, want %v", overlap, got, want)
		}
		// Read frame by frame, as query does, it is the same.
		tl := recording.NewTimeline()
		if _, err := set.Processes[0].Scan(func(b *pb.Batch) error { tl.Add(b); return nil }); err != nil {
			t.Fatal(err)
		}
		if got := tl.Torn(); !reflect.DeepEqual(got, want) {
			t.Errorf("overlap %v, scanned: torn %v, want %v", overlap, got, want)
		}
	}
	if s := (recording.Tear{Stream: 9, Launch: 2, Kernel: "k"}).String(); s != "stream 9's kernel k (launch 2) ran while it was taken" {
		t.Errorf("Tear.String: %q", s)
	}
	tears := []recording.Tear{{Stream: 9, Launch: 2, Kernel: "k"}, {Stream: 11, Launch: 3, Kernel: "m"}}
	if s, want := recording.JoinTears(tears), "stream 9's kernel k (launch 2) ran while it was taken; stream 11's kernel m (launch 3) ran while it was taken"; s != want {
		t.Errorf("JoinTears: %q, want %q", s, want)
	}
}

// A state whose hash kernel cannot be placed (GPU timing off: no kernel records) is not torn.
func TestTornStatesUntimed(t *testing.T) {
	batches := testrec.TornBatches(true)
	batches[1].Activities = nil
	d, err := testrec.OpenBatches(t, batches...).Processes[0].Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := d.TornStates(); len(got) != 0 {
		t.Errorf("torn %v without a timeline", got)
	}
}
