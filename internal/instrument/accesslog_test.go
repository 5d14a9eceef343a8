package instrument

import (
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/ptx"
)

// The access log watches the kernel's global and shared accesses, notes each in a block
// before it (a shared one always, a global one within the watched range), counts barriers
// after them, and leaves the kernel's own instructions as they were, in order.
func TestInjectAccessLog(t *testing.T) {
	m := demo(t)
	const kernel = "gpurr_demo_reduce"
	var own []string
	for _, in := range m.Function(kernel).Instructions() {
		own = append(own, in.Name()+" "+operandText(in.Operands))
	}
	watched, err := InjectAccessLog(m, kernel)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range watched {
		names = append(names, p.Instr.Name())
	}
	if got, want := strings.Join(names, " "), "ld.global.f32 st.shared.u64 ld.shared.u64 ld.shared.u64 st.shared.u64 ld.shared.u64 atom.global.add.u64"; got != want {
		t.Errorf("watched %q, want %q", got, want)
	}
	text := m.String()
	again, err := ptx.Parse([]byte(text))
	if err != nil {
		t.Fatalf("the logged kernel does not parse again: %v\n%s", err, text)
	}
	for _, want := range []string{
		".visible .global .align 8 .u64 gpurr_probe_buf;",
		".visible .global .align 8 .u64 gpurr_log_lo;",
		".visible .global .align 4 .u32 gpurr_log_cap;",
		"cvt.u64.u32 %gpurr_a, %r7;",                              // a shared address in a 32-bit register
		"mov.u64 %gpurr_a, gpurr_demo_partial;",                   // a shared variable's
		"setp.lt.and.u64 %gpurr_q, %gpurr_a, %gpurr_x, %gpurr_q;", // a global one, in the range
		"@%gpurr_q atom.global.add.u32 %gpurr_n, [%gpurr_b], 1;",
		"add.u32 %gpurr_epoch, %gpurr_epoch, 1;",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in the logged kernel", want)
		}
	}
	// Each bar.sync is followed by the epoch's increment.
	if n, inc := strings.Count(text, "bar.sync"), strings.Count(text, "add.u32 %gpurr_epoch"); n != 2 || inc != 2 {
		t.Errorf("%d barriers, %d epoch increments", n, inc)
	}
	var kept []string
	for _, in := range again.Function(kernel).Instructions() {
		if !ours(in) {
			kept = append(kept, in.Name()+" "+operandText(in.Operands))
		}
	}
	if strings.Join(kept, "\n") != strings.Join(own, "\n") {
		t.Errorf("the kernel's own instructions changed:\n%s\nwant\n%s", strings.Join(kept, "\n"), strings.Join(own, "\n"))
	}
	// The delays go in after it, at points picked before it.
	sel, _ := ParseSelection("global-load")
	m = demo(t)
	points := Points(m.Function(kernel), sel)
	if _, err := InjectAccessLog(m, kernel); err != nil {
		t.Fatal(err)
	}
	if err := InjectDelays(m, kernel, points, Delay{Nanoseconds: 1000, Fraction: 0.5, Placement: PerWarp}); err != nil {
		t.Fatal(err)
	}
	if _, err := ptx.Parse([]byte(m.String())); err != nil {
		t.Fatal(err)
	}
}

func TestAccessLogGuarded(t *testing.T) {
	src := ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n.reg .pred %p<2>;\n.reg .b64 %rd<3>;\n.reg .b32 %r<2>;\nld.param.u64 %rd1, [p];\nsetp.eq.u64 %p1, %rd1, 0;\n@!%p1 st.global.u32 [%rd1+4], %r1;\nret;\n}\n"
	m, err := ptx.Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := InjectAccessLog(m, "k"); err != nil {
		t.Fatal(err)
	}
	text := m.String()
	for _, want := range []string{"mov.b64 %gpurr_a, %rd1;", "add.s64 %gpurr_a, %gpurr_a, 4;", "not.pred %gpurr_g, %p1;", "st.global.u32 [%gpurr_e+44], 1025;"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	if _, err := InjectAccessLog(m, "nope"); err == nil {
		t.Error("no such kernel: no error")
	}
}
