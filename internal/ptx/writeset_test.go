package ptx

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func writeSet(t *testing.T, m *Module, kernel string) WriteSet {
	t.Helper()
	for _, ws := range m.WriteSets() {
		if ws.Kernel == kernel {
			return ws
		}
	}
	t.Fatalf("no write set for kernel %s", kernel)
	return WriteSet{}
}

// TestWriteSetsDemo holds the analysis to what gpurr's demo kernels do
// (internal/kernels/src/demo.cu): fill writes x, saxpy writes y and reads x,
// reduce writes out only.
func TestWriteSetsDemo(t *testing.T) {
	m := parseFile(t, demoPTX)
	want := map[string][]Verdict{
		"gpurr_demo_fill":   {MayWrite, ReadOnly, ReadOnly, ReadOnly}, // x, n, mul, add
		"gpurr_demo_saxpy":  {ReadOnly, ReadOnly, ReadOnly, MayWrite}, // n, a, x, y
		"gpurr_demo_reduce": {ReadOnly, ReadOnly, MayWrite},           // x, n, out
	}
	sets := m.WriteSets()
	if len(sets) != len(want) {
		t.Fatalf("%d write sets, want %d", len(sets), len(want))
	}
	for _, ws := range sets {
		verdicts, ok := want[ws.Kernel]
		if !ok {
			t.Fatalf("unexpected kernel %s", ws.Kernel)
		}
		if ws.Any {
			t.Errorf("%s: may write any region: %s", ws.Kernel, ws.AnyReason)
		}
		if len(ws.Params) != len(verdicts) {
			t.Fatalf("%s: %d parameters, want %d", ws.Kernel, len(ws.Params), len(verdicts))
		}
		for i, p := range ws.Params {
			if p.Verdict != verdicts[i] {
				t.Errorf("%s %s: %v (%s), want %v", ws.Kernel, p.Name, p.Verdict, p.Reason, verdicts[i])
			}
		}
	}
	saxpy := writeSet(t, m, "gpurr_demo_saxpy")
	y := saxpy.Param("gpurr_demo_saxpy_param_3")
	if !strings.HasPrefix(y.Reason, "st.global.f32 at PTX line 93 stores through %rd7, derived from parameter gpurr_demo_saxpy_param_3: ld.param.u64 (line 73)") {
		t.Errorf("saxpy y: reason %q", y.Reason)
	}
	if y.Offset != 16 || y.Size != 8 || !saxpy.MayWriteAt(16, 8) || saxpy.MayWriteAt(8, 8) || saxpy.MayWriteAt(0, 8) {
		t.Errorf("saxpy layout: y at %d+%d; MayWriteAt(16,8)=%v (8,8)=%v (0,8)=%v", y.Offset, y.Size,
			saxpy.MayWriteAt(16, 8), saxpy.MayWriteAt(8, 8), saxpy.MayWriteAt(0, 8))
	}
	reduce := writeSet(t, m, "gpurr_demo_reduce")
	if r := reduce.Params[2].Reason; !strings.HasPrefix(r, "atom.global.add.u64 at PTX line 174") {
		t.Errorf("reduce out: reason %q", r)
	}
}

// want lines in testdata/*.ptx state the expected write sets:
//
//	// want KERNEL any-region|params-only ["reason substring"]
//	// want KERNEL PARAM may-write|read-only ["reason substring"]
//	// want KERNEL PARAM words OFF+SIZE[,OFF+SIZE]|all
var wantLine = regexp.MustCompile(`(?m)^// want ([^"\n]*?)\s*("(?:[^"\\]|\\.)*")?\s*$`)

// TestWriteSetsTestdata checks every kernel of every test file against the
// file's want lines, which must cover each kernel and each parameter.
func TestWriteSetsTestdata(t *testing.T) {
	for _, file := range testdataFiles(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, m := loadFile(t, file)
			sets := map[string]WriteSet{}
			for _, ws := range m.WriteSets() {
				sets[ws.Kernel] = ws
			}
			covered := map[string]bool{}
			for _, w := range wantLine.FindAllStringSubmatch(string(src), -1) {
				substr := ""
				if w[2] != "" {
					var err error
					if substr, err = strconv.Unquote(w[2]); err != nil {
						t.Fatalf("want line %q: %v", w[0], err)
					}
				}
				checkWant(t, sets, strings.Fields(w[1]), substr, covered)
			}
			if len(covered) == 0 {
				t.Fatal("the file states no want lines")
			}
			for _, ws := range sets {
				if !covered[ws.Kernel] {
					t.Errorf("%s: no any-region or params-only want line", ws.Kernel)
				}
				for _, p := range ws.Params {
					if !covered[ws.Kernel+" "+p.Name] {
						t.Errorf("%s %s: no want line for its verdict (%v: %s)", ws.Kernel, p.Name, p.Verdict, p.Reason)
					}
				}
			}
		})
	}
}

func checkWant(t *testing.T, sets map[string]WriteSet, f []string, substr string, covered map[string]bool) {
	t.Helper()
	if len(f) < 2 {
		t.Fatalf("malformed want line %q", f)
	}
	ws, ok := sets[f[0]]
	if !ok {
		t.Errorf("want line names kernel %s, which the file does not define", f[0])
		return
	}
	if len(f) == 2 && (f[1] == "any-region" || f[1] == "params-only") {
		covered[ws.Kernel] = true
		if ws.Any != (f[1] == "any-region") {
			t.Errorf("%s: Any = %v (%s), want %s", ws.Kernel, ws.Any, ws.AnyReason, f[1])
		}
		if !strings.Contains(ws.AnyReason, substr) {
			t.Errorf("%s: any-region reason %q lacks %q", ws.Kernel, ws.AnyReason, substr)
		}
		return
	}
	if len(f) < 3 {
		t.Fatalf("malformed want line %q", f)
	}
	p := ws.Param(f[1])
	if p == nil {
		t.Errorf("%s has no parameter %s", ws.Kernel, f[1])
		return
	}
	switch {
	case len(f) == 3 && (f[2] == "may-write" || f[2] == "read-only"):
		covered[ws.Kernel+" "+p.Name] = true
		want := map[string]Verdict{"may-write": MayWrite, "read-only": ReadOnly}[f[2]]
		if p.Verdict != want {
			t.Errorf("%s %s: %v (%s), want %v", ws.Kernel, p.Name, p.Verdict, p.Reason, want)
		}
		if !strings.Contains(p.Reason, substr) {
			t.Errorf("%s %s: reason %q lacks %q", ws.Kernel, p.Name, p.Reason, substr)
		}
	case len(f) == 4 && f[2] == "words":
		if got := wordsText(p.Words); got != f[3] {
			t.Errorf("%s %s: words %s, want %s", ws.Kernel, p.Name, got, f[3])
		}
	default:
		t.Fatalf("malformed want line %q", f)
	}
}

func wordsText(ws []Range) string {
	if ws == nil {
		return "all"
	}
	var parts []string
	for _, r := range ws {
		parts = append(parts, fmt.Sprintf("%d+%d", r.Off, r.Size))
	}
	return strings.Join(parts, ",")
}

var (
	stepRef = regexp.MustCompile(`([^\s(]+) \(line (\d+)\)`)
	siteRef = regexp.MustCompile(`(\S+) at PTX line (\d+)`)
)

// TestReasonLines checks that every instruction a reason names by PTX line
// is the instruction on that line of the file.
func TestReasonLines(t *testing.T) {
	for _, file := range ptxFiles(t) {
		src, m := loadFile(t, file)
		lines := strings.Split(string(src), "\n")
		refs := 0
		for _, ws := range m.WriteSets() {
			reasons := []string{ws.AnyReason}
			for _, p := range ws.Params {
				reasons = append(reasons, p.Reason)
			}
			for _, r := range reasons {
				for _, re := range []*regexp.Regexp{stepRef, siteRef} {
					for _, ref := range re.FindAllStringSubmatch(r, -1) {
						refs++
						n, _ := strconv.Atoi(ref[2])
						if n < 1 || n > len(lines) {
							t.Errorf("%s: %q names line %d, past the end", file, ref[0], n)
							continue
						}
						// The opcode text, after an optional guard, starts the line.
						text := strings.TrimSpace(lines[n-1])
						if strings.HasPrefix(text, "@") {
							text = strings.TrimSpace(text[strings.IndexAny(text, " \t"):])
						}
						if f := strings.Fields(text); len(f) == 0 || f[0] != ref[1] {
							t.Errorf("%s: %q, but line %d is %q", file, ref[0], n, lines[n-1])
						}
					}
				}
			}
		}
		if refs == 0 {
			t.Errorf("%s: no reason names a line", file)
		}
	}
}

// TestMayWriteAt checks the question the agent asks: may the kernel store
// through the pointer in these bytes of its parameter buffer?
func TestMayWriteAt(t *testing.T) {
	m := parseFile(t, "testdata/struct_param.ptx")
	for _, c := range []struct {
		kernel    string
		off, size int
		want      bool
	}{
		{"direct", 0, 8, true}, // out, the first pointer of the structure
		{"direct", 8, 8, false},
		{"direct", 16, 8, false},
		{"direct", 24, 8, false},
		{"direct", 32, 4, false}, // the float after the structure
		{"direct", 4, 8, true},   // overlaps out
		{"shifted", 24, 8, true},
		{"shifted", 0, 24, false},
		{"indexed", 8, 8, true}, // a run-time index: any word of the structure
		{"indexed", 32, 4, false},
	} {
		ws := writeSet(t, m, c.kernel)
		if got := ws.MayWriteAt(c.off, c.size); got != c.want {
			t.Errorf("%s: MayWriteAt(%d, %d) = %v, want %v", c.kernel, c.off, c.size, got, c.want)
		}
	}
	chase := writeSet(t, parseFile(t, "testdata/pointer_chase.ptx"), "chase")
	if !chase.MayWriteAt(16, 4) {
		t.Error("chase may write any region, so every range")
	}
}

// TestWriteSetsMemcap holds the analysis to gpurr's memory-capture kernels
// (internal/kernels/src/hash.cu): they store through the pointers of the
// job structure they take by value, at run-time indexes, and through no
// pointer they read from memory; their slot and ticket indexes come from
// 32-bit shared and atomic values.
func TestWriteSetsMemcap(t *testing.T) {
	m := parseFile(t, "../kernels/ptx/hash.ptx")
	for _, name := range []string{"gpurr_memcap", "gpurr_memcap_nan"} {
		ws := writeSet(t, m, name)
		if ws.Any {
			t.Errorf("%s: may write any region: %s", name, ws.AnyReason)
		}
		if len(ws.Params) != 1 || ws.Params[0].Verdict != MayWrite || ws.Params[0].Words != nil || ws.Params[0].Size != 2120 { // sizeof(gpurr_batch)
			t.Errorf("%s: %+v", name, ws.Params)
		}
	}
}

// TestWriteSetsScale checks that the analysis stays linear on a long
// chain of copies written backwards (each defined after its use), which a
// pass-until-nothing-changes fixpoint would take quadratic time on, and
// that it ends on a loop walking a parameter's address, whose offsets it
// widens to "unknown".
func TestWriteSetsScale(t *testing.T) {
	const n = 20000
	var b strings.Builder
	b.WriteString(".version 8.0\n.target sm_80\n.address_size 64\n")
	fmt.Fprintf(&b, ".visible .entry chain(.param .u64 chain_p, .param .u64 chain_q)\n{\n\t.reg .b64 %%rd<%d>;\n", n+2)
	b.WriteString("\tst.global.u32 [%rd0], 1;\n")
	for i := range n {
		fmt.Fprintf(&b, "\tmov.b64 %%rd%d, %%rd%d;\n", i, i+1)
	}
	fmt.Fprintf(&b, "\tld.param.u64 %%rd%d, [chain_p];\n\tret;\n}\n", n)
	b.WriteString(`.visible .entry walk(.param .align 8 .b8 walk_s[256])
{
	.reg .pred %p<2>;
	.reg .b64 %rd<4>;
	mov.b64 %rd1, walk_s;
$L__loop:
	ld.param.u64 %rd2, [%rd1+8];
	st.global.u32 [%rd2], 0;
	add.s64 %rd1, %rd1, 16;
	setp.ne.s64 %p1, %rd1, 0;
	@%p1 bra $L__loop;
	ret;
}
`)
	m, err := Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sets := m.WriteSets()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the analysis took %v", d)
	}
	chain := sets[0]
	if chain.Any || chain.Params[0].Verdict != MayWrite || chain.Params[1].Verdict != ReadOnly {
		t.Errorf("chain: %+v", chain)
	}
	walk := sets[1]
	if walk.Any || walk.Params[0].Verdict != MayWrite || walk.Params[0].Words != nil {
		t.Errorf("walk: %+v", walk)
	}
}
