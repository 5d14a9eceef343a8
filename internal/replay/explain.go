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

// kernelPTX is the PTX of c's module: the image itself when it is PTX, else the PTX stored
// beside it (Triton's); nil when the recording holds only machine code.
func (src *Source) kernelPTX(c *Case) []byte {
	if strings.HasPrefix(ModuleKind(c.Module), "PTX") {
		return c.Module
	}
	if b, err := src.Proc.ModulePTX(c.ModuleHash); err == nil {
		return b
	}
	return nil
}

// ExplainDiffers says why kernel's replay differs from its recording (repeatable: whether two
// replays agreed with each other), given its module's PTX (nil when the recording has none):
// what in its code depends on the run, when the PTX shows something (a clock, the SM it ran
// on, the device heap); otherwise the memory or state replay may not restore.
func ExplainDiffers(kernel string, ptxSrc []byte, repeatable bool) string {
	why := whyNondeterministic
	if repeatable {
		why = whyDiffers
	}
	if ptxSrc == nil {
		return why + " (the recording has no PTX of its module, only machine code: whether it reads a clock is not known)"
	}
	m, err := ptx.Parse(ptxSrc)
	if err != nil {
		return why + fmt.Sprintf(" (its module's PTX could not be read: %v)", err)
	}
	deps := m.RunDependent(kernel)
	if len(deps) == 0 {
		return why
	}
	lead := "the replay is repeatable but differs from the recording"
	if !repeatable {
		lead = "two replays disagree with each other"
	}
	parts := make([]string, len(deps))
	for i, d := range deps {
		parts[i] = d.String()
	}
	return fmt.Sprintf("%s, and the kernel %s: its output depends on %s", lead, strings.Join(parts, ", "), dependsOn(deps))
}

// dependsOn says what deps make the output depend on: "when it runs", "where it runs", "what
// the device heap returns", joined.
func dependsOn(deps []ptx.RunDependence) string {
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, d := range deps {
		switch {
		case strings.HasPrefix(d.What, "%clock"), strings.HasPrefix(d.What, "%globaltimer"):
			add("when it runs")
		case strings.HasPrefix(d.What, "%"):
			add("where it runs (which SM and warp slot)")
		default:
			add("what the device heap returns")
		}
	}
	return strings.Join(out, " and ")
}
