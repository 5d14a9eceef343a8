package replay

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpurr/gpurr/internal/ptx"
)

// Why a launch's replay differs from its recording, when the kernel's code does not say.
const (
	whyDiffers          = "the replay is repeatable but differs from the recording: the kernel may read memory outside its regions, or depend on state replay does not restore"
	whyNondeterministic = "two replays disagree with each other: the kernel is not deterministic (float atomics, races)"
)

// ExplainDiffers says why kernel's replay differs from its recording (repeatable: whether two
// replays agreed with each other), given its module's PTX (nil when the recording has none):
// what in its code depends on the run, when the PTX shows something (a clock, the SM it ran
// on, the device heap); otherwise the memory or state replay may not restore.
func ExplainDiffers(kernel string, ptxSrc []byte, repeatable bool) string {
	why := whyFor(repeatable)
	if ptxSrc == nil {
		return why + " (the recording has no PTX of its module, only machine code: whether it reads a clock is not known)"
	}
	m, err := ptx.Parse(ptxSrc)
	if err != nil {
		return why + fmt.Sprintf(" (its module's PTX could not be read: %v)", err)
	}
	deps := m.RunDependent(kernel)
	reads := make([]codeRead, len(deps))
	for i, d := range deps {
		reads[i] = codeRead{what: d.What, said: d.String()}
	}
	return explainReads(why, reads, repeatable)
}

// explainDiffers is ExplainDiffers for c's module: from its PTX when the recording has
// some (the newest, of a fat binary's), else from the SASS of its machine code.
func (src *Source) explainDiffers(c *Case, repeatable bool) string {
	if p, err := src.RecordedPTX(c); err == nil {
		if e, err := p.For(c.Kernel.GetName(), 0); err == nil {
			return ExplainDiffers(c.Kernel.GetName(), e.Text, repeatable)
		}
	}
	return explainMachineCode(c.Kernel.GetName(), c.Module, repeatable)
}

func whyFor(repeatable bool) string {
	if repeatable {
		return whyDiffers
	}
	return whyNondeterministic
}

// codeRead is one thing a kernel's code does that depends on the run: what (a PTX special
// register, a SASS one, or the function called), and said as replay reports it ("reads
// %clock64 (PTX line 36)"); verb and where make said when it is empty.
type codeRead struct {
	what, said  string
	verb, where string
}

func (r codeRead) String() string {
	if r.said != "" {
		return r.said
	}
	return fmt.Sprintf("%s %s (%s)", r.verb, r.what, r.where)
}

// explainReads is why, or, when the code shows reads, what they make the output depend on.
func explainReads(why string, reads []codeRead, repeatable bool) string {
	if len(reads) == 0 {
		return why
	}
	lead := "the replay is repeatable but differs from the recording"
	if !repeatable {
		lead = "two replays disagree with each other"
	}
	parts := make([]string, len(reads))
	for i, r := range reads {
		parts[i] = r.String()
	}
	return fmt.Sprintf("%s, and the kernel %s: its output depends on %s", lead, strings.Join(parts, ", "), dependsOn(reads))
}

// dependsOn says what reads make the output depend on: "when it runs", "where it runs", "what
// the device heap returns", joined.
func dependsOn(reads []codeRead) string {
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, r := range reads {
		w := strings.ToLower(r.what)
		switch {
		case strings.Contains(w, "clock"), strings.Contains(w, "globaltimer"):
			add("when it runs")
		case strings.HasPrefix(w, "%"), strings.HasPrefix(w, "sr_"):
			add("where it runs (which SM and warp slot)")
		default:
			add("what the device heap returns")
		}
	}
	return strings.Join(out, " and ")
}
