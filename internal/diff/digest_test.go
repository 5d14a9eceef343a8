package diff_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// trainedRun writes a testrec.Trained run and scans rank 0's digests (or those of rank).
func trainedRun(t *testing.T, o testrec.Trained, rank int) *diff.DigestRun {
	t.Helper()
	r, err := diff.ScanDigests(testrec.OpenTrained(t, o))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCompareDigests: two runs agree at every digest until the step in which one launch wrote
// other bytes; that step's digest names the allocation it wrote (its size and the line that
// allocated it), and every allocation a difference spread to; the NCCL allocation is in no digest.
func TestCompareDigests(t *testing.T) {
	base := testrec.DefaultTrained()
	a := trainedRun(t, base, 0)
	if len(a.Digests) != 5 {
		t.Fatalf("%d digests, want 5 (6 steps: the last ends the run, with no launch after it)", len(a.Digests))
	}
	for _, d := range a.Digests {
		if len(d.Allocs) != 3 {
			t.Fatalf("digest of step %d holds %d allocations, want the program's 3 (not NCCL's)", d.Step, len(d.Allocs))
		}
	}
	same := diff.CompareDigests(a, trainedRun(t, base, 0))
	if same.First != nil || same.Compared != 5 || same.Agreed != 4 {
		t.Fatalf("a run with a copy of itself: %+v, want 5 compared, all agreeing", same)
	}
	div := base
	div.DivergeStep, div.DivergeLaunch = 2, 1 // launch 1 of step 2 writes allocation (2*4+1+1)%3 = 1
	b := trainedRun(t, div, 0)
	c := diff.CompareDigests(a, b)
	if c.First == nil || c.First.Step != 2 || c.Agreed != 1 {
		t.Fatalf("diverged at step 2: %+v, want first step 2, steps 0-1 agreeing", c)
	}
	if len(c.First.Allocs) == 0 || c.First.Matched != 3 || c.First.Unmatched != 0 {
		t.Fatalf("step 2: %+v", c.First)
	}
	found := false
	for _, d := range c.First.Allocs {
		if d.A.ID == 2 && strings.Contains(d.Line, fmt.Sprintf("train.py:%d", testrec.TrainedAllocLine(1))) {
			found = true
		}
	}
	if !found {
		t.Fatalf("step 2's differing allocations %+v do not name allocation 2 at line %d", c.First.Allocs, testrec.TrainedAllocLine(1))
	}
	if err := diff.FirstChunks(a.Process, b.Process, c.First); err != nil {
		t.Fatal(err)
	}
	if c.First.Allocs[0].Chunk != 0 {
		t.Fatalf("first differing chunk %d, want 0", c.First.Allocs[0].Chunk)
	}
}

// TestFirstNonFinite: the first digest that counts a NaN is that of the step whose launch made it.
func TestFirstNonFinite(t *testing.T) {
	o := testrec.DefaultTrained()
	o.NaNStep, o.NaNLaunch = 3, 2
	d := trainedRun(t, o, 0).FirstNonFinite()
	if d == nil || d.Step != 3 {
		t.Fatalf("first non-finite digest %+v, want step 3's", d)
	}
	if trainedRun(t, testrec.DefaultTrained(), 0).FirstNonFinite() != nil {
		t.Fatal("a run without NaN has a non-finite digest")
	}
}

// TestLibraryLeftOut: two runs whose only difference is in memory NCCL allocated for itself
// agree, with those regions counted as left out; compared too (IncludeLibrary), they differ.
func TestLibraryLeftOut(t *testing.T) {
	runs := make([]*recording.Process, 2)
	for i := range runs {
		o := testrec.DefaultTrained()
		o.Hash, o.HashSteps, o.NCCL = true, [2]int{0, 5}, uint64(i+1)
		runs[i] = testrec.OpenTrained(t, o)
	}
	for _, include := range []bool{false, true} {
		a, err := diff.ScanWith(runs[0], diff.ScanOptions{IncludeLibrary: include})
		if err != nil {
			t.Fatal(err)
		}
		b, err := diff.ScanWith(runs[1], diff.ScanOptions{IncludeLibrary: include})
		if err != nil {
			t.Fatal(err)
		}
		res := diff.Align(a, b)
		switch {
		case !include && (res.First != nil || a.Library[recording.OwnerNCCL] != 6 || res.Compared != 24):
			t.Fatalf("library left out: first %v, %d compared, left out %v: want agree, 24 compared, 6 NCCL regions left out", res.First, res.Compared, a.Library)
		case include && (res.First == nil || a.Launches[res.First.A].Seq != 1 || len(a.Library) != 0):
			t.Fatalf("library compared: first %v, left out %v: want launch 1 to differ", res.First, a.Library)
		}
	}
}
