package instrument

import (
	"fmt"
	"strings"

	"github.com/gpurr/gpurr/internal/ptx"
)

// Placement says which threads a delay decision covers: each its own, or all of a warp, of a
// CTA, or one CTA of each thread-block cluster.
type Placement string

const (
	PerThread  Placement = "thread"
	PerWarp    Placement = "warp"
	PerCTA     Placement = "cta"
	PerCluster Placement = "cluster" // one CTA of each cluster, chosen by the seed (sm_90)
)

// DelaySeedSymbol is the module-scope variable InjectDelays adds: the 32-bit seed word
// (SeedWord) the blocks choose their threads by, which the runner sets before each launch
// (cuModuleGetGlobal). With the seed outside the code, one JIT of a module serves every seed.
const DelaySeedSymbol = "gpurr_delay_seed"

// SeedWord is the value of DelaySeedSymbol for a seed: the same seed and points make the same
// choices, run after run.
func SeedWord(seed uint64) uint32 { return uint32(seed) ^ uint32(seed>>32) }

// Delay is what InjectDelays puts at each point.
type Delay struct {
	Nanoseconds uint32  // how long a chosen thread sleeps there (nanosleep's limit is 1 ms)
	Fraction    float64 // of the placement's units chosen at each point, 0 < Fraction <= 1
	Placement   Placement
}

// Check says what is wrong with d, nil when nothing.
func (d Delay) Check() error {
	switch {
	case d.Nanoseconds == 0 || d.Nanoseconds > 1_000_000:
		return fmt.Errorf("delay %d ns: want 1 ns to 1 ms (nanosleep's range)", d.Nanoseconds)
	case !(d.Fraction > 0 && d.Fraction <= 1):
		return fmt.Errorf("fraction %g: want more than 0, at most 1", d.Fraction)
	}
	switch d.Placement {
	case PerThread, PerWarp, PerCTA, PerCluster:
		return nil
	}
	return fmt.Errorf("placement %q: want thread, warp, cta or cluster", d.Placement)
}

// InjectDelays puts, before each of points of kernel in m, a scope block that sleeps d's time in
// the threads that the seed (DelaySeedSymbol, set before the launch) chooses there. points come
// from Points on the same function, and stay valid: the blocks hold no instruction Points would
// pick (their one load is of gpurr's own variable, not a point's class).
func InjectDelays(m *ptx.Module, kernel string, points []Point, d Delay) error {
	if err := d.Check(); err != nil {
		return err
	}
	fn := m.Function(kernel)
	if fn == nil || !fn.HasBody {
		return fmt.Errorf("the module has no kernel %s", kernel)
	}
	if err := CheckTarget(m, d.Placement); err != nil {
		return err
	}
	if err := declareVar(m, DelaySeedSymbol, ".visible .global .align 4 .u32 "+DelaySeedSymbol+";\n"); err != nil {
		return err
	}
	at := map[*ptx.Instruction]int{}
	for n, p := range points {
		at[p.Instr] = n
	}
	var failed error
	fn.Body = insertBefore(fn.Body, func(in *ptx.Instruction) []ptx.Stmt {
		n, ok := at[in]
		if !ok || failed != nil {
			return nil
		}
		delete(at, in)
		block, err := delayBlock(d, uint32(n))
		if err != nil {
			failed = err
		}
		return block
	})
	if failed != nil {
		return failed
	}
	if len(at) > 0 {
		return fmt.Errorf("%d points are not instructions of %s", len(at), kernel)
	}
	return nil
}

// CheckTarget says whether the module's target architecture has what delays placed so need:
// nanosleep (sm_70), and for one CTA per cluster the cluster registers (sm_90).
func CheckTarget(m *ptx.Module, p Placement) error {
	need := 70 // nanosleep
	if p == PerCluster {
		need = 90 // %clusterid, %cluster_ctarank
	}
	if sm := targetSM(m); sm < need {
		return fmt.Errorf("the module targets %s: delays need sm_%d or newer (nanosleep%s)", strings.Join(m.Target, ","), need,
			map[bool]string{true: ", clusters", false: ""}[need == 90])
	}
	return nil
}

// insertBefore returns body with what add gives for each instruction put before it, into
// nested blocks too.
func insertBefore(body []ptx.Stmt, add func(*ptx.Instruction) []ptx.Stmt) []ptx.Stmt {
	out := make([]ptx.Stmt, 0, len(body))
	for _, s := range body {
		switch s := s.(type) {
		case *ptx.Instruction:
			out = append(out, add(s)...)
		case *ptx.Block:
			s.Body = insertBefore(s.Body, add)
		}
		out = append(out, s)
	}
	return out
}

// delayBlock is the PTX of point n's delay, parsed into statements. It hashes the seed word,
// the point and the placement's ids into a 32-bit number (multiply, xor-shift), and sleeps
// where the number falls under Fraction's share of 2^32.
func delayBlock(d Delay, point uint32) ([]ptx.Stmt, error) {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("{")
	w(".reg .u32 %%gpurr_h, %%gpurr_v, %%gpurr_w;")
	w(".reg .pred %%gpurr_p;")
	w("ld.global.u32 %%gpurr_h, [%s];", DelaySeedSymbol)
	w("xor.b32 %%gpurr_h, %%gpurr_h, %d;", point*0x9e3779b9)
	mix := func(reg string) {
		w("xor.b32 %%gpurr_h, %%gpurr_h, %s;", reg)
		w("mul.lo.u32 %%gpurr_h, %%gpurr_h, 0x9E3779B1;")
		w("shr.u32 %%gpurr_w, %%gpurr_h, 15;")
		w("xor.b32 %%gpurr_h, %%gpurr_h, %%gpurr_w;")
	}
	ctas := []string{"%ctaid.x", "%ctaid.y", "%ctaid.z"}
	switch d.Placement {
	case PerThread:
		for _, r := range append([]string{"%tid.x", "%tid.y", "%tid.z"}, ctas...) {
			w("mov.u32 %%gpurr_v, %s;", r)
			mix("%gpurr_v")
		}
	case PerWarp:
		// The warp of a thread: its linear index in the CTA, over 32.
		// Special registers are read with mov only.
		w("mov.u32 %%gpurr_v, %%tid.z;")
		for _, pair := range [][2]string{{"%ntid.y", "%tid.y"}, {"%ntid.x", "%tid.x"}} {
			w("mov.u32 %%gpurr_w, %s;", pair[0])
			w("mul.lo.u32 %%gpurr_v, %%gpurr_v, %%gpurr_w;")
			w("mov.u32 %%gpurr_w, %s;", pair[1])
			w("add.u32 %%gpurr_v, %%gpurr_v, %%gpurr_w;")
		}
		w("shr.u32 %%gpurr_v, %%gpurr_v, 5;")
		mix("%gpurr_v")
		for _, r := range ctas {
			w("mov.u32 %%gpurr_v, %s;", r)
			mix("%gpurr_v")
		}
	case PerCTA:
		for _, r := range ctas {
			w("mov.u32 %%gpurr_v, %s;", r)
			mix("%gpurr_v")
		}
	case PerCluster:
		// One CTA of each cluster: the one whose rank is the hash of the cluster, modulo its size.
		for _, r := range []string{"%clusterid.x", "%clusterid.y", "%clusterid.z"} {
			w("mov.u32 %%gpurr_v, %s;", r)
			mix("%gpurr_v")
		}
		w("mov.u32 %%gpurr_v, %%cluster_nctarank;")
		w("rem.u32 %%gpurr_h, %%gpurr_h, %%gpurr_v;")
		w("mov.u32 %%gpurr_v, %%cluster_ctarank;")
		w("setp.eq.u32 %%gpurr_p, %%gpurr_h, %%gpurr_v;")
		w("@%%gpurr_p nanosleep.u32 %d;", d.Nanoseconds)
		w("}")
		return parseBody(b.String())
	}
	threshold := uint64(d.Fraction * (1 << 32))
	if threshold >= 1<<32 {
		w("setp.eq.u32 %%gpurr_p, %%gpurr_h, %%gpurr_h;") // every unit
	} else {
		w("setp.lt.u32 %%gpurr_p, %%gpurr_h, %d;", threshold)
	}
	w("@%%gpurr_p nanosleep.u32 %d;", d.Nanoseconds)
	w("}")
	return parseBody(b.String())
}

// parseBody parses statements as the body of a kernel of their own, and returns them.
func parseBody(stmts string) ([]ptx.Stmt, error) {
	src := ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry gpurr_snippet()\n{\n" + stmts + "ret;\n}\n"
	m, err := ptx.Parse([]byte(src))
	if err != nil {
		return nil, fmt.Errorf("gpurr's own PTX does not parse (a bug): %v", err)
	}
	body := m.Function("gpurr_snippet").Body
	return body[:len(body)-1], nil // without the ret
}

// targetSM is the module's sm_NN from .target (sm_90a counts as 90), 0 when it names none.
func targetSM(m *ptx.Module) int {
	for _, t := range m.Target {
		var n int
		if _, err := fmt.Sscanf(t, "sm_%d", &n); err == nil {
			return n
		}
	}
	return 0
}
