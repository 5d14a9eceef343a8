// Package ptx reads and writes PTX, the text assembly that nvcc, Triton and
// the CUDA driver's JIT consume, and finds which kernel parameters a kernel
// may store through.
//
// Contract:
//
//   - Parse turns PTX text into a Module: module directives, variables with
//     their initializers, functions (.entry kernels and .func device
//     functions) with their parameters and bodies, and every instruction with
//     its opcode, modifiers, guard predicate, structured operands, PTX line
//     and source position (the last .loc before it, its file named by .file).
//     Any input gives a Module or an *Error naming one PTX line; Parse never
//     panics (FuzzParse holds it to that).
//   - Module.WriteTo prints a Module back as PTX that parses to an equal
//     Module (PTX line numbers aside): comments and layout are not kept,
//     meaning is.
//   - Module.WriteSets says, for each kernel, which parameters it may store
//     through: MayWrite with the first store that proves it, or ReadOnly,
//     proved by a conservative dataflow over the whole kernel and the device
//     functions it calls. When in doubt the answer is MayWrite; docs/ptx.md
//     lists what is assumed and where the analysis gives up precision.
//
// A Module is plain data: callers may change it and print it again, but it
// is not safe for concurrent change. Modifiers slices may be shared between
// instructions of the same opcode text: replace them rather than changing
// them in place.
package ptx

import (
	"path"
	"strconv"
	"strings"
)

// Module is one parsed PTX module.
type Module struct {
	Version     string         // from .version, e.g. "9.0"; "" when absent
	Target      []string       // from .target, e.g. ["sm_90a"]
	AddressSize int            // from .address_size: 32 or 64; 0 when absent
	Files       map[int]string // .file index → path
	Items       []Item         // every module-scope element, in order
}

// Item is one module-scope element: a *Directive, *Var, *Function or *Section.
type Item interface{ item() }

// Stmt is one statement of a function body: an *Instruction, *Label, *Var,
// *Directive or *Block.
type Stmt interface{ stmt() }

// Directive is a directive kept by name and tokens: .version, .target,
// .address_size, .file, .loc, .pragma, .alias and, inside bodies, any other
// directive that ends at a semicolon (.callprototype, .branchtargets, ...).
type Directive struct {
	Name string   // without the dot: "loc", "pragma"
	Args []string // its tokens, punctuation included
}

// Section is a .section of debugging data, kept line by line.
type Section struct {
	Name  string   // ".debug_info"
	Lines []string // each line of its body, tokens joined by single spaces
}

// Function is an .entry (a kernel) or a .func (a device function).
type Function struct {
	Line       int      // PTX line of its .entry or .func
	Linkage    string   // "visible", "extern", "weak", "common" or ""
	Entry      bool     // .entry rather than .func
	Attributes []string // .attribute(...) groups, as text
	Name       string
	Returns    []*Param     // return parameters of a .func
	Params     []*Param     // parameters, in order
	Directives []*Directive // performance and other directives before the body (.maxntid, .reqntid, .noreturn, ...)
	HasBody    bool         // false for a declaration ending in ';'
	Body       []Stmt
}

// Param is one parameter of a function.
type Param struct {
	Space    string // "param" or "reg"
	Align    int    // .align of the parameter itself; 0 when not given
	Vector   int    // 2, 4 or 8 for .v2, .v4, .v8; 0 otherwise
	Type     string // "u64", "b8", "texref", ... (no dot)
	Ptr      bool   // .ptr: a pointer, with PtrSpace and PtrAlign about what it points to
	PtrSpace string // "global", "shared", ... or ""
	PtrAlign int    // .align after .ptr; 0 when not given
	Name     string
	Dims     []int // array dimensions; -1 for []
	// Offset and Size place a kernel's .param parameter in the parameter
	// buffer the driver passes to the launch (what cuFuncGetParamInfo
	// reports): each parameter at the next multiple of its alignment. Both
	// are -1 where the layout is unknown (an unsized array, a type of
	// unknown size, and every parameter after it).
	Offset, Size int
}

// Var is a variable declaration: .reg, .local, .shared, .global, .const or
// .param, at module scope or in a body.
type Var struct {
	Linkage    string   // "visible", "extern", "weak", "common" or ""
	Space      string   // "reg", "global", "shared", "local", "const", "param", "tex"
	Attributes []string // .attribute(...) groups, as text
	Align      int      // 0 when not given
	Vector     int      // 2, 4 or 8; 0 otherwise
	Type       string   // "b32", "pred", ... (no dot)
	Names      []VarName
}

// VarName is one name a declaration declares.
type VarName struct {
	Name  string
	Count int      // N of a parameterized name %r<N> (%r0 to %r{N-1}); 0 otherwise
	Dims  []int    // array dimensions; -1 for []
	Init  *Operand // initializer; nil when none
}

// Label is a label in a body.
type Label struct{ Name string }

// Block is an inline { } scope in a body.
type Block struct{ Body []Stmt }

// Instruction is one PTX instruction.
type Instruction struct {
	Line      int    // PTX line (1-based) in the text it was parsed from
	Guard     string // predicate register guarding it ("%p1"); "" when unguarded
	GuardNot  bool   // @!%p1
	Opcode    string // "ld", "st", "cp", "atom", ... (the part before the first dot)
	Modifiers []string
	Operands  []Operand
	Pos       Pos // source position from the last .loc before it in its function
}

// Pos is a position in the program's source, from .loc and .file.
type Pos struct {
	File int    // .file index; 0 when there is no .loc
	Path string // that file's path; "" when no .file names it
	Line int
	Col  int
}

// String gives "file.py:12:5" (the file's base name), "" without a position.
func (p Pos) String() string {
	if p.File == 0 && p.Line == 0 {
		return ""
	}
	name := path.Base(p.Path)
	if p.Path == "" {
		name = "file" + strconv.Itoa(p.File)
	}
	s := name + ":" + strconv.Itoa(p.Line)
	if p.Col > 0 {
		s += ":" + strconv.Itoa(p.Col)
	}
	return s
}

// OperandKind says what an Operand is.
type OperandKind uint8

// The operand kinds.
const (
	Reg      OperandKind = iota + 1 // a register: Name ("%rd1", "%tid.x", or a name declared by .reg)
	Imm                             // an immediate: Name holds its literal text ("-1", "0x10", "0f3F800000")
	Sym                             // a variable, parameter or function name, plus Offset
	LabelRef                        // a label of the function
	Addr                            // a memory address [Base+Offset], or [Base, Elems...] (texture, tensor map)
	Vec                             // a vector {Elems...}
	List                            // a parenthesized list (Elems...) of a call
	Pair                            // two destinations a|b (setp, shfl, elect)
)

// Operand is one operand of an instruction, or an initializer.
type Operand struct {
	Kind    OperandKind
	Name    string   // Reg, Sym, LabelRef: the name; Imm: the literal
	Not     bool     // Reg: a negated predicate !%p
	Generic bool     // Sym in an initializer: generic(name)
	Offset  int64    // Sym, Addr: the constant byte offset
	Base    *Operand // Addr: the register, symbol or immediate address
	Elems   []Operand
}

// Int gives an integer immediate's value.
func (o Operand) Int() (int64, bool) {
	if o.Kind != Imm {
		return 0, false
	}
	return parseInt(o.Name)
}

// parseInt reads a PTX integer literal: decimal, 0x hex, 0b binary or
// leading-zero octal, with an optional U suffix and minus sign.
func parseInt(s string) (int64, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	s = strings.TrimSuffix(s, "U")
	base := 10
	switch {
	case len(s) > 2 && (s[1] == 'x' || s[1] == 'X') && s[0] == '0':
		base, s = 16, s[2:]
	case len(s) > 2 && (s[1] == 'b' || s[1] == 'B') && s[0] == '0':
		base, s = 2, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, s = 8, s[1:]
	}
	u, err := strconv.ParseUint(s, base, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		return -int64(u), true
	}
	return int64(u), true
}

// Name gives the opcode with its modifiers: "ld.global.nc.v4.f32".
func (in *Instruction) Name() string {
	if len(in.Modifiers) == 0 {
		return in.Opcode
	}
	return in.Opcode + "." + strings.Join(in.Modifiers, ".")
}

// Has reports whether the instruction carries the modifier.
func (in *Instruction) Has(mod string) bool {
	for _, m := range in.Modifiers {
		if m == mod {
			return true
		}
	}
	return false
}

// Functions gives the module's functions in order.
func (m *Module) Functions() []*Function {
	var fs []*Function
	for _, it := range m.Items {
		if f, ok := it.(*Function); ok {
			fs = append(fs, f)
		}
	}
	return fs
}

// Function gives the function named name that has a body, else its
// declaration, else nil.
func (m *Module) Function(name string) *Function {
	var decl *Function
	for _, f := range m.Functions() {
		if f.Name != name {
			continue
		}
		if f.HasBody {
			return f
		}
		if decl == nil {
			decl = f
		}
	}
	return decl
}

// Instructions gives the function's instructions in order, those of inline
// scopes included.
func (f *Function) Instructions() []*Instruction {
	var out []*Instruction
	eachInstruction(f.Body, func(in *Instruction) { out = append(out, in) })
	return out
}

func eachInstruction(body []Stmt, fn func(*Instruction)) {
	for _, s := range body {
		switch s := s.(type) {
		case *Instruction:
			fn(s)
		case *Block:
			eachInstruction(s.Body, fn)
		}
	}
}

func (*Directive) item() {}
func (*Var) item()       {}
func (*Function) item()  {}
func (*Section) item()   {}

func (*Instruction) stmt() {}
func (*Label) stmt()       {}
func (*Var) stmt()         {}
func (*Directive) stmt()   {}
func (*Block) stmt()       {}
