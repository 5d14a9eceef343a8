package bisect

import (
	"fmt"
	"regexp"

	"github.com/gpurr/gpurr/recording"
)

// xlaModuleRange reads the module of XLA's NVTX range of one run of a program the user
// compiled: "XlaModule:#prefix=...,hlo_module=jit_step,program_id=7#". The modules XLA's
// autotuner runs to time a fusion's candidates have no program_id
// ("XlaModule:#hlo_module=gemm_fusion_dot.3#"), and are not counted.
var xlaModuleRange = regexp.MustCompile(`^XlaModule:#(?:[^#]*,)?hlo_module=([^,#]+),program_id=\d+[,#]`)

// mostRunXLAModule is the XLA module a recording's processes ran most often (by XLA's NVTX
// range of each run), and how often; "" when they ran none. A JAX program's steps are the
// runs of its jitted step, which is most often that module: it is known only after the fact,
// so bisect names it where a run took no digest rather than guessing a rule before it.
func mostRunXLAModule(set *recording.Set) (string, int) {
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
	best, n := "", 0
	for name, c := range runs {
		if c > n || c == n && name < best {
			best, n = name, c
		}
	}
	return best, n
}

// xlaStepHint is the --step-range that numbers a JAX program's steps by its most-run XLA
// module's runs, said for noDigests; "" for a program that ran no XLA module.
func xlaStepHint(set *recording.Set) string {
	name, n := mostRunXLAModule(set)
	if name == "" {
		return ""
	}
	return fmt.Sprintf("; for this JAX program, whose most-run XLA module is %s (%d runs), give --step-range 'hlo_module=%s,': a step for each run of it", name, n, regexp.QuoteMeta(name))
}
