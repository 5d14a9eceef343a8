package ptx

import (
	"reflect"
	"strings"
	"testing"
)

// withoutLines zeroes the PTX line numbers, which printing changes.
func withoutLines(m *Module) *Module {
	for _, f := range m.Functions() {
		f.Line = 0
		for _, in := range f.Instructions() {
			in.Line = 0
		}
	}
	return m
}

// roundTrip prints m, parses the text again and reports how the two
// modules differ; "" when they are equal.
func roundTrip(m *Module) (string, error) {
	text := m.String()
	again, err := Parse([]byte(text))
	if err != nil {
		return "", err
	}
	if text2 := again.String(); text2 != text {
		return "printing the reparsed module gives other text", nil
	}
	want, got := withoutLines(m), withoutLines(again)
	if !reflect.DeepEqual(want, got) {
		for i := range min(len(want.Items), len(got.Items)) {
			if !reflect.DeepEqual(want.Items[i], got.Items[i]) {
				return "item " + itemName(want.Items[i]) + " differs", nil
			}
		}
		return "the modules differ", nil
	}
	return "", nil
}

func itemName(it Item) string {
	switch it := it.(type) {
	case *Function:
		return it.Name
	case *Directive:
		return "." + it.Name
	case *Section:
		return it.Name
	case *Var:
		return it.Names[0].Name
	}
	return "?"
}

func TestRoundTrip(t *testing.T) {
	for _, file := range ptxFiles(t) {
		m := parseFile(t, file)
		if diff, err := roundTrip(m); err != nil || diff != "" {
			t.Errorf("%s: parse → print → parse: %v %s", file, err, diff)
		}
	}
}

// TestParseDemo checks the structure Parse gives gpurr's demo module.
func TestParseDemo(t *testing.T) {
	m := parseFile(t, demoPTX)
	if m.Version != "9.0" || !reflect.DeepEqual(m.Target, []string{"sm_80"}) || m.AddressSize != 64 {
		t.Fatalf("header: version %q target %v address size %d", m.Version, m.Target, m.AddressSize)
	}
	var names []string
	for _, f := range m.Functions() {
		names = append(names, f.Name)
		if !f.Entry || f.Linkage != "visible" || !f.HasBody {
			t.Errorf("%s: entry %v linkage %q body %v", f.Name, f.Entry, f.Linkage, f.HasBody)
		}
	}
	if want := []string{"gpurr_demo_fill", "gpurr_demo_saxpy", "gpurr_demo_reduce"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("functions %v, want %v", names, want)
	}
	partial, ok := m.Items[3].(*Var)
	if !ok || partial.Linkage != "extern" || partial.Space != "shared" || partial.Align != 16 || partial.Type != "b8" ||
		!reflect.DeepEqual(partial.Names, []VarName{{Name: "gpurr_demo_partial", Dims: []int{-1}}}) {
		t.Errorf("item 3: %#v", m.Items[3])
	}
	saxpy := m.Function("gpurr_demo_saxpy")
	var layout []int
	for _, p := range saxpy.Params {
		layout = append(layout, p.Offset, p.Size)
	}
	if want := []int{0, 4, 4, 4, 8, 8, 16, 8}; !reflect.DeepEqual(layout, want) {
		t.Errorf("saxpy parameter layout %v, want %v", layout, want)
	}
	ins := saxpy.Instructions()
	if len(ins) != 25 {
		t.Fatalf("saxpy: %d instructions, want 25", len(ins))
	}
	reg := func(name string) Operand { return Operand{Kind: Reg, Name: name} }
	checks := []struct {
		i    int
		want Instruction
	}{
		{2, Instruction{Line: 72, Opcode: "ld", Modifiers: []string{"param", "u64"}, Operands: []Operand{
			reg("%rd3"), {Kind: Addr, Base: &Operand{Kind: Sym, Name: "gpurr_demo_saxpy_param_2"}}}}},
		{9, Instruction{Line: 79, Guard: "%p1", Opcode: "bra", Operands: []Operand{{Kind: LabelRef, Name: "$L__BB1_3"}}}},
		{20, Instruction{Line: 93, Opcode: "st", Modifiers: []string{"global", "f32"}, Operands: []Operand{
			{Kind: Addr, Base: &Operand{Kind: Reg, Name: "%rd7"}}, reg("%f4")}}},
		{4, Instruction{Line: 74, Opcode: "mov", Modifiers: []string{"u32"}, Operands: []Operand{reg("%r1"), reg("%ntid.x")}}},
	}
	for _, c := range checks {
		if got := ins[c.i]; !reflect.DeepEqual(*got, c.want) {
			t.Errorf("instruction %d: %+v, want %+v", c.i, *got, c.want)
		}
	}
}

// TestParseOperands checks each kind of operand and instruction part.
func TestParseOperands(t *testing.T) {
	src := `.version 8.0
.target sm_90a, debug
.address_size 64
.visible .entry k(.param .u64 .ptr .global .align 8 k_p, .param .align 8 .b8 k_s[16])
{
	.reg .pred %p<4>;
	.reg .b32 %r<8>;
	.reg .f32 %f<8>;
	.reg .b64 %rd<8>;
	.reg .pred q;
	@!%p1 ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1+16];
	atom.global.add.u64 %rd3, [%rd1+-8], 1;
	st.shared.u32 [%r1-4], 0x1F;
	mov.f32 %f5, 0f3F800000;
	mov.f64 %fd1, 0d3FF0000000000000;
	add.f32 %f6, %f5, 1.5e-3;
	mov.u64 %rd2, k_s+8;
	setp.lt.s32 %p2|%p3, %r1, -7;
	@q bra.uni $L__BB0_1;
	cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd4, {%r2, %r3}], [%r4];
	ld.param.v2.u64 {%rd5, _}, [k_s];
	selp.b32 %r5, 1, 0, !%p1;
$L__BB0_1:
	ret;
}
`
	m, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m.Target, []string{"sm_90a", "debug"}) {
		t.Errorf("target %v", m.Target)
	}
	k := m.Function("k")
	if p := k.Params[0]; p.Type != "u64" || !p.Ptr || p.PtrSpace != "global" || p.PtrAlign != 8 || p.Align != 0 || p.Offset != 0 || p.Size != 8 {
		t.Errorf("param 0: %+v", *p)
	}
	if p := k.Params[1]; p.Type != "b8" || p.Align != 8 || !reflect.DeepEqual(p.Dims, []int{16}) || p.Offset != 8 || p.Size != 16 {
		t.Errorf("param 1: %+v", *p)
	}
	ins := k.Instructions()
	reg := func(name string) Operand { return Operand{Kind: Reg, Name: name} }
	imm := func(text string) Operand { return Operand{Kind: Imm, Name: text} }
	want := []Instruction{
		{Guard: "%p1", GuardNot: true, Opcode: "ld", Modifiers: []string{"global", "nc", "v4", "f32"}, Operands: []Operand{
			{Kind: Vec, Elems: []Operand{reg("%f1"), reg("%f2"), reg("%f3"), reg("%f4")}},
			{Kind: Addr, Base: &Operand{Kind: Reg, Name: "%rd1"}, Offset: 16}}},
		{Opcode: "atom", Modifiers: []string{"global", "add", "u64"}, Operands: []Operand{
			reg("%rd3"), {Kind: Addr, Base: &Operand{Kind: Reg, Name: "%rd1"}, Offset: -8}, imm("1")}},
		{Opcode: "st", Modifiers: []string{"shared", "u32"}, Operands: []Operand{
			{Kind: Addr, Base: &Operand{Kind: Reg, Name: "%r1"}, Offset: -4}, imm("0x1F")}},
		{Opcode: "mov", Modifiers: []string{"f32"}, Operands: []Operand{reg("%f5"), imm("0f3F800000")}},
		{Opcode: "mov", Modifiers: []string{"f64"}, Operands: []Operand{reg("%fd1"), imm("0d3FF0000000000000")}},
		{Opcode: "add", Modifiers: []string{"f32"}, Operands: []Operand{reg("%f6"), reg("%f5"), imm("1.5e-3")}},
		{Opcode: "mov", Modifiers: []string{"u64"}, Operands: []Operand{reg("%rd2"), {Kind: Sym, Name: "k_s", Offset: 8}}},
		{Opcode: "setp", Modifiers: []string{"lt", "s32"}, Operands: []Operand{
			{Kind: Pair, Elems: []Operand{reg("%p2"), reg("%p3")}}, reg("%r1"), imm("-7")}},
		{Guard: "q", Opcode: "bra", Modifiers: []string{"uni"}, Operands: []Operand{{Kind: LabelRef, Name: "$L__BB0_1"}}},
		{Opcode: "cp", Modifiers: []string{"async", "bulk", "tensor", "2d", "global", "shared::cta", "bulk_group"}, Operands: []Operand{
			{Kind: Addr, Base: &Operand{Kind: Reg, Name: "%rd4"}, Elems: []Operand{{Kind: Vec, Elems: []Operand{reg("%r2"), reg("%r3")}}}},
			{Kind: Addr, Base: &Operand{Kind: Reg, Name: "%r4"}}}},
		{Opcode: "ld", Modifiers: []string{"param", "v2", "u64"}, Operands: []Operand{
			{Kind: Vec, Elems: []Operand{reg("%rd5"), {Kind: Sym, Name: "_"}}},
			{Kind: Addr, Base: &Operand{Kind: Sym, Name: "k_s"}}}},
		{Opcode: "selp", Modifiers: []string{"b32"}, Operands: []Operand{reg("%r5"), imm("1"), imm("0"), {Kind: Reg, Name: "%p1", Not: true}}},
		{Opcode: "ret"},
	}
	if len(ins) != len(want) {
		t.Fatalf("%d instructions, want %d", len(ins), len(want))
	}
	for i := range want {
		got := *ins[i]
		got.Line = 0
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("instruction %d: %+v\nwant %+v", i, got, want[i])
		}
	}
	if n, ok := ins[2].Operands[1].Int(); !ok || n != 31 {
		t.Errorf("Int of 0x1F: %d %v", n, ok)
	}
	if got := ins[9].Name(); got != "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" || !ins[9].Has("tensor") {
		t.Errorf("Name %q", got)
	}
}

// TestParsePositions checks that instructions carry the source position of
// the last .loc before them, with the path of a .file that comes later.
func TestParsePositions(t *testing.T) {
	m := parseFile(t, "testdata/triton_style.ptx")
	if got := m.Files[1]; got != "/home/dev/kernels/vecadd.py" {
		t.Fatalf("file 1: %q", got)
	}
	byLine := map[int]Pos{}
	for _, in := range m.Function("add_kernel").Instructions() {
		byLine[in.Line] = in.Pos
	}
	for line, want := range map[int]Pos{
		34: {File: 1, Path: "/home/dev/kernels/vecadd.py", Line: 7, Col: 0},
		39: {File: 1, Path: "/home/dev/kernels/vecadd.py", Line: 9, Col: 24},
		94: {File: 1, Path: "/home/dev/kernels/vecadd.py", Line: 15, Col: 30},
		97: {File: 1, Path: "/home/dev/kernels/vecadd.py", Line: 15, Col: 4},
	} {
		if got, ok := byLine[line]; !ok || got != want {
			t.Errorf("instruction at line %d: %+v (found %v), want %+v", line, got, ok, want)
		}
	}
	if got := byLine[94].String(); got != "vecadd.py:15:30" {
		t.Errorf("Pos.String %q", got)
	}
	var sections []string
	for _, it := range m.Items {
		if s, ok := it.(*Section); ok {
			sections = append(sections, s.Name)
			if s.Name == ".debug_info" && s.Lines[3] != ".b32 .debug_abbrev" {
				t.Errorf(".debug_info line 3: %q", s.Lines[3])
			}
		}
	}
	if want := []string{".debug_abbrev", ".debug_info", ".debug_macinfo"}; !reflect.DeepEqual(sections, want) {
		t.Errorf("sections %v, want %v", sections, want)
	}
}

// TestParseModuleVars checks initializers and the .loc attributes of
// inlined code.
func TestParseModuleVars(t *testing.T) {
	m := parseFile(t, "testdata/module_vars.ptx")
	vars := map[string]VarName{}
	for _, it := range m.Items {
		if v, ok := it.(*Var); ok {
			for _, n := range v.Names {
				vars[n.Name] = n
			}
		}
	}
	imm := func(text string) Operand { return Operand{Kind: Imm, Name: text} }
	vec := func(elems ...Operand) *Operand { return &Operand{Kind: Vec, Elems: elems} }
	for name, want := range map[string]*Operand{
		"scale":     {Kind: Imm, Name: "0f3FC00000"},
		"grid2":     vec(*vec(imm("1"), imm("2")), *vec(imm("3"), imm("4"))),
		"table_ptr": {Kind: Sym, Name: "table", Generic: true, Offset: 4},
		"ptrs":      vec(Operand{Kind: Sym, Name: "table"}, Operand{Kind: Sym, Name: "hits"}),
		"hits":      nil,
	} {
		if got := vars[name].Init; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: initializer %+v, want %+v", name, got, want)
		}
	}
	if got := vars["grid2"].Dims; !reflect.DeepEqual(got, []int{2, 2}) {
		t.Errorf("grid2 dims %v", got)
	}

	src := `.version 8.0
.target sm_80
.address_size 64
.entry k()
{
	.loc 2 10 3, function_name $L__info_string0, inlined_at 1 40 7
	ret;
}
.file 1 "main.cu", 1700000000, 2048
.file 2 "inc/helper.cuh"
`
	m, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	in := m.Function("k").Instructions()[0]
	if want := (Pos{File: 2, Path: "inc/helper.cuh", Line: 10, Col: 3}); in.Pos != want {
		t.Errorf("pos %+v, want %+v", in.Pos, want)
	}
	if diff, err := roundTrip(m); err != nil || diff != "" {
		t.Errorf("round trip: %v %s", err, diff)
	}
}

// TestParseErrors checks that malformed PTX gives a one-line error naming
// the line where reading stopped.
func TestParseErrors(t *testing.T) {
	head := ".version 8.0\n.target sm_80\n.address_size 64\n"
	for _, c := range []struct {
		src, want string
	}{
		{head + ".entry k()\n{\n\tret\n}\n", "ptx line 7: expected an operand, found \"}\""},
		{head + ".entry k()\n{\n\tmov.u32 %r1, 0x;\n}\n", "ptx line 6: malformed number \"0x\""},
		{head + "/* never closed\n.entry k()\n", "ptx line 4: unterminated /* comment"},
		{head + ".entry k()\n{\n\tret;\n", "ptx line 7: unterminated body: missing }"},
		{head + ".bogus 1\n", "ptx line 4: unsupported module-scope \".bogus\""},
		{head + ".entry k(.param .u64 a\n{\n}\n", "ptx line 5: expected ,, found \"{\""},
		{head + ".file 1 \"a.cu\n", "ptx line 4: unterminated string"},
		{head + ".entry k()\n{\n\tld.global.u32 %r1, [%rd1+x];\n}\n", "ptx line 6: expected an offset, found \"x\""},
		{head + ".entry k()\n{\n\tst.global.u32 [%rd1], #1;\n}\n", "ptx line 6: unexpected character '#'"},
		{head + ".entry k()\n.maxntid 1\n.visible .entry j()\n{\n}\n", "ptx line 6: expected { or ; after the header of k, found \".visible\""},
		{head + ".global .u32 x = {" + strings.Repeat("{", 200) + "\n", "ptx line 4: nested more than 100 deep"},
	} {
		_, err := Parse([]byte(c.src))
		if err == nil {
			t.Errorf("%q: no error, want %q", c.src, c.want)
			continue
		}
		if err.Error() != c.want {
			t.Errorf("%q: %q, want %q", c.src, err, c.want)
		}
		if _, ok := err.(*Error); !ok || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %T %q is not a one-line *Error", c.src, err, err)
		}
	}
}

// TestPrintEdits checks that a module changed in place prints and parses
// back with the change, as the race hunter's instrumentation will do.
func TestPrintEdits(t *testing.T) {
	m := parseFile(t, demoPTX)
	f := m.Function("gpurr_demo_fill")
	delay := &Instruction{Opcode: "nanosleep", Modifiers: []string{"u32"}, Operands: []Operand{{Kind: Imm, Name: "100"}}}
	f.Body = append([]Stmt{delay}, f.Body...)
	again, err := Parse([]byte(m.String()))
	if err != nil {
		t.Fatal(err)
	}
	ins := again.Function("gpurr_demo_fill").Instructions()
	if ins[0].Name() != "nanosleep.u32" || len(ins) != len(f.Instructions()) {
		t.Errorf("first instruction %s, %d instructions", ins[0].Name(), len(ins))
	}
}
