package bisect

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpurr/gpurr/internal/info"
)

// shownAllocs is how many allocations of a step that differs the text names.
const shownAllocs = 8

// WriteText writes what bisect found, then the report of its last runs (a report with a
// WriteText method of its own), then what it cost.
func (r *Result) WriteText(w io.Writer) error {
	t := &writer{w: w}
	if f := r.Digests; f != nil {
		r.writeDigests(t, f)
	}
	for _, n := range r.Notes {
		t.printf("  note     %s\n", n)
	}
	if r.Report != nil && r.Outcome != "agree" {
		if win := r.Window; win != nil {
			t.printf("reruns hashing every launch of %s:\n", stepsWords(win[0], win[1]))
		}
		if rt, ok := r.Report.(interface{ WriteText(io.Writer) error }); ok && t.err == nil {
			t.err = rt.WriteText(w)
		}
	}
	made := 0
	for _, run := range r.Runs {
		if !run.Given {
			made++
		}
	}
	t.printf("bisect: %s in %.1f s: %s\n", info.Count(made, "run"), r.Wall(), r.Made())
	return t.err
}

func (r *Result) writeDigests(t *writer, f *DigestFinding) {
	for _, w := range f.Warnings {
		t.printf("  warning  %s\n", w)
	}
	if r.Outcome == "nan" || r.Outcome == "finite" || (len(f.Pairs) > 0 && f.Pairs[0].Compare == nil) {
		if f.Step == nil {
			t.printf("step digests: no NaN or Inf at any digest (%s)\n", info.Count(f.Steps, "step"))
			return
		}
		for _, p := range f.Pairs {
			if p.NaN == nil || p.NaN.Step != *f.Step {
				continue
			}
			t.printf("step digests: NaN or Inf first in the digest of step %d (%s): %s\n", p.NaN.Step, pairName(p), nanWords(p))
		}
		return
	}
	if f.Step == nil {
		t.printf("step digests: the runs agree at every digest (%s compared)\n", info.Count(f.Steps, "step"))
		return
	}
	agreed := "no step before it agrees"
	if f.Agreed >= 0 {
		agreed = fmt.Sprintf("steps 0-%d agree", f.Agreed)
		if f.Agreed == 0 {
			agreed = "step 0 agrees"
		}
	}
	t.printf("step digests: the runs part ways in step %d (%s): %s\n", *f.Step, agreed, strings.Join(f.DivergentRanks(*f.Step), ", "))
	for _, p := range f.Pairs {
		c := p.Compare
		if c == nil || c.First == nil || c.First.Step != *f.Step {
			continue
		}
		t.printf("  %s: %d of %d allocations differ at the end of step %d\n", pairName(p), len(c.First.Allocs), c.First.Matched, c.First.Step)
		for i, a := range c.First.Allocs {
			if i == shownAllocs {
				t.printf("    ... and %s\n", info.Count(len(c.First.Allocs)-shownAllocs, "more allocation"))
				break
			}
			where := "allocated where no line was recorded"
			if a.Line != "" {
				where = "allocated at " + a.Line
			}
			chunk := ""
			if a.Chunk >= 0 {
				chunk = fmt.Sprintf(": chunk %d differs first", a.Chunk)
			}
			t.printf("    %s %s%s\n", info.FormatBytes(a.Size), where, chunk)
		}
	}
}

func nanWords(p PairDigest) string {
	var allocs, nan, inf uint64
	for _, a := range p.NaN.Allocs {
		if a.NaN+a.Inf > 0 {
			allocs++
			nan += a.NaN
			inf += a.Inf
		}
	}
	return fmt.Sprintf("%s hold %d NaN and %d Inf", info.Count(int(allocs), "allocation"), nan, inf)
}

type writer struct {
	w   io.Writer
	err error
}

func (t *writer) printf(format string, args ...any) {
	if t.err == nil {
		_, t.err = fmt.Fprintf(t.w, format, args...)
	}
}
