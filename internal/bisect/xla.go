package bisect

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gpurr/gpurr/recording"
)

// xlaModuleRange reads the module of XLA's NVTX range of one run of a program the user
// compiled: "XlaModule:#prefix=...,hlo_module=jit_step,program_id=7#". The modules XLA's
// autotuner runs to time a fusion's candidates have no program_id
// ("XlaModule:#hlo_module=gemm_fusion_dot.3#"), and are not counted.
var xlaModuleRange = regexp.MustCompile(`^XlaModule:#(?:[^#]*,)?hlo_module=([^,#]+),program_id=\d+[,#]`)

// xlaModuleRuns counts the runs of each XLA module a recording's processes ran (by XLA's
// NVTX range of each run), most-run first (by name among equals).
func xlaModuleRuns(set *recording.Set) []moduleRuns {
	runs := map[string]int{}
	for _, p := range set.Processes {
		d, err := p.Load()
		if err != nil {
			continue
		}
		for _, r := range d.Ranges {
			if m := xlaModuleRange.FindStringSubmatch(r.GetMessage()); m != nil {
				runs[m[1]]++
			}
		}
	}
	out := make([]moduleRuns, 0, len(runs))
	for name, n := range runs {
		out = append(out, moduleRuns{name, n})
	}
	slices.SortFunc(out, func(a, b moduleRuns) int { return cmp.Or(cmp.Compare(b.runs, a.runs), cmp.Compare(a.name, b.name)) })
	return out
}

type moduleRuns struct {
	name string
	runs int
}

// xlaStepHint is, for noDigests, the --step-range that makes each run of a JAX program's
// jitted step a step, with the modules it ran most: which of them is the training step is
// known only after the fact, so bisect names them rather than guessing a rule before the
// runs. "" for a program that ran no XLA module.
func xlaStepHint(set *recording.Set) string {
	mods := xlaModuleRuns(set)
	if len(mods) == 0 {
		return ""
	}
	var most []string
	for i, m := range mods[:min(len(mods), 3)] {
		if i == 0 {
			most = append(most, fmt.Sprintf("%s (%d runs)", m.name, m.runs))
		} else {
			most = append(most, fmt.Sprintf("%s (%d)", m.name, m.runs))
		}
	}
	return fmt.Sprintf("; this JAX program's most-run XLA modules are %s: give --step-range 'hlo_module=jit_NAME,' for a step at each run of the jitted function NAME (here 'hlo_module=%s,', the most-run)",
		strings.Join(most, ", "), regexp.QuoteMeta(mods[0].name))
}
