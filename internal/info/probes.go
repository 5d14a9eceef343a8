package info

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Probes says what gpurr record --probe did: the kernels it instrumented or could not, and
// how many launches ran with probes or without them.
type Probes struct {
	Spec         string         `json:"spec"` // --probe as given
	Instrumented int            `json:"kernels_instrumented"`
	Not          []ProbeMiss    `json:"kernels_not_instrumented,omitempty"`
	Probed       int            `json:"launches_probed"`  // probe results with CTA records
	Skipped      int            `json:"launches_skipped"` // launches of instrumented kernels that ran without probes
	Reasons      []ProbeSkipped `json:"skipped_reasons,omitempty"`
	// Launches that ran with probes whose records never reached the recording (still on the
	// GPU when the process ended): from the agent's count, in a complete recording.
	NeverArrived uint64 `json:"launches_records_lost,omitempty"`
}

// ProbeMiss is a kernel --probe picked but could not instrument.
type ProbeMiss struct {
	Kernel string `json:"kernel"` // readable, shortened
	Reason string `json:"reason"`
}

// ProbeSkipped is why launches ran without probes, and how many, most first.
type ProbeSkipped struct {
	Reason   string `json:"reason"`
	Launches int    `json:"launches"`
}

// probeCounter counts probe results as they are read; it keeps the ProbeKernels (one or a few
// per kernel) but no result.
type probeCounter struct {
	kernels         []*pb.ProbeKernel
	results         int
	probed, skipped int
	reasons         map[string]int
}

func (c *probeCounter) add(b *pb.Batch) {
	c.kernels = append(c.kernels, b.ProbeKernels...)
	c.results += len(b.Probes)
	for _, r := range b.Probes {
		switch {
		case r.GetSkipped() != "":
			c.skipped++
			c.reasons[r.GetSkipped()]++
		case len(r.GetCtas()) > 0:
			c.probed++
		}
	}
}

// summarize is nil when the process was not recorded with --probe. links names the kernels.
func (c *probeCounter) summarize(info *pb.Process, s *pb.Stats, end *pb.End, links *recording.Links) *Probes {
	spec := info.GetProbe()
	if spec == "" && len(c.kernels) == 0 && c.results == 0 {
		return nil
	}
	p := &Probes{Spec: spec, Probed: c.probed, Skipped: c.skipped}
	// A module loaded more than once (once per thread) gives its kernel a handle, so a
	// ProbeKernel, each time: count a kernel once by its identity (module and name), as
	// gpurr probe --all does.
	seen := map[string]bool{}
	for _, k := range c.kernels {
		name, who := fmt.Sprintf("kernel %d", k.GetKernelId()), fmt.Sprint("id ", k.GetKernelId())
		if kernel := links.Kernel(k.GetKernelId()); kernel != nil {
			name = shorten(links.KernelName(kernel), 60)
			if kernel.GetIdentity() != 0 {
				who = fmt.Sprint("identity ", kernel.GetIdentity())
			}
		}
		key := fmt.Sprint(k.GetInstrumented(), "\x00", who, "\x00", k.GetReason())
		if seen[key] {
			continue
		}
		seen[key] = true
		if k.GetInstrumented() {
			p.Instrumented++
			continue
		}
		p.Not = append(p.Not, ProbeMiss{Kernel: name, Reason: k.GetReason()})
	}
	// The agent counts launches that ran with probes (probe_launches) and those it skipped
	// before or at their launch (probe_skipped, each with its result); every other result is
	// one of the former's.
	if end != nil && s != nil {
		if ran := uint64(c.results) - min(uint64(c.results), s.GetProbeSkipped()); s.GetProbeLaunches() > ran {
			p.NeverArrived = s.GetProbeLaunches() - ran
		}
	}
	for reason, n := range c.reasons {
		p.Reasons = append(p.Reasons, ProbeSkipped{Reason: reason, Launches: n})
	}
	slices.SortFunc(p.Reasons, func(a, b ProbeSkipped) int {
		return cmp.Or(cmp.Compare(b.Launches, a.Launches), cmp.Compare(a.Reason, b.Reason))
	})
	return p
}

// write writes the probes line: "SPEC: 3 kernels instrumented, 1 not (name: reason); 1200
// launches probed, 4 skipped (reason)".
func (p *Probes) write(t *textWriter) {
	if p == nil {
		return
	}
	if p.Instrumented == 0 && len(p.Not) == 0 {
		t.field("probes", "%s: no launched kernel's name matched (names are mangled: gpurr query REC 'SELECT DISTINCT name FROM kernels' lists them)", p.Spec)
		return
	}
	kernels := Count(p.Instrumented, "kernel") + " instrumented"
	if len(p.Not) > 0 {
		var not []string
		for _, m := range p.Not[:min(len(p.Not), 3)] {
			not = append(not, m.Kernel+": "+m.Reason)
		}
		if len(p.Not) > 3 {
			not = append(not, "...")
		}
		kernels += fmt.Sprintf(", %d not (%s)", len(p.Not), strings.Join(not, "; "))
	}
	launches := fmt.Sprintf("%s probed, %d skipped", Count(p.Probed, "launch"), p.Skipped)
	if len(p.Reasons) > 0 {
		var why []string
		for _, r := range p.Reasons[:min(len(p.Reasons), 3)] {
			if len(p.Reasons) == 1 {
				why = append(why, r.Reason)
			} else {
				why = append(why, fmt.Sprintf("%d: %s", r.Launches, r.Reason))
			}
		}
		if len(p.Reasons) > 3 {
			why = append(why, "...")
		}
		launches += " (" + strings.Join(why, "; ") + ")"
	}
	if p.NeverArrived > 0 {
		launches += fmt.Sprintf("; %s ran with probes whose records never arrived (the process ended first)", Count(int(p.NeverArrived), "launch"))
	}
	t.field("probes", "%s: %s; %s", p.Spec, kernels, launches)
}
