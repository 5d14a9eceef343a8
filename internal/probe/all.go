package probe

import (
	"cmp"
	"fmt"
	"io"
	"regexp"
	"slices"
	"time"

	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/replay"
	"github.com/gpurr/gpurr/internal/termsafe"
)

// LiveKernel is what the launches of one kernel probed live add up to.
type LiveKernel struct {
	name              string
	first             uint64 // its first probed launch, for the order of the report
	launches          int
	ctasMin, ctasMax  int
	spans, medians    []time.Duration
	tails, imbalances []float64
	slowest           map[int]int // CTA index → launches it was the slowest in
	missing           int         // launches some of whose CTAs left no record
	skipped           map[string]int
}

// SumLive sums up, kernel by kernel in the order of their first probed launch, every launch
// of src probed live (gpurr record --probe) whose kernel matches kernels (nil: all): how long
// the launches' CTAs ran, their tails and SM imbalance, and which CTA was the slowest how
// often: a CTA that straggles in every launch is the kernel's, not the run's. It is an error
// when no launch is summed up.
func SumLive(src *replay.Source, kernels *regexp.Regexp) ([]*LiveKernel, error) {
	d := src.Data
	// By kernel identity (its module's code and its name): a module loaded once per thread
	// gives one kernel handle per load, and they are one kernel.
	type key struct {
		identity, id uint64
	}
	byKernel := map[key]*LiveKernel{}
	kernelOf := func(seq uint64) (*LiveKernel, bool) {
		l := src.Links.Launch(seq)
		if l == nil {
			return nil, false
		}
		name, at := fmt.Sprintf("kernel %d", l.GetKernelId()), key{id: l.GetKernelId()}
		if kern := src.Links.Kernel(l.GetKernelId()); kern != nil {
			name = src.Links.KernelName(kern)
			if kern.GetIdentity() != 0 {
				at = key{identity: kern.GetIdentity()}
			}
		}
		k := byKernel[at]
		if k == nil {
			if kernels != nil && !kernels.MatchString(name) {
				return nil, false
			}
			k = &LiveKernel{name: name, first: seq, slowest: map[int]int{}, skipped: map[string]int{}}
			byKernel[at] = k
		}
		return k, true
	}
	for _, r := range d.ProbeResults {
		k, ok := kernelOf(r.GetLaunchSeq())
		if !ok {
			continue
		}
		if r.GetSkipped() != "" {
			k.skipped[r.GetSkipped()]++
			continue
		}
		ctas, err := Decode(r.GetCtas())
		if err != nil {
			k.missing++
		}
		if len(ctas) == 0 {
			continue
		}
		s := Summarize(ctas, 1)
		if k.launches == 0 || s.CTAs < k.ctasMin {
			k.ctasMin = s.CTAs
		}
		k.ctasMax = max(k.ctasMax, s.CTAs)
		k.launches++
		k.spans = append(k.spans, s.Span)
		k.medians = append(k.medians, s.Median)
		k.tails = append(k.tails, s.StragglerFraction)
		k.imbalances = append(k.imbalances, s.Imbalance)
		k.slowest[s.Slowest[0].Index]++
	}
	if len(byKernel) == 0 {
		what := "no launch was probed live (gpurr record --probe)"
		if kernels != nil {
			what = fmt.Sprintf("no launch probed live is of a kernel matching --kernels %q", kernels)
		}
		return nil, fmt.Errorf("%s: %s", src.Proc.Name, what)
	}
	all := make([]*LiveKernel, 0, len(byKernel))
	for _, k := range byKernel {
		all = append(all, k)
	}
	slices.SortFunc(all, func(a, b *LiveKernel) int { return cmp.Compare(a.first, b.first) })
	return all, nil
}

// WriteText writes what the kernel's launches add up to, and why launches ran without probes.
func (k *LiveKernel) WriteText(w io.Writer) {
	ctas := fmt.Sprint(k.ctasMin)
	if k.ctasMax != k.ctasMin {
		ctas = fmt.Sprintf("%d–%d", k.ctasMin, k.ctasMax)
	}
	if k.launches == 0 {
		termsafe.Fprintf(w, "%s: no launch probed live\n", k.name)
	} else {
		termsafe.Fprintf(w, "%s: %s probed live, %s CTAs each\n", k.name, info.Count(k.launches, "launch"), ctas)
		slices.Sort(k.spans)
		slices.Sort(k.medians)
		slices.Sort(k.tails)
		slices.Sort(k.imbalances)
		termsafe.Fprintf(w, "  span median %s, max %s; CTA duration median %s; tail median %.0f%%; SM imbalance median %.2f\n",
			us(k.spans[len(k.spans)/2]), us(k.spans[len(k.spans)-1]), us(k.medians[len(k.medians)/2]),
			100*k.tails[len(k.tails)/2], k.imbalances[len(k.imbalances)/2])
		cta, n := -1, 0
		for c, times := range k.slowest {
			if times > n || times == n && c < cta {
				cta, n = c, times
			}
		}
		others := ""
		if len(k.slowest) > 1 {
			others = fmt.Sprintf("; %d other CTAs were the slowest of the rest", len(k.slowest)-1)
		}
		termsafe.Fprintf(w, "  slowest CTA: %d, in %d of %s%s\n", cta, n, info.Count(k.launches, "launch"), others)
	}
	if k.missing > 0 {
		termsafe.Fprintf(w, "  %s with CTAs that left no record (the launch did not finish them)\n", info.Count(k.missing, "launch"))
	}
	reasons := make([]string, 0, len(k.skipped))
	for r := range k.skipped {
		reasons = append(reasons, r)
	}
	slices.SortFunc(reasons, func(a, b string) int { return cmp.Or(cmp.Compare(k.skipped[b], k.skipped[a]), cmp.Compare(a, b)) })
	for _, r := range reasons {
		termsafe.Fprintf(w, "  %s ran without probes: %s\n", info.Count(k.skipped[r], "launch"), r)
	}
}
