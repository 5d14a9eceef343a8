package ptx

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Verdict says whether a kernel may store through a parameter.
type Verdict uint8

// The verdicts.
const (
	// ReadOnly: proved. No store, atomic, reduction, bulk copy or call of
	// the kernel writes through an address derived from the parameter.
	ReadOnly Verdict = iota + 1
	// MayWrite: some store may write through it, or the analysis could not
	// prove otherwise.
	MayWrite
)

func (v Verdict) String() string {
	switch v {
	case ReadOnly:
		return "proved read-only"
	case MayWrite:
		return "may write"
	}
	return fmt.Sprintf("Verdict(%d)", v)
}

// WriteSet is what one kernel may store through.
type WriteSet struct {
	Kernel string
	Params []ParamWrite
	// Any is set when the kernel may store through an address that is not
	// derived from a parameter (a pointer read from memory, an absolute
	// address, a call into code the module does not hold): it may then
	// write any region, and every parameter that can hold a pointer is
	// MayWrite. AnyReason names the first such store.
	Any       bool
	AnyReason string
}

// ParamWrite is the verdict on one kernel parameter.
type ParamWrite struct {
	Name         string
	Index        int
	Offset, Size int // the parameter's place in the parameter buffer; -1 when unknown
	Verdict      Verdict
	Reason       string // the first store that may write through it, or why it is read-only
	// Words lists, for a MayWrite parameter, the byte ranges within it
	// whose values reach a store address; nil means any part of it (an
	// offset the analysis could not follow, or Any).
	Words []Range
}

// Range is a byte range [Off, Off+Size).
type Range struct{ Off, Size int }

// Param gives the verdict on the named parameter, nil when there is none.
func (w *WriteSet) Param(name string) *ParamWrite {
	for i := range w.Params {
		if w.Params[i].Name == name {
			return &w.Params[i]
		}
	}
	return nil
}

// MayWriteAt reports whether the kernel may store through a pointer held
// in bytes [off, off+size) of its parameter buffer: always when Any, or
// when a parameter's layout is unknown; else when the range overlaps a
// MayWrite parameter's written words.
func (w *WriteSet) MayWriteAt(off, size int) bool {
	if w.Any {
		return true
	}
	overlaps := func(a, an, b, bn int) bool { return a < b+bn && b < a+an }
	for _, p := range w.Params {
		if p.Offset < 0 {
			return true
		}
		if p.Verdict != MayWrite || !overlaps(off, size, p.Offset, p.Size) {
			continue
		}
		if p.Words == nil {
			return true
		}
		for _, r := range p.Words {
			if overlaps(off, size, p.Offset+r.Off, r.Size) {
				return true
			}
		}
	}
	return false
}

// WriteSets analyses every kernel (.entry with a body) of the module.
func (m *Module) WriteSets() []WriteSet {
	mi := newModInfo(m)
	var funcs []*Function
	for _, f := range m.Functions() {
		if !f.Entry && f.HasBody && mi.funcs[f.Name] == f {
			funcs = append(funcs, f)
		}
	}
	// Summaries of device functions grow monotonically from "writes
	// nothing" to a fixpoint: a function is analysed again when a callee's
	// summary grows. Should that take too long (deep mutual recursion),
	// every call is treated as a call into unknown code.
	callers := map[*Function][]*Function{}
	for _, f := range funcs {
		eachInstruction(f.Body, func(in *Instruction) {
			if in.Opcode == "call" {
				if c := parseCall(in, mi).callee; c != nil {
					callers[c] = append(callers[c], f)
				}
			}
		})
	}
	queue := slices.Clone(funcs)
	queued := map[*Function]bool{}
	for _, f := range funcs {
		queued[f] = true
	}
	for budget := 8*len(funcs) + 16; len(queue) > 0; budget-- {
		if budget == 0 {
			mi.sums = nil
			break
		}
		f := queue[0]
		queue = queue[1:]
		queued[f] = false
		s := analyze(mi, f).summary()
		if s.same(mi.sums[f]) {
			continue
		}
		mi.sums[f] = s
		for _, c := range callers[f] {
			if !queued[c] {
				queued[c] = true
				queue = append(queue, c)
			}
		}
	}
	var out []WriteSet
	for _, f := range m.Functions() {
		if f.Entry && f.HasBody {
			out = append(out, analyze(mi, f).writeSet(mi))
		}
	}
	return out
}

type modInfo struct {
	funcs    map[string]*Function // by name, the definition over a declaration
	vars     map[string]string    // module-scope variable → its state space
	ptrBytes int
	sums     map[*Function]*summary // nil: calls are not followed
}

func newModInfo(m *Module) *modInfo {
	mi := &modInfo{funcs: map[string]*Function{}, vars: map[string]string{}, ptrBytes: 8, sums: map[*Function]*summary{}}
	if m.AddressSize != 64 {
		mi.ptrBytes = 4 // 32-bit, or unstated: the smaller, the more parameters count as pointers
	}
	for _, it := range m.Items {
		switch it := it.(type) {
		case *Function:
			if old := mi.funcs[it.Name]; old == nil || (!old.HasBody && it.HasBody) {
				mi.funcs[it.Name] = it
			}
		case *Var:
			for _, n := range it.Names {
				mi.vars[n.Name] = it.Space
			}
		}
	}
	return mi
}

// summary is what a device function does to its callers: the parameters
// it stores through, whether it may write anywhere, and where its return
// values come from (in its own terms: oParam means "from that argument").
type summary struct {
	writes    []string // per parameter: why it is stored through; "" when it is not
	anyReason string
	rets      [][]origin
}

func (s *summary) same(o *summary) bool {
	if o == nil || len(s.writes) != len(o.writes) || (s.anyReason == "") != (o.anyReason == "") || len(s.rets) != len(o.rets) {
		return false
	}
	for i := range s.writes {
		if (s.writes[i] == "") != (o.writes[i] == "") {
			return false
		}
	}
	for i := range s.rets {
		if !slices.Equal(s.rets[i], o.rets[i]) {
			return false
		}
	}
	return true
}

type originKind uint8

const (
	oParam     originKind = iota // the bytes [off, off+size) of parameter param (off -1: somewhere in it; size -1: pieces of it made pointer-wide)
	oParamAddr                   // the address of parameter param, plus off (-1: unknown)
	oLoaded                      // a pointer-wide value read from memory other than a parameter: anything
	oIndex                       // a value read from memory, narrower than a pointer: an index, not a pointer
	oLocal                       // an address in the thread's local memory
	oStatic                      // the address of a variable or function other than a parameter
)

type origin struct {
	kind  originKind
	param int32
	off   int32
	size  int32
}

// witness says how an origin first reached a cell: by instruction insn
// (-1: it was there from the start), from cell from (-1: insn made it).
type witness struct {
	insn  int32
	from  int32
	fromO origin
}

type cell struct {
	order []origin
	wits  []witness        // wits[k] is how order[k] arrived
	index map[origin]int32 // position in order, once the cell holds many origins
	// narrowIn is set on memory cells (.param variables, local memory)
	// that narrower-than-pointer stores wrote: read back at pointer width,
	// their pieces may make a pointer.
	narrowIn bool
}

// find gives the position of o in the cell, -1 when it is not there.
func (cl *cell) find(o origin) int {
	if cl.index != nil {
		if k, ok := cl.index[o]; ok {
			return int(k)
		}
		return -1
	}
	for k, e := range cl.order {
		if e == o {
			return k
		}
	}
	return -1
}

func (cl *cell) has(o origin) bool { return cl.find(o) >= 0 }

// maxOffsets bounds the distinct offsets a cell tracks for one parameter;
// past it they widen to "unknown", so that loops end.
const maxOffsets = 16

// analysis is the flow-insensitive dataflow over one function: every
// register, every .param variable and the thread's local memory is a cell
// holding the set of origins any value in it may have.
type analysis struct {
	mi      *modInfo
	fn      *Function
	insns   []*Instruction
	cells   []cell
	ids     map[string]int32
	params  map[string]int    // the function's own .param parameters
	vars    map[string]string // variables declared in the body (by scoped key) → state space
	scopes  []scope
	scopeOf []int32 // per instruction
	local   int32
	users   [][]int32 // per cell: the instructions that read it
	queue   []int32   // instructions to run again
	queued  []bool

	writes    []paramAcc // per parameter
	anyReason string
	sites     int // memory writes and calls examined
}

type paramAcc struct {
	reason string
	whole  bool
	words  []Range
}

// scope is a { } block's declarations: each name's key, unique in the
// function, so that the .param variables and registers nvcc and inline asm
// declare again in every block stay apart.
type scope struct {
	parent  int32
	names   map[string]string
	counted map[string]int // %r<N> declarations: prefix → N
}

func analyze(mi *modInfo, f *Function) *analysis {
	insns := f.Instructions()
	// About one register per instruction: size the cells once.
	a := &analysis{mi: mi, fn: f, insns: insns, ids: make(map[string]int32, len(insns)+8),
		cells: make([]cell, 0, len(insns)+8), users: make([][]int32, 0, len(insns)+8),
		params: map[string]int{}, vars: map[string]string{}}
	a.scopeOf = make([]int32, len(a.insns))
	a.writes = make([]paramAcc, len(f.Params))
	a.local = a.cell("<local>")
	for i, p := range f.Params {
		if p.Space == "param" {
			a.params[p.Name] = i
		} else {
			// A .reg parameter is its value from the start.
			a.add(a.cell(p.Name), origin{kind: oParam, param: int32(i), off: 0, size: int32(max(typeSizes[p.Type], 0))}, witness{insn: -1, from: -1})
		}
	}
	n := 0
	var collect func(body []Stmt, sc int32)
	collect = func(body []Stmt, sc int32) {
		for _, s := range body {
			switch s := s.(type) {
			case *Var:
				for _, v := range s.Names {
					key := v.Name
					if sc > 0 {
						key = fmt.Sprintf("%s#%d", v.Name, sc)
					}
					if v.Count > 0 {
						a.scopes[sc].counted[v.Name] = v.Count
						continue
					}
					a.scopes[sc].names[v.Name] = key
					if s.Space != "reg" {
						a.vars[key] = s.Space
					}
				}
			case *Block:
				a.scopes = append(a.scopes, scope{parent: sc, names: map[string]string{}, counted: map[string]int{}})
				collect(s.Body, int32(len(a.scopes)-1))
			case *Instruction:
				a.scopeOf[n] = sc
				n++
			}
		}
	}
	a.scopes = []scope{{parent: -1, names: map[string]string{}, counted: map[string]int{}}}
	collect(f.Body, 0)
	// A worklist: every instruction once, then again whenever a cell it
	// reads grows.
	a.queued = make([]bool, len(a.insns))
	for i := range a.insns {
		a.deps(int32(i))
		a.queue = append(a.queue, int32(i))
		a.queued[i] = true
	}
	for len(a.queue) > 0 {
		i := a.queue[0]
		a.queue = a.queue[1:]
		a.queued[i] = false
		a.flow(i)
	}
	for i := range a.insns {
		a.check(int32(i))
	}
	return a
}

// deps records the cells instruction i may read: the registers it names,
// the .param variables and parameters it names, and local memory for loads.
func (a *analysis) deps(i int32) {
	in := a.insns[i]
	use := func(c int32) {
		for len(a.users) <= int(c) {
			a.users = append(a.users, nil)
		}
		if u := a.users[c]; len(u) == 0 || u[len(u)-1] != i {
			a.users[c] = append(u, i)
		}
	}
	var walk func(o *Operand)
	walk = func(o *Operand) {
		switch o.Kind {
		case Reg:
			use(a.cell(a.key(i, o.Name)))
		case Sym:
			key := a.key(i, o.Name)
			if _, own := a.params[key]; a.vars[key] == "param" || (own && key == o.Name) {
				use(a.paramCell(key))
			}
		}
		if o.Base != nil {
			walk(o.Base)
		}
		for k := range o.Elems {
			walk(&o.Elems[k])
		}
	}
	for k := range in.Operands {
		walk(&in.Operands[k])
	}
	if in.Opcode == "ld" || in.Opcode == "ldu" {
		use(a.local)
	}
}

// changed queues the instructions that read cell c, which grew.
func (a *analysis) changed(c int32) {
	if int(c) >= len(a.users) {
		return
	}
	for _, u := range a.users[c] {
		if !a.queued[u] {
			a.queued[u] = true
			a.queue = append(a.queue, u)
		}
	}
}

// key gives the scoped key of a name used by instruction i: the name
// itself unless a { } block around the instruction declares it. A vector
// register's component (%v.x) is the register.
func (a *analysis) key(i int32, name string) string {
	if n := len(name); n > 2 && name[n-2] == '.' && strings.IndexByte("xyzwrgba", name[n-1]) >= 0 {
		name = name[:n-2]
	}
	for sc := a.scopeOf[i]; sc > 0; sc = a.scopes[sc].parent {
		if k, ok := a.scopes[sc].names[name]; ok {
			return k
		}
		if len(a.scopes[sc].counted) > 0 {
			j := len(name)
			for j > 0 && isDigit(name[j-1]) {
				j--
			}
			if n, ok := a.scopes[sc].counted[name[:j]]; ok && j < len(name) {
				if v, err := strconv.Atoi(name[j:]); err == nil && v < n {
					return fmt.Sprintf("%s#%d", name, sc)
				}
			}
		}
	}
	return name
}

func (a *analysis) cell(name string) int32 {
	if id, ok := a.ids[name]; ok {
		return id
	}
	id := int32(len(a.cells))
	a.ids[name] = id
	a.cells = append(a.cells, cell{})
	return id
}

// paramCell is the cell of a .param variable's contents.
func (a *analysis) paramCell(name string) int32 { return a.cell("[" + name + "]") }

// add puts o into cell c, widening offsets past maxOffsets.
func (a *analysis) add(c int32, o origin, w witness) {
	cl := &a.cells[c]
	if cl.has(o) {
		return
	}
	if (o.kind == oParam || o.kind == oParamAddr) && o.off >= 0 {
		wide := origin{kind: o.kind, param: o.param, off: -1}
		if cl.has(wide) {
			return
		}
		n := 0
		for _, e := range cl.order {
			if e.kind == o.kind && e.param == o.param {
				n++
			}
		}
		if n >= maxOffsets {
			o = wide
			if cl.has(o) {
				return
			}
		}
	}
	cl.order = append(cl.order, o)
	cl.wits = append(cl.wits, w)
	switch {
	case cl.index != nil:
		cl.index[o] = int32(len(cl.order) - 1)
	case len(cl.order) > 16:
		cl.index = make(map[origin]int32, 2*len(cl.order))
		for k, e := range cl.order {
			cl.index[e] = int32(k)
		}
	}
	a.changed(c)
}

// from is an origin and the cell it was found in (-1: none).
type from struct {
	o    origin
	cell int32
}

// symbol gives the origin of a name used as a value by instruction i: the
// address it names.
func (a *analysis) symbol(i int32, name string, off int64) (origin, bool) {
	key := a.key(i, name)
	if p, ok := a.params[name]; ok && key == name {
		return origin{kind: oParamAddr, param: int32(p), off: clampOff(off)}, true
	}
	space, ok := a.vars[key]
	if !ok {
		space, ok = a.mi.vars[name]
	}
	switch {
	case ok && space == "local":
		return origin{kind: oLocal}, true
	case ok:
		return origin{kind: oStatic}, true
	case a.mi.funcs[name] != nil:
		return origin{kind: oStatic}, true
	}
	return origin{}, false // a label or an unknown name: no address we know of
}

func clampOff(off int64) int32 {
	if off < 0 || off > 1<<30 {
		return -1
	}
	return int32(off)
}

// values gives the origins of an operand used as a value by instruction i.
func (a *analysis) values(i int32, o *Operand, out []from) []from {
	switch o.Kind {
	case Reg:
		if id, ok := a.ids[a.key(i, o.Name)]; ok {
			for _, e := range a.cells[id].order {
				out = append(out, from{e, id})
			}
		}
	case Sym:
		if s, ok := a.symbol(i, o.Name, o.Offset); ok {
			out = append(out, from{s, -1})
		}
	case Vec, List, Pair:
		for k := range o.Elems {
			out = a.values(i, &o.Elems[k], out)
		}
	}
	return out
}

// address gives the origins of a memory operand's address.
func (a *analysis) address(i int32, o *Operand) []from {
	if o.Kind != Addr || o.Base == nil {
		return nil
	}
	switch o.Base.Kind {
	case Sym:
		if s, ok := a.symbol(i, o.Base.Name, o.Offset); ok {
			return []from{{s, -1}}
		}
		return nil
	case Reg:
		fs := a.values(i, o.Base, nil)
		for i := range fs {
			fs[i].o = shift(fs[i].o, o.Offset, true)
		}
		return fs
	}
	return nil
}

// shift moves a parameter address by n bytes; exact false forgets its offset.
func shift(o origin, n int64, exact bool) origin {
	if o.kind != oParamAddr || o.off < 0 {
		return o
	}
	if !exact {
		o.off = -1
		return o
	}
	o.off = clampOff(int64(o.off) + n)
	return o
}

// dests gives the cells an instruction writes values to: the registers of
// its first operand, for instructions that have a destination.
func (a *analysis) dests(i int32, in *Instruction) []int32 {
	if len(in.Operands) == 0 || noDest[in.Opcode] {
		return nil
	}
	var out []int32
	var walk func(o *Operand)
	walk = func(o *Operand) {
		switch o.Kind {
		case Reg:
			out = append(out, a.cell(a.key(i, o.Name)))
		case Vec, Pair:
			for i := range o.Elems {
				walk(&o.Elems[i])
			}
		}
	}
	walk(&in.Operands[0])
	return out
}

var noDest = map[string]bool{
	"bra": true, "brx": true, "call": true, "ret": true, "exit": true, "trap": true, "bar": true, "barrier": true,
	"membar": true, "fence": true, "nanosleep": true, "pmevent": true, "setmaxnreg": true, "stackrestore": true,
	"griddepcontrol": true,
}

// stateSpaces are the modifiers that name a state space.
var stateSpaces = map[string]string{
	"global": "global", "shared": "shared", "shared::cta": "shared", "shared::cluster": "shared",
	"local": "local", "param": "param", "param::entry": "param", "param::func": "param", "const": "const",
}

// space gives the first state space among the modifiers ("" for generic
// addressing): for copies, the destination's.
func space(in *Instruction) string {
	for _, m := range in.Modifiers {
		if s, ok := stateSpaces[m]; ok {
			return s
		}
	}
	return ""
}

// writeAddr gives the index of the operand an instruction writes memory
// through, or -1. Instructions whose first operand is an address write
// through it unless they are known not to write memory: when in doubt,
// they write.
func writeAddr(in *Instruction) int {
	ops := in.Operands
	if in.Opcode == "atom" {
		for i := range ops {
			if ops[i].Kind == Addr {
				return i
			}
		}
		return -1
	}
	if len(ops) == 0 || ops[0].Kind != Addr || readsOnly(in) {
		return -1
	}
	return 0
}

// readsOnly holds the instructions with an address first that write no
// memory a launch's parameters can name: prefetches, cache hints, fences,
// mbarrier objects (always in shared memory) and tensor memory.
func readsOnly(in *Instruction) bool {
	switch in.Opcode {
	case "prefetch", "prefetchu", "applypriority", "mbarrier", "fence", "tcgen05":
		return true
	case "cp":
		return in.Has("prefetch") || (len(in.Modifiers) > 1 && in.Modifiers[0] == "async" && in.Modifiers[1] == "mbarrier")
	}
	return false
}

// isTMA says whether a write is a bulk tensor copy, whose address operand
// names a tensor map rather than the memory written.
func isTMA(in *Instruction) bool { return in.Opcode == "cp" && in.Has("tensor") }

// vecWidth gives the elements of a vector access: 2, 4 or 8 for .v2, .v4,
// .v8; 1 otherwise.
func vecWidth(in *Instruction) int {
	for _, m := range in.Modifiers {
		switch m {
		case "v2":
			return 2
		case "v4":
			return 4
		case "v8":
			return 8
		}
	}
	return 1
}

// elemSize gives the bytes of one element of a memory access: its type
// modifier's size; 0 when it has none.
func elemSize(in *Instruction) int {
	for i := len(in.Modifiers) - 1; i >= 0; i-- {
		if n, ok := typeSizes[in.Modifiers[i]]; ok && in.Modifiers[i] != "pred" {
			return n
		}
	}
	return 0
}

// flow applies one instruction's effect on the cells.
func (a *analysis) flow(i int32) {
	in := a.insns[i]
	if in.Opcode == "call" {
		a.callFlow(i, in)
		return
	}
	if w := writeAddr(in); w >= 0 {
		a.storeFlow(i, in, w)
		if in.Opcode != "atom" {
			return
		}
	}
	dests := a.dests(i, in)
	if len(dests) == 0 {
		return
	}
	srcs := in.Operands[1:]
	for k := range srcs {
		if srcs[k].Kind == Addr {
			a.readFlow(i, in, dests, &srcs[k])
			return
		}
	}
	exact, delta, other := false, int64(0), -1
	switch in.Opcode {
	case "mov", "cvta", "cvt":
		exact = true
	case "add", "sub":
		if len(srcs) == 2 {
			for k := range 2 {
				if n, ok := srcs[1-k].Int(); ok && (in.Opcode == "add" || k == 0) {
					exact, other, delta = true, k, n
					if in.Opcode == "sub" {
						delta = -n
					}
				}
			}
		}
	}
	width := destWidth(in)
	narrowing := width > 0 && width < a.mi.ptrBytes
	widening := width >= a.mi.ptrBytes && len(srcs) > 0 && assembles(in, srcs)
	var buf [8]from
	for k := range srcs {
		for _, f := range a.values(i, &srcs[k], buf[:0]) {
			o := shift(f.o, delta, exact && (other < 0 || other == k))
			switch {
			case o.kind == oLoaded && narrowing:
				o = origin{kind: oIndex} // a pointer cut to fewer bits is no pointer
			case o.kind == oIndex && widening:
				o = origin{kind: oLoaded} // pieces put together may make one
			case o.kind == oParam && widening && a.narrow(o):
				o.off, o.size = -1, -1 // so may pieces of parameters
			}
			for _, d := range dests {
				a.add(d, o, witness{insn: i, from: f.cell, fromO: f.o})
			}
		}
	}
}

// assembles reports whether an instruction can put a pointer together
// from pieces narrower than one: a vector pack; a shift by 32 or more or by
// a register, a bit-field insert or reverse, a multiply by 2^32 or more,
// which move low bits high; an or or xor of two registers, which joins
// halves. Adding, masking, converting and scaling by less keep an index an
// index.
func assembles(in *Instruction, srcs []Operand) bool {
	for i := range srcs {
		if srcs[i].Kind == Vec {
			return true
		}
	}
	switch in.Opcode {
	case "bfi", "brev":
		return true
	case "or", "xor":
		regs := 0
		for i := range srcs {
			if srcs[i].Kind == Reg {
				regs++
			}
		}
		return regs >= 2
	case "shl", "shf":
		n, ok := srcs[len(srcs)-1].Int()
		return !ok || n >= 32
	case "mul", "mad":
		if in.Has("wide") {
			return false
		}
		for i := range srcs {
			if n, ok := srcs[i].Int(); ok && (n >= 1<<32 || n <= -(1<<32)) {
				return true
			}
		}
	}
	return false
}

// destWidth gives the bytes of an instruction's result: its (first) type
// modifier's size, doubled for .wide; 0 when unknown or a predicate.
func destWidth(in *Instruction) int {
	n := 0
	for _, m := range in.Modifiers {
		if sz, ok := typeSizes[m]; ok && m != "pred" {
			n = sz
			break
		}
	}
	if in.Has("wide") {
		n *= 2
	}
	return n
}

// readOrigin is what a read of memory gives: an index when the element is
// narrower than a pointer, anything otherwise.
func (a *analysis) readOrigin(in *Instruction) origin {
	if n := elemSize(in); n > 0 && n < a.mi.ptrBytes {
		return origin{kind: oIndex}
	}
	return origin{kind: oLoaded}
}

// readFlow gives the destinations of a memory read what the memory may
// hold: a parameter's bytes for reads of the parameter space, what was
// stored for local memory and .param variables, anything otherwise.
func (a *analysis) readFlow(i int32, in *Instruction, dests []int32, addr *Operand) {
	read := a.readOrigin(in)
	loaded := func() {
		for _, d := range dests {
			a.add(d, read, witness{insn: i, from: -1})
		}
	}
	// What was stored there, read back at this width: narrow stores read
	// back wide may be the pieces of a pointer.
	copyCell := func(c int32) {
		for _, e := range a.cells[c].order {
			o := e
			switch {
			case o.kind == oIndex && read.kind == oLoaded && a.cells[c].narrowIn:
				o = read
			case o.kind == oLoaded && read.kind == oIndex:
				o = read
			}
			for _, d := range dests {
				a.add(d, o, witness{insn: i, from: c, fromO: e})
			}
		}
	}
	if in.Opcode != "ld" && in.Opcode != "ldu" {
		loaded()
		return
	}
	sp := space(in)
	switch sp {
	case "local":
		copyCell(a.local)
		return
	case "param", "":
		// below
	default:
		loaded()
		return
	}
	if addr.Base != nil && addr.Base.Kind == Sym && sp == "param" {
		// What the function stored into a .param variable, or into its own
		// parameter, is read back.
		key := a.key(i, addr.Base.Name)
		copyCell(a.paramCell(key))
		if _, own := a.params[key]; !own || key != addr.Base.Name {
			return
		}
	}
	elem := elemSize(in)
	fs := a.address(i, addr)
	if sp == "param" {
		// Only a parameter's address can be the base of a .param read; the
		// other origins are offsets into it.
		var base []from
		for _, f := range fs {
			if f.o.kind == oParamAddr {
				base = append(base, f)
			}
		}
		fs = base
	} else {
		fs = a.pointers(fs)
	}
	if len(fs) == 0 {
		loaded()
	}
	for _, f := range fs {
		switch {
		case f.o.kind == oParamAddr:
			// Element k goes to destination k; a single vector register
			// takes them all.
			for k := range max(vecWidth(in), len(dests)) {
				d := dests[min(k, len(dests)-1)]
				o := origin{kind: oParam, param: f.o.param, off: -1}
				if f.o.off >= 0 && elem > 0 {
					o.off, o.size = clampOff(int64(f.o.off)+int64(k*elem)), int32(elem)
					if o.off < 0 {
						o.size = 0
					}
				}
				a.add(d, o, witness{insn: i, from: f.cell, fromO: f.o})
			}
		case f.o.kind == oLocal:
			copyCell(a.local)
		default:
			loaded()
		}
	}
}

// storeFlow records what a memory write puts where the function can read
// it back: its .param variables and its local memory.
func (a *analysis) storeFlow(i int32, in *Instruction, w int) {
	addr := &in.Operands[w]
	var vals []from
	for k := w + 1; k < len(in.Operands); k++ {
		if in.Operands[k].Kind == Addr {
			vals = append(vals, from{origin{kind: oLoaded}, -1})
			continue
		}
		vals = a.values(i, &in.Operands[k], vals)
	}
	narrow := a.readOrigin(in).kind == oIndex
	put := func(c int32) {
		if narrow && !a.cells[c].narrowIn {
			a.cells[c].narrowIn = true
			a.changed(c)
		}
		for _, v := range vals {
			o := v.o
			if narrow && o.kind == oLoaded {
				o = origin{kind: oIndex}
			}
			a.add(c, o, witness{insn: i, from: v.cell, fromO: v.o})
		}
	}
	switch space(in) {
	case "param":
		if addr.Base != nil && addr.Base.Kind == Sym {
			put(a.paramCell(a.key(i, addr.Base.Name)))
			return
		}
		// A .param variable written through a register: any of them.
		for key, sp := range a.vars {
			if sp == "param" {
				put(a.paramCell(key))
			}
		}
		for _, p := range a.fn.Params {
			put(a.paramCell(p.Name))
		}
	case "local":
		put(a.local)
	case "":
		fs := a.address(i, addr)
		reaches := len(fs) == 0
		for _, f := range fs {
			if f.o.kind == oLocal || f.o.kind == oLoaded {
				reaches = true
			}
		}
		if reaches {
			put(a.local)
		}
	}
}

// call is a call instruction taken apart.
type call struct {
	rets, args []Operand
	callee     *Function // nil for an indirect call or an unknown name
	name       string
}

func parseCall(in *Instruction, mi *modInfo) call {
	var c call
	seen := false
	for k := range in.Operands {
		o := &in.Operands[k]
		switch {
		case o.Kind == List && !seen:
			c.rets = o.Elems
		case o.Kind == List:
			c.args = o.Elems
		case !seen:
			seen = true
			c.name = o.Name
			if o.Kind == Sym {
				c.callee = mi.funcs[o.Name]
			}
		}
	}
	return c
}

// harmless are external functions known to write no memory a kernel's
// parameters name: printf's and assert's runtime support, and the device
// heap.
var harmless = map[string]bool{"vprintf": true, "__assertfail": true, "malloc": true, "free": true}

// callee gives the summary of a call's target, nil when it is not known.
func (a *analysis) callee(c call) *summary {
	if c.callee == nil || a.mi.sums == nil {
		return nil
	}
	bottom := &summary{writes: make([]string, len(c.callee.Params)), rets: make([][]origin, len(c.callee.Returns))}
	if !c.callee.HasBody {
		if harmless[c.name] {
			if c.name == "malloc" && len(bottom.rets) > 0 {
				bottom.rets[0] = []origin{{kind: oStatic}} // the device heap
			}
			return bottom
		}
		return nil
	}
	if s := a.mi.sums[c.callee]; s != nil {
		return s
	}
	return bottom // not analysed yet: the fixpoint starts from nothing
}

// slot gives the cell of a call's argument or return: a .param variable's
// contents, or a register.
func (a *analysis) slot(i int32, o *Operand) (int32, bool) {
	key := a.key(i, o.Name)
	switch {
	case o.Kind == Reg:
		return a.cell(key), true
	case o.Kind == Sym && a.vars[key] == "param":
		return a.paramCell(key), true
	case o.Kind == Sym && key == o.Name:
		if _, own := a.params[key]; own {
			return a.paramCell(key), true
		}
	}
	return -1, false
}

func (a *analysis) argValues(i int32, o *Operand) []from {
	c, ok := a.slot(i, o)
	if !ok {
		return a.values(i, o, nil)
	}
	var out []from
	for _, e := range a.cells[c].order {
		out = append(out, from{e, c})
	}
	// A .param parameter passed on is also its own value.
	if p, own := a.params[o.Name]; own && o.Kind == Sym && a.key(i, o.Name) == o.Name {
		out = append(out, from{origin{kind: oParam, param: int32(p), off: -1}, -1})
	}
	return out
}

func (a *analysis) callFlow(i int32, in *Instruction) {
	c := parseCall(in, a.mi)
	s := a.callee(c)
	args := make([][]from, len(c.args))
	for k := range c.args {
		args[k] = a.argValues(i, &c.args[k])
	}
	// What the callee may store into memory the caller can read back.
	for k, fs := range args {
		if s != nil && s.anyReason == "" && (k >= len(s.writes) || s.writes[k] == "") {
			continue
		}
		for _, f := range fs {
			if f.o.kind == oLocal || f.o.kind == oLoaded {
				a.add(a.local, origin{kind: oLoaded}, witness{insn: i, from: -1})
			}
		}
	}
	for j := range c.rets {
		rc, ok := a.slot(i, &c.rets[j])
		if !ok {
			continue
		}
		if s == nil || j >= len(s.rets) {
			a.add(rc, origin{kind: oLoaded}, witness{insn: i, from: -1})
			continue
		}
		for _, o := range s.rets[j] {
			switch o.kind {
			case oParam:
				if int(o.param) < len(args) {
					for _, f := range args[o.param] {
						a.add(rc, f.o, witness{insn: i, from: f.cell, fromO: f.o})
					}
				}
			case oStatic, oIndex:
				a.add(rc, o, witness{insn: i, from: -1})
			default:
				a.add(rc, origin{kind: oLoaded}, witness{insn: i, from: -1})
			}
		}
	}
}

// site names an instruction for a reason: its name, PTX line and source
// position.
func site(in *Instruction) string {
	s := fmt.Sprintf("%s at PTX line %d", in.Name(), in.Line)
	if p := in.Pos.String(); p != "" {
		s += " (" + p + ")"
	}
	return s
}

// chain describes how an origin reached a cell: the instructions it went
// through, first to last.
func (a *analysis) chain(c int32, o origin) string {
	var steps []string
	for n := 0; c >= 0 && n < 64; n++ {
		k := a.cells[c].find(o)
		if k < 0 {
			break
		}
		w := a.cells[c].wits[k]
		if w.insn >= 0 {
			in := a.insns[w.insn]
			steps = append(steps, fmt.Sprintf("%s (line %d)", in.Name(), in.Line))
		}
		c, o = w.from, w.fromO
	}
	slices.Reverse(steps)
	if len(steps) > 7 {
		steps = append(append(steps[:2:2], "…"), steps[len(steps)-4:]...)
	}
	return strings.Join(steps, " → ")
}

func (a *analysis) paramName(i int32) string {
	if int(i) < len(a.fn.Params) {
		return a.fn.Params[i].Name
	}
	return fmt.Sprintf("parameter %d", i)
}

func (a *analysis) writeParam(i int32, off, size int32, reason string) {
	if int(i) >= len(a.writes) {
		return
	}
	w := &a.writes[i]
	if w.reason == "" {
		w.reason = reason
	}
	if off < 0 || size <= 0 {
		w.whole = true
		return
	}
	r := Range{int(off), int(size)}
	if !slices.Contains(w.words, r) {
		w.words = append(w.words, r)
	}
}

func (a *analysis) writeAny(reason string) {
	if a.anyReason == "" {
		a.anyReason = reason
	}
}

// operandText prints an address's base for a reason.
func operandText(o *Operand) string {
	if o.Kind == Addr && o.Base != nil {
		return o.Base.Name
	}
	return o.Name
}

// narrow reports whether an origin is a value too small to hold a pointer:
// a 32-bit parameter, or a 32-bit value read from memory, on a 64-bit
// target.
func (a *analysis) narrow(o origin) bool {
	if o.kind == oIndex {
		return true
	}
	if o.kind != oParam {
		return false
	}
	size := int(o.size)
	if size < 0 {
		return false // put together from pieces
	}
	if size == 0 && int(o.param) < len(a.fn.Params) {
		size = a.fn.Params[o.param].Size
	}
	return size > 0 && size < a.mi.ptrBytes
}

// pointers keeps the origins of an address that may be its pointer. Where
// a pointer-wide origin is present, narrow parameter values are offsets
// added to it (pointer arithmetic stays within its object); an address made
// of narrow values alone was assembled from pieces, and they all count.
func (a *analysis) pointers(fs []from) []from {
	wide := false
	for _, f := range fs {
		if !a.narrow(f.o) {
			wide = true
		}
	}
	if !wide {
		return fs
	}
	out := fs[:0:0]
	for _, f := range fs {
		if !a.narrow(f.o) {
			out = append(out, f)
		}
	}
	return out
}

// check finds the parameters an instruction may write through.
func (a *analysis) check(i int32) {
	in := a.insns[i]
	if in.Opcode == "call" {
		a.checkCall(i, in)
		return
	}
	w := writeAddr(in)
	if w < 0 {
		return
	}
	if sp := space(in); sp != "" && sp != "global" {
		return // shared, local, .param and constant memory hold no region a parameter names
	}
	a.sites++
	addr := &in.Operands[w]
	base := operandText(addr)
	fs := a.pointers(a.address(i, addr))
	if len(fs) == 0 {
		a.writeAny(fmt.Sprintf("%s stores through %s, an address not derived from any parameter: it may write any region", site(in), base))
	}
	tma := isTMA(in)
	for _, f := range fs {
		via := ""
		if f.cell >= 0 {
			if ch := a.chain(f.cell, f.o); ch != "" {
				via = ": " + ch
			}
		}
		switch f.o.kind {
		case oParam:
			what := "stores through " + base
			if tma {
				what = "stores through the tensor map at " + base + ", read from memory"
				a.writeAny(fmt.Sprintf("%s %s through parameter %s%s: it may write any region", site(in), what, a.paramName(f.o.param), via))
				continue
			}
			a.writeParam(f.o.param, f.o.off, f.o.size, fmt.Sprintf("%s %s, derived from parameter %s%s", site(in), what, a.paramName(f.o.param), via))
		case oParamAddr:
			if tma {
				a.writeParam(f.o.param, -1, 0, fmt.Sprintf("%s stores through the tensor map in parameter %s%s", site(in), a.paramName(f.o.param), via))
				continue
			}
			a.writeAny(fmt.Sprintf("%s stores through %s, the address of parameter %s itself%s: it may write any region", site(in), base, a.paramName(f.o.param), via))
		case oLoaded:
			a.writeAny(fmt.Sprintf("%s stores through %s, a value read from memory%s: it may write any region", site(in), base, via))
		case oIndex:
			a.writeAny(fmt.Sprintf("%s stores through %s, made of values read from memory%s: it may write any region", site(in), base, via))
		}
	}
}

func (a *analysis) checkCall(i int32, in *Instruction) {
	a.sites++
	c := parseCall(in, a.mi)
	s := a.callee(c)
	switch {
	case s == nil && c.callee == nil && strings.HasPrefix(c.name, "%"):
		a.writeAny(fmt.Sprintf("%s makes an indirect call through %s: it may write any region", site(in), c.name))
		return
	case s == nil && c.callee == nil:
		a.writeAny(fmt.Sprintf("%s calls %s, which the module does not define: it may write any region", site(in), c.name))
		return
	case s == nil && c.callee.HasBody:
		a.writeAny(fmt.Sprintf("%s calls %s, whose calls recurse too deeply to follow: it may write any region", site(in), c.name))
		return
	case s == nil:
		a.writeAny(fmt.Sprintf("%s calls %s, whose body is not in the module: it may write any region", site(in), c.name))
		return
	case s.anyReason != "":
		a.writeAny(fmt.Sprintf("%s calls %s, which may write any region: %s", site(in), c.name, s.anyReason))
	}
	for k := range c.args {
		if k >= len(s.writes) || k >= len(c.callee.Params) || s.writes[k] == "" {
			continue
		}
		callee := fmt.Sprintf("to %s, which stores through its parameter %s: %s", c.name, c.callee.Params[k].Name, s.writes[k])
		fs := a.pointers(a.argValues(i, &c.args[k]))
		if len(fs) == 0 {
			a.writeAny(fmt.Sprintf("%s passes an address not derived from any parameter %s", site(in), callee))
		}
		for _, f := range fs {
			via := ""
			if f.cell >= 0 {
				if ch := a.chain(f.cell, f.o); ch != "" {
					via = " (" + ch + ")"
				}
			}
			switch f.o.kind {
			case oParam:
				a.writeParam(f.o.param, -1, 0, fmt.Sprintf("%s passes %s, derived from parameter %s%s, %s", site(in), c.args[k].Name, a.paramName(f.o.param), via, callee))
			case oParamAddr:
				a.writeAny(fmt.Sprintf("%s passes the address of parameter %s %s; it may write any region", site(in), a.paramName(f.o.param), callee))
			case oLoaded, oIndex:
				a.writeAny(fmt.Sprintf("%s passes %s, a value read from memory%s, %s; it may write any region", site(in), c.args[k].Name, via, callee))
			}
		}
	}
}

func (a *analysis) summary() *summary {
	s := &summary{writes: make([]string, len(a.fn.Params)), anyReason: a.anyReason}
	for i, w := range a.writes {
		s.writes[i] = w.reason
	}
	for _, r := range a.fn.Returns {
		var c int32 = -1
		if r.Space == "param" {
			c = a.paramCell(r.Name)
		} else if id, ok := a.ids[r.Name]; ok {
			c = id
		}
		var os []origin
		if c >= 0 {
			for _, o := range a.cells[c].order {
				switch o.kind {
				case oParam:
					o.off, o.size = -1, 0 // the caller follows whole arguments
				case oParamAddr, oLocal:
					o = origin{kind: oLoaded} // an address in the callee's frame: the caller cannot follow it
				}
				if !slices.Contains(os, o) {
					os = append(os, o)
				}
			}
		}
		slices.SortFunc(os, func(x, y origin) int {
			if x.kind != y.kind {
				return int(x.kind) - int(y.kind)
			}
			return int(x.param) - int(y.param)
		})
		s.rets = append(s.rets, os)
	}
	return s
}

func (a *analysis) writeSet(mi *modInfo) WriteSet {
	ws := WriteSet{Kernel: a.fn.Name, Any: a.anyReason != "", AnyReason: a.anyReason}
	for i, p := range a.fn.Params {
		pw := ParamWrite{Name: p.Name, Index: i, Offset: p.Offset, Size: p.Size, Verdict: ReadOnly}
		w := a.writes[i]
		switch {
		case w.reason != "":
			pw.Verdict, pw.Reason = MayWrite, w.reason
			if !w.whole && !ws.Any {
				pw.Words = slices.Clone(w.words)
				slices.SortFunc(pw.Words, func(x, y Range) int { return x.Off - y.Off })
			}
		case ws.Any && (p.Size < 0 || p.Size >= mi.ptrBytes || p.Ptr):
			pw.Verdict, pw.Reason = MayWrite, "may write any region: "+a.anyReason
		case ws.Any:
			pw.Reason = fmt.Sprintf("proved read-only: %d bytes cannot hold a pointer, and no store's address derives from it", p.Size)
		default:
			pw.Reason = fmt.Sprintf("proved read-only: none of the kernel's %d memory writes and calls has an address derived from it", a.sites)
		}
		ws.Params = append(ws.Params, pw)
	}
	return ws
}
