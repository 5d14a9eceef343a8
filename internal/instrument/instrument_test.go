package instrument

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/ptx"
)

func demo(t *testing.T) *ptx.Module {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "kernels", "ptx", "demo.ptx"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ptx.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPoints(t *testing.T) {
	m := demo(t)
	sel, err := ParseSelection("global-store,barrier,atomic,op:^ld\\.global")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, k := range []string{"gpurr_demo_fill", "gpurr_demo_saxpy", "gpurr_demo_reduce"} {
		for _, p := range Points(m.Function(k), sel) {
			got[k] = append(got[k], p.Instr.Name())
		}
	}
	want := map[string]string{
		"gpurr_demo_fill":   "st.global.f32",
		"gpurr_demo_saxpy":  "ld.global.f32 ld.global.f32 st.global.f32",
		"gpurr_demo_reduce": "ld.global.f32 bar.sync bar.sync atom.global.add.u64",
	}
	for k, w := range want {
		if g := strings.Join(got[k], " "); g != w {
			t.Errorf("%s: points %q, want %q", k, g, w)
		}
	}
	// An empty op: matched every instruction, so every one was a point.
	if _, err := ParseSelection("barrier,op:"); err == nil || !strings.Contains(err.Error(), "op: wants a regular expression") {
		t.Errorf("op: with nothing after it: %v", err)
	}
	if _, err := ParseSelection("global-store,shared-sotre"); err == nil || !strings.Contains(err.Error(), "shared-sotre") {
		t.Errorf("a misspelt class: %v", err)
	}
}

// Each placement's blocks go before each point, print as PTX that parses again, keep the
// kernel's own instructions in order, and store nothing: the write sets are the same.
func TestInjectDelays(t *testing.T) {
	sel, _ := ParseSelection("global-store,barrier,atomic,global-load")
	for _, placement := range []Placement{PerThread, PerWarp, PerCTA, PerCluster} {
		m := demo(t)
		if placement == PerCluster {
			m.Target = []string{"sm_90"} // demo.ptx is built for sm_80, which has no clusters
		}
		before := m.WriteSets()
		const kernel = "gpurr_demo_reduce"
		fn := m.Function(kernel)
		var own []string
		for _, in := range fn.Instructions() {
			own = append(own, in.Name())
		}
		points := Points(fn, sel)
		if err := InjectDelays(m, kernel, points, Delay{Nanoseconds: 2000, Fraction: 0.25, Placement: placement}); err != nil {
			t.Fatalf("%s: %v", placement, err)
		}
		again, err := ptx.Parse([]byte(m.String()))
		if err != nil {
			t.Fatalf("%s: the instrumented module does not parse: %v\n%s", placement, err, m.String())
		}
		var kept []string
		sleeps, next := 0, 0
		for _, in := range again.Function(kernel).Instructions() {
			if in.Opcode == "nanosleep" {
				sleeps++
				if in.Guard != "%gpurr_p" {
					t.Errorf("%s: an unguarded nanosleep", placement)
				}
				continue
			}
			if ours(in) {
				continue
			}
			if next < len(points) && in.Name() == points[next].Instr.Name() && sleeps != next+1 {
				t.Errorf("%s: point %d (%s) has %d sleeps before it", placement, next, in.Name(), sleeps)
			}
			if next < len(points) && in.Name() == points[next].Instr.Name() {
				next++
			}
			kept = append(kept, in.Name())
		}
		if sleeps != len(points) {
			t.Errorf("%s: %d sleeps for %d points", placement, sleeps, len(points))
		}
		if strings.Join(kept, " ") != strings.Join(own, " ") {
			t.Errorf("%s: the kernel's instructions changed:\n got %v\nwant %v", placement, kept, own)
		}
		after := again.WriteSets()
		for i := range before {
			for j := range before[i].Params {
				if before[i].Params[j].Verdict != after[i].Params[j].Verdict {
					t.Errorf("%s: %s param %d: write verdict changed", placement, before[i].Kernel, j)
				}
			}
		}
		// The other kernels are untouched.
		if got, want := again.Function("gpurr_demo_fill").Instructions(), demo(t).Function("gpurr_demo_fill").Instructions(); len(got) != len(want) {
			t.Errorf("%s: fill changed from %d to %d instructions", placement, len(want), len(got))
		}
	}
}

// The seed is not in the code: every block reads it from the one variable the module declares
// (a second instrumentation adds none), mixes its point in, and seeds that differ in either
// half give different words.
func TestSeedDecides(t *testing.T) {
	d := Delay{Nanoseconds: 100, Fraction: 0.5, Placement: PerThread}
	a, _ := delayBlock(d, 0)
	b, _ := delayBlock(d, 1)
	text := func(s []ptx.Stmt) string {
		var out []string
		for _, x := range s {
			if bl, ok := x.(*ptx.Block); ok {
				for _, y := range bl.Body {
					if in, ok := y.(*ptx.Instruction); ok {
						out = append(out, in.Name()+" "+operandText(in.Operands))
					}
				}
			}
		}
		return strings.Join(out, "\n")
	}
	if text(a) == text(b) {
		t.Error("the point does not change the decision")
	}
	if !strings.Contains(strings.Join(strings.Fields(text(a)), " "), "ld.global.u32 %gpurr_h "+DelaySeedSymbol) {
		t.Errorf("the block does not load the seed:\n%s", text(a))
	}
	if SeedWord(1) == SeedWord(2) || SeedWord(1) == SeedWord(1|1<<32) || SeedWord(7) != 7 {
		t.Error("seed words do not follow the seed")
	}
	m := demo(t)
	sel, _ := ParseSelection("barrier")
	for range 2 {
		fn := m.Function("gpurr_demo_reduce")
		if err := InjectDelays(m, fn.Name, Points(fn, sel), d); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(m.String(), ".u32 "+DelaySeedSymbol+";"); n != 1 {
		t.Errorf("the module declares the seed %d times, want 1", n)
	}
	for _, bad := range []Delay{{Nanoseconds: 0, Fraction: 1, Placement: PerThread}, {Nanoseconds: 2e6, Fraction: 1, Placement: PerThread},
		{Nanoseconds: 10, Fraction: 0, Placement: PerThread}, {Nanoseconds: 10, Fraction: 1, Placement: "grid"}} {
		if bad.Check() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// ours reports whether an instruction is one of the delay blocks' (it names their registers).
func ours(in *ptx.Instruction) bool {
	return strings.HasPrefix(in.Guard, "%gpurr_") || strings.Contains(" "+operandText(in.Operands), " %gpurr_")
}

func operandText(ops []ptx.Operand) string {
	var out []string
	for _, o := range ops {
		out = append(out, o.Name)
		if o.Base != nil {
			out = append(out, o.Base.Name)
		}
		out = append(out, operandText(o.Elems))
	}
	return strings.Join(out, " ")
}

func TestTargetChecked(t *testing.T) {
	m := demo(t) // sm_80
	fn := m.Function("gpurr_demo_fill")
	sel, _ := ParseSelection("global-store")
	err := InjectDelays(m, fn.Name, Points(fn, sel), Delay{Nanoseconds: 10, Fraction: 1, Placement: PerCluster})
	if err == nil || !strings.Contains(err.Error(), "sm_90") {
		t.Errorf("clusters on sm_80: %v", err)
	}
	m.Target = []string{"sm_52"}
	err = InjectDelays(m, fn.Name, Points(fn, sel), Delay{Nanoseconds: 10, Fraction: 1, Placement: PerThread})
	if err == nil || !strings.Contains(err.Error(), "nanosleep") {
		t.Errorf("nanosleep on sm_52: %v", err)
	}
}

// Probes: the buffer's variable is declared once, every thread notes its entry first thing and
// its exit before each ret, the kernel's own instructions are kept, and the module parses again.
func TestInjectProbes(t *testing.T) {
	m := demo(t)
	const kernel = "gpurr_demo_reduce"
	var own []string
	rets := 0
	for _, in := range m.Function(kernel).Instructions() {
		own = append(own, in.Name())
		if in.Opcode == "ret" {
			rets++
		}
	}
	if _, err := InjectProbes(m, kernel, Selection{}); err != nil {
		t.Fatal(err)
	}
	if _, err := InjectProbes(m, "gpurr_demo_fill", Selection{}); err != nil { // a second kernel shares the variable
		t.Fatal(err)
	}
	again, err := ptx.Parse([]byte(m.String()))
	if err != nil {
		t.Fatalf("the probed module does not parse: %v\n%s", err, m.String())
	}
	if again.Version != m.Version || strings.Join(again.Target, ",") != strings.Join(m.Target, ",") {
		t.Errorf("the probed module's header is .version %s .target %v, want the kernel's %s %v", again.Version, again.Target, m.Version, m.Target)
	}
	if n := strings.Count(m.String(), ".global .align 8 .u64 "+ProbeSymbol); n != 1 {
		t.Errorf("%s declared %d times", ProbeSymbol, n)
	}
	ins := again.Function(kernel).Instructions()
	if ins[0].Name() != "ld.global.u64" || ins[0].Operands[1].Base == nil || ins[0].Operands[1].Base.Name != ProbeSymbol {
		t.Errorf("the kernel does not start by loading the probe buffer: %s", ins[0].Name())
	}
	var kept []string
	mins, maxes := 0, 0
	for i, in := range ins {
		switch {
		case in.Name() == "red.global.min.u64":
			mins++
		case in.Name() == "red.global.max.u64":
			maxes++
			if next := ins[i+1]; next.Opcode != "ret" {
				t.Errorf("an exit note is followed by %s, not ret", next.Name())
			}
		case !ours(in) && !(in.Opcode == "ld" && in.Operands[1].Base != nil && in.Operands[1].Base.Name == ProbeSymbol):
			kept = append(kept, in.Name())
		}
	}
	if mins != 1 || maxes != rets {
		t.Errorf("%d entry notes and %d exit notes for %d rets", mins, maxes, rets)
	}
	if strings.Join(kept, " ") != strings.Join(own, " ") {
		t.Errorf("the kernel's instructions changed:\n got %v\nwant %v", kept, own)
	}
	m.Target = []string{"sm_30"}
	if _, err := InjectProbes(m, kernel, Selection{}); err == nil {
		t.Error("probes on sm_30 accepted")
	}
}

// Counting probes: a register increment before each counted instruction, under the
// instruction's own guard; one atomic add of the register at each exit, under the exit's
// guard; nothing counted without a selection.
func TestInjectProbesCount(t *testing.T) {
	src := `.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 k_p)
{
	.reg .pred %p<2>;
	.reg .b64 %rd<3>;
	.reg .f32 %f<2>;
	ld.param.u64 %rd1, [k_p];
	cvta.to.global.u64 %rd2, %rd1;
	setp.eq.u64 %p1, %rd1, 0;
	@%p1 ret;
	ld.global.f32 %f1, [%rd2];
	@!%p1 st.global.f32 [%rd2+4], %f1;
	st.global.f32 [%rd2+8], %f1;
	ret;
}
`
	m, err := ptx.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	sel, err := ParseSelection("global-store")
	if err != nil {
		t.Fatal(err)
	}
	counted, err := InjectProbes(m, "k", sel)
	if err != nil || counted != 2 {
		t.Fatalf("counted %d, %v; want the 2 stores", counted, err)
	}
	again, err := ptx.Parse([]byte(m.String()))
	if err != nil {
		t.Fatalf("the probed module does not parse: %v\n%s", err, m.String())
	}
	ins := again.Function("k").Instructions()
	guardOf := func(in *ptx.Instruction) string {
		if in.Guard == "" {
			return ""
		}
		return map[bool]string{true: "!", false: ""}[in.GuardNot] + in.Guard
	}
	incs, adds := 0, 0
	for i, in := range ins {
		switch {
		case in.Name() == "add.u64" && in.Operands[0].Name == "%gpurr_n":
			incs++
			if next := ins[i+1]; next.Opcode != "st" || guardOf(next) != guardOf(in) {
				t.Errorf("an increment under %q is followed by %s under %q", guardOf(in), next.Name(), guardOf(next))
			}
		case in.Name() == "red.global.add.u64":
			adds++
			if next := ins[i+1]; next.Opcode != "ret" || guardOf(next) != guardOf(in) {
				t.Errorf("a count add under %q is followed by %s under %q", guardOf(in), next.Name(), guardOf(next))
			}
		case in.Name() == "atom.global.max.u64":
			var ret *ptx.Instruction
			for _, n := range ins[i+1:] {
				if n.Opcode == "ret" {
					ret = n
					break
				}
			}
			if guardOf(in) != guardOf(ret) {
				t.Errorf("an exit note under %q before a ret under %q", guardOf(in), guardOf(ret))
			}
		}
	}
	if incs != 2 || adds != 2 {
		t.Errorf("%d increments and %d count adds, want 2 and 2 (2 stores, 2 rets)", incs, adds)
	}
	plain, _ := ptx.Parse([]byte(src))
	if _, err := InjectProbes(plain, "k", Selection{}); err != nil || strings.Contains(plain.String(), "red.global.add") {
		t.Errorf("no selection, yet a count: %v\n%s", err, plain.String())
	}
}

// Live probes: the records' address comes as one more .u64 parameter, after the kernel's
// own; the entry note is an atomic max of the complemented time (records start zeroed); a
// second instrumentation of the same kernel is refused.
func TestInjectLiveProbes(t *testing.T) {
	m := demo(t)
	const kernel = "gpurr_demo_reduce"
	own := len(m.Function(kernel).Params)
	if _, err := InjectLiveProbes(m, kernel, Selection{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(m.String(), ProbeSymbol) {
		t.Errorf("live probes declared %s", ProbeSymbol)
	}
	again, err := ptx.Parse([]byte(m.String()))
	if err != nil {
		t.Fatalf("the probed module does not parse: %v\n%s", err, m.String())
	}
	fn := again.Function(kernel)
	if len(fn.Params) != own+1 || fn.Params[own].Name != ProbeParam || fn.Params[own].Type != "u64" {
		t.Fatalf("params after instrumenting: %d, last %+v", len(fn.Params), fn.Params[len(fn.Params)-1])
	}
	ins := fn.Instructions()
	if ins[0].Name() != "ld.param.u64" || ins[1].Name() != "cvta.to.global.u64" {
		t.Errorf("the kernel starts with %s, %s", ins[0].Name(), ins[1].Name())
	}
	var seq []string
	for _, in := range ins {
		if n := in.Name(); n == "not.b64" || strings.HasPrefix(n, "red.global") {
			seq = append(seq, n)
		}
	}
	if len(seq) < 3 || seq[0] != "not.b64" || seq[1] != "red.global.max.u64" || seq[len(seq)-1] != "red.global.max.u64" {
		t.Errorf("entry and exit notes: %v", seq)
	}
	if _, err := InjectLiveProbes(again, kernel, Selection{}); err == nil || !strings.Contains(err.Error(), "instrumented already") {
		t.Errorf("instrumenting twice: %v", err)
	}
}

// Probes vote among the threads that exit: PTX before 6.2 and targets before sm_70 are refused.
func TestProbesNeedVotes(t *testing.T) {
	for _, c := range []struct{ version, target string }{{"6.0", "sm_70"}, {"8.0", "sm_60"}, {"x", "sm_90"}} {
		m := demo(t)
		m.Version, m.Target = c.version, []string{c.target}
		if _, err := InjectLiveProbes(m, "gpurr_demo_reduce", Selection{}); err == nil {
			t.Errorf("PTX %s for %s accepted", c.version, c.target)
		}
	}
	if !versionAtLeast("6.2", 6, 2) || !versionAtLeast("10.0", 6, 2) || versionAtLeast("6.1", 6, 2) {
		t.Error("versionAtLeast")
	}
}
