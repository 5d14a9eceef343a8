package bisect

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpurr/gpurr/internal/info"
)

// WriteText writes what bisect found, then the report of its last runs (a report with a
// WriteText method of its own), then the runs it made.
func (r *Result) WriteText(w io.Writer) error {
	t := info.NewTextWriter(w)
	if f := r.Digests; f != nil {
		r.writeDigests(t, f)
	}
	for _, n := range r.Notes {
		t.Printf("  note     %s\n", n)
	}
	if r.Report != nil && r.Outcome != "agree" && t.Err() == nil {
		if win := r.Window; win != nil {
			t.Printf("reruns hashing every launch of %s:\n", stepsWords(win[0], win[1]))
		}
		if rt, ok := r.Report.(interface{ WriteText(io.Writer) error }); ok {
			if err := rt.WriteText(w); err != nil {
				return err
			}
		}
	}
	made := 0
	for _, run := range r.Runs {
		if !run.Given {
			made++
		}
	}
	if made == 0 {
		t.Printf("bisect: no run made: the recordings given settle it\n")
		return t.Err()
	}
	t.Printf("bisect: %s in %.1f s:\n", info.Count(made, "run"), r.Wall())
	for _, run := range r.Runs {
		if !run.Given {
			t.Printf("  %-10s %6.1f s, exit %d: %s (%s)\n", run.Name, run.Seconds, run.Exit, run.Purpose, run.Dir)
		}
	}
	return t.Err()
}

func (r *Result) writeDigests(t *info.TextWriter, f *DigestFinding) {
	for _, w := range f.Warnings {
		t.Printf("  warning  %s\n", w)
	}
	if r.Outcome == "nan" || r.Outcome == "finite" || (len(f.Pairs) > 0 && f.Pairs[0].Compare == nil) {
		if f.Step == nil {
			t.Printf("step digests: no NaN or Inf at any digest (%s)\n", info.Count(f.Steps, "step"))
			return
		}
		for _, p := range f.Pairs {
			if p.NaN != nil && p.NaN.Step == *f.Step {
				t.Printf("step digests: NaN or Inf first in the digest of step %d (%s): %s\n", p.NaN.Step, pairName(p), nanWords(p))
			}
		}
		return
	}
	if f.Step == nil {
		t.Printf("step digests: the runs agree at every digest (%s compared)\n", info.Count(f.Steps, "step"))
		for _, p := range f.Pairs {
			if c := p.Compare; c != nil && c.OnlyA+c.OnlyB > 0 {
				t.Printf("  %s: %d steps digested in A only, %d in B only, not compared (the runs went through other numbers of steps, or a digest was lost)\n",
					pairName(p), c.OnlyA, c.OnlyB)
			}
		}
		return
	}
	agreed := "no step before it agrees"
	switch {
	case f.Agreed == 0:
		agreed = "step 0 agrees"
	case f.Agreed > 0:
		agreed = fmt.Sprintf("steps 0-%d agree", f.Agreed)
	}
	t.Printf("step digests: the runs part ways in step %d (%s): %s\n", *f.Step, agreed, strings.Join(f.DivergentRanks(*f.Step), ", "))
	for _, p := range f.Pairs {
		c := p.Compare
		if c == nil || c.First == nil || c.First.Step != *f.Step {
			continue
		}
		t.Printf("  %s: %d of %d allocations differ at the end of step %d\n", pairName(p), len(c.First.Allocs), c.First.Matched, c.First.Step)
		c.First.WriteAllocs(t, "    ")
	}
}

func nanWords(p PairDigest) string {
	var allocs int
	var nan, inf uint64
	for _, a := range p.NaN.Allocs {
		if a.NaN+a.Inf > 0 {
			allocs++
			nan += a.NaN
			inf += a.Inf
		}
	}
	return fmt.Sprintf("%s hold %d NaN and %d Inf", info.Count(allocs, "allocation"), nan, inf)
}
