package recording_test

import (
	"slices"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// A probe buffer decodes to the CTAs that left a record, in grid order; an untouched record
// (entry all ones) and one whose exit precedes its entry count as missing.
func TestProbeCTAs(t *testing.T) {
	buf := testrec.ProbeBuffer(6,
		recording.ProbeCTA{Index: 0, Start: 100, End: 250, SM: 3, Count: 9},
		recording.ProbeCTA{Index: 4, Start: 120, End: 130, SM: 1},
		recording.ProbeCTA{Index: 5, Start: 300, End: 200, SM: 1})
	ctas, missing := recording.ProbeCTAs(append(buf, 1, 2, 3)) // a partial record at the end is ignored
	if missing != 4 || len(ctas) != 2 {
		t.Fatalf("%d CTAs, %d missing: %+v", len(ctas), missing, ctas)
	}
	if c := ctas[0]; c.Index != 0 || c.SM != 3 || c.Count != 9 || c.Duration() != 150*time.Nanosecond {
		t.Errorf("CTA 0: %+v", c)
	}
	if x, y, z := ctas[1].XYZ(2, 2); x != 0 || y != 0 || z != 1 {
		t.Errorf("CTA 4 of a 2x2x2 grid at (%d,%d,%d), want (0,0,1)", x, y, z)
	}
}

// A process recorded with --probe: its results and kernels as written, the launch with data and
// the skipped one found by sequence number; the other rank has none.
func TestProbeRecords(t *testing.T) {
	set := testrec.Open(t, testrec.Probe)
	d, err := set.Processes[0].Load()
	if err != nil {
		t.Fatal(err)
	}
	if d.Process.GetProbe() != testrec.ProbeRecorded || len(d.ProbeResults) != 2 || len(d.ProbeKernels) != 2 {
		t.Fatalf("probe %q, %d results, %d kernels", d.Process.GetProbe(), len(d.ProbeResults), len(d.ProbeKernels))
	}
	if got := d.ProbedLaunches(); !slices.Equal(got, []uint64{testrec.ProbedLaunch}) {
		t.Errorf("probed launches %v", got)
	}
	if r := d.ProbeResult(testrec.SkippedLaunch); r.GetSkipped() == "" || len(r.GetCtas()) != 0 {
		t.Errorf("skipped launch: %v", r)
	}
	r := d.ProbeResult(testrec.ProbedLaunch)
	ctas, missing := recording.ProbeCTAs(r.GetCtas())
	if len(ctas) != 255 || missing != 1 || d.ProbeResult(1) != nil {
		t.Errorf("%d CTAs, %d missing; launch 1: %v", len(ctas), missing, d.ProbeResult(1))
	}
	other, err := set.Processes[1].Load()
	if err != nil {
		t.Fatal(err)
	}
	if other.Process.GetProbe() != "" || other.ProbeResults != nil || other.ProbeKernels != nil || other.ProbedLaunches() != nil {
		t.Errorf("rank 1 recorded without --probe has probe records")
	}
}

// Any bytes decode: every whole record is a CTA or missing, and a CTA never ends before it
// starts.
func FuzzProbeCTAs(f *testing.F) {
	f.Add(testrec.ProbeBuffer(3, recording.ProbeCTA{Index: 1, Start: 5, End: 9, SM: 2, Count: 1}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		ctas, missing := recording.ProbeCTAs(b)
		if len(ctas)+missing != len(b)/recording.ProbeRecordBytes {
			t.Fatalf("%d CTAs and %d missing of %d records", len(ctas), missing, len(b)/recording.ProbeRecordBytes)
		}
		for i, c := range ctas {
			if c.End < c.Start || i > 0 && c.Index <= ctas[i-1].Index {
				t.Fatalf("CTA %+v after %d", c, i)
			}
		}
	})
}
