package ptx

import (
	"fmt"
	"strconv"
	"strings"
)

// maxDepth bounds the nesting of scopes, vectors and initializers, so that
// hostile input cannot exhaust the stack.
const maxDepth = 100

type parser struct {
	lex     lexer
	tok     token
	peek    token
	hasPeek bool
	depth   int
	pos     Pos // the last .loc of the current function
	opcodes map[string]opcode

	// Instructions, operands and statements are carved from large blocks
	// and built on scratch stacks, so that a module costs a few
	// allocations per thousand instructions rather than several each.
	insns    []Instruction
	operands []Operand // instructions' operands, each instruction's contiguous
	elems    []Operand // vector, list and address elements
	opStack  []Operand
	stmts    []Stmt
}

func (p *parser) newInstruction() *Instruction {
	if len(p.insns) == cap(p.insns) {
		p.insns = make([]Instruction, 0, 1024)
	}
	p.insns = p.insns[:len(p.insns)+1]
	return &p.insns[len(p.insns)-1]
}

// keep copies elements to their arena. The slice it gives is capped at its
// length, so that appending to it never writes over its neighbours.
func (p *parser) keep(ops []Operand) []Operand {
	if len(ops) == 0 {
		return nil
	}
	if cap(p.elems)-len(p.elems) < len(ops) {
		p.elems = make([]Operand, 0, max(1024, len(ops)))
	}
	start := len(p.elems)
	p.elems = append(p.elems, ops...)
	return p.elems[start:len(p.elems):len(p.elems)]
}

type opcode struct {
	op   string
	mods []string
}

// Parse reads a PTX module. A malformed module gives an *Error naming the
// PTX line where reading stopped.
func Parse(src []byte) (m *Module, err error) {
	p := &parser{
		lex:     lexer{src: string(src), line: 1},
		opcodes: map[string]opcode{},
	}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*Error)
			if !ok {
				panic(r)
			}
			m, err = nil, e
		}
	}()
	p.advance()
	return p.module(), nil
}

func (p *parser) fail(format string, args ...any) {
	panic(&Error{Line: p.tok.line, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) advance() {
	if p.hasPeek {
		p.tok, p.hasPeek = p.peek, false
		return
	}
	p.tok = p.lex.next()
}

func (p *parser) lookahead() token {
	if !p.hasPeek {
		p.peek, p.hasPeek = p.lex.next(), true
	}
	return p.peek
}

func (p *parser) is(punct string) bool { return p.tok.kind == tPunct && p.tok.text == punct }

func (p *parser) expect(punct string) {
	if !p.is(punct) {
		p.fail("expected %s, found %s", punct, describe(p.tok))
	}
	p.advance()
}

func (p *parser) expectKind(kind tokKind, what string) string {
	if p.tok.kind != kind {
		p.fail("expected %s, found %s", what, describe(p.tok))
	}
	s := p.tok.text
	p.advance()
	return s
}

func (p *parser) number() int {
	t := p.tok
	s := p.expectKind(tNumber, "a number")
	n, ok := parseInt(s)
	if !ok || n < 0 || n > 1<<40 {
		panic(&Error{Line: t.line, Msg: fmt.Sprintf("expected a count, found %s", quote(s))})
	}
	return int(n)
}

func (p *parser) nest() {
	p.depth++
	if p.depth > maxDepth {
		p.fail("nested more than %d deep", maxDepth)
	}
}

func describe(t token) string {
	if t.kind == tEOF {
		return "end of input"
	}
	return quote(t.text)
}

// lineDirectives end at their last argument; the others at a semicolon.
var lineDirectives = map[string]bool{"version": true, "target": true, "address_size": true, "file": true, "loc": true}

var linkages = map[string]bool{".visible": true, ".extern": true, ".weak": true, ".common": true}

var spaces = map[string]bool{".reg": true, ".global": true, ".shared": true, ".local": true, ".const": true, ".param": true, ".tex": true}

func (p *parser) module() *Module {
	m := &Module{Files: map[int]string{}}
	for p.tok.kind != tEOF {
		m.Items = append(m.Items, p.moduleItem(m))
	}
	for _, it := range m.Items {
		if f, ok := it.(*Function); ok {
			eachInstruction(f.Body, func(in *Instruction) { in.Pos.Path = m.Files[in.Pos.File] })
		}
	}
	return m
}

func (p *parser) moduleItem(m *Module) Item {
	if p.tok.kind != tDirective {
		p.fail("expected a directive, found %s", describe(p.tok))
	}
	switch p.tok.text {
	case ".version":
		if m.Version != "" {
			p.fail("a second .version (after .version %s): a module has one", m.Version)
		}
		p.advance()
		m.Version = p.expectKind(tNumber, "a version")
		return &Directive{Name: "version", Args: []string{m.Version}}
	case ".target":
		if m.Target != nil {
			p.fail("a second .target: a module has one")
		}
		p.advance()
		d := &Directive{Name: "target"}
		for {
			t := p.expectKind(tIdent, "a target")
			m.Target = append(m.Target, t)
			d.Args = append(d.Args, t)
			if !p.is(",") {
				return d
			}
			d.Args = append(d.Args, ",")
			p.advance()
		}
	case ".address_size":
		if m.AddressSize != 0 {
			p.fail("a second .address_size: a module has one")
		}
		p.advance()
		s := p.tok.text
		m.AddressSize = p.number()
		return &Directive{Name: "address_size", Args: []string{s}}
	case ".file":
		return p.file(m)
	case ".loc":
		return p.loc()
	case ".section":
		return p.section()
	case ".pragma", ".alias":
		return p.untilSemicolon()
	}
	linkage := ""
	if linkages[p.tok.text] {
		linkage = p.tok.text[1:]
		p.advance()
	}
	switch {
	case p.tok.kind == tDirective && (p.tok.text == ".entry" || p.tok.text == ".func"):
		return p.function(linkage)
	case p.tok.kind == tDirective && spaces[p.tok.text]:
		return p.varDecl(linkage)
	}
	p.fail("unsupported module-scope %s", describe(p.tok))
	return nil
}

// file reads .file N "path" [, timestamp, size].
func (p *parser) file(m *Module) *Directive {
	p.advance()
	d := &Directive{Name: "file"}
	idx := p.tok.text
	n := p.number()
	path := p.expectKind(tString, "a file name")
	d.Args = append(d.Args, idx, path)
	for p.is(",") {
		p.advance()
		d.Args = append(d.Args, ",", p.expectKind(tNumber, "a number"))
	}
	m.Files[n] = unquote(path)
	return d
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return strings.Trim(s, `"`)
}

// loc reads .loc file line column [, function_name label [+ N]] [, inlined_at file line column]
// and makes it the position of the instructions after it.
func (p *parser) loc() *Directive {
	p.advance()
	d := &Directive{Name: "loc"}
	var nums [3]int
	for i := range nums {
		if i == 2 && p.tok.kind != tNumber {
			break // the column is optional
		}
		d.Args = append(d.Args, p.tok.text)
		nums[i] = p.number()
	}
	for p.is(",") {
		p.advance()
		key := p.expectKind(tIdent, "function_name or inlined_at")
		d.Args = append(d.Args, ",", key)
		switch key {
		case "function_name":
			d.Args = append(d.Args, p.expectKind(tIdent, "a label"))
			if p.is("+") {
				p.advance()
				d.Args = append(d.Args, "+", p.expectKind(tNumber, "a number"))
			}
		case "inlined_at":
			for range 3 {
				d.Args = append(d.Args, p.expectKind(tNumber, "a number"))
			}
		default:
			p.fail("unknown .loc attribute %s", quote(key))
		}
	}
	p.pos = Pos{File: nums[0], Line: nums[1], Col: nums[2]}
	return d
}

// section reads .section name { data lines }.
func (p *parser) section() *Section {
	p.advance()
	if p.tok.kind != tDirective && p.tok.kind != tIdent {
		p.fail("expected a section name, found %s", describe(p.tok))
	}
	s := &Section{Name: p.tok.text}
	p.advance()
	p.expect("{")
	var line []string
	lineNo := 0
	flush := func() {
		if len(line) > 0 {
			s.Lines = append(s.Lines, joinTokens(line))
			line = line[:0]
		}
	}
	for !p.is("}") {
		if p.tok.kind == tEOF || p.is("{") {
			p.fail("unterminated section %s", quote(s.Name))
		}
		if p.tok.line != lineNo {
			flush()
			lineNo = p.tok.line
		}
		line = append(line, p.tok.text)
		p.advance()
	}
	flush()
	p.advance()
	return s
}

// untilSemicolon reads a directive as its tokens up to a semicolon.
func (p *parser) untilSemicolon() *Directive {
	d := &Directive{Name: p.tok.text[1:]}
	p.advance()
	for !p.is(";") {
		if p.tok.kind == tEOF || p.is("{") || p.is("}") {
			p.fail("expected ; to end .%s, found %s", d.Name, describe(p.tok))
		}
		d.Args = append(d.Args, p.tok.text)
		p.advance()
	}
	p.advance()
	return d
}

// attribute reads .attribute( ... ) as its text.
func (p *parser) attribute() string {
	parts := []string{p.tok.text}
	p.advance()
	if !p.is("(") {
		p.fail("expected ( after .attribute, found %s", describe(p.tok))
	}
	depth := 0
	for {
		switch {
		case p.tok.kind == tEOF:
			p.fail("unterminated .attribute")
		case p.is("("):
			depth++
		case p.is(")"):
			depth--
		}
		parts = append(parts, p.tok.text)
		p.advance()
		if depth == 0 {
			return joinTokens(parts)
		}
	}
}

// headerEnd holds the directives that cannot follow a function header: one
// of them there means the header's { or ; is missing.
var headerEnd = map[string]bool{
	".visible": true, ".extern": true, ".weak": true, ".common": true, ".entry": true, ".func": true,
	".global": true, ".const": true, ".shared": true, ".local": true, ".version": true, ".target": true,
	".address_size": true, ".file": true, ".section": true, ".alias": true, ".reg": true, ".param": true,
}

func (p *parser) function(linkage string) *Function {
	f := &Function{Line: p.tok.line, Linkage: linkage, Entry: p.tok.text == ".entry"}
	p.advance()
	for p.tok.kind == tDirective && p.tok.text == ".attribute" {
		f.Attributes = append(f.Attributes, p.attribute())
	}
	if !f.Entry && p.is("(") {
		f.Returns = p.params()
	}
	f.Name = p.expectKind(tIdent, "a function name")
	if p.is("(") {
		f.Params = p.params()
	}
	layout(f.Params)
	for p.tok.kind == tDirective {
		if headerEnd[p.tok.text] {
			p.fail("expected { or ; after the header of %s, found %s", f.Name, describe(p.tok))
		}
		d := &Directive{Name: p.tok.text[1:]}
		p.advance()
		for p.tok.kind == tNumber || p.tok.kind == tString || p.tok.kind == tIdent || p.is(",") {
			d.Args = append(d.Args, p.tok.text)
			p.advance()
		}
		if d.Name == "pragma" {
			p.expect(";")
		}
		f.Directives = append(f.Directives, d)
	}
	if p.is(";") {
		p.advance()
		return f
	}
	if !p.is("{") {
		p.fail("expected { or ; after the header of %s, found %s", f.Name, describe(p.tok))
	}
	f.HasBody = true
	p.pos = Pos{}
	f.Body = p.block()
	resolve(f)
	return f
}

func (p *parser) params() []*Param {
	p.expect("(")
	var ps []*Param
	for !p.is(")") {
		if len(ps) > 0 {
			p.expect(",")
		}
		ps = append(ps, p.param())
	}
	p.advance()
	return ps
}

func (p *parser) param() *Param {
	if p.tok.kind != tDirective || (p.tok.text != ".param" && p.tok.text != ".reg") {
		p.fail("expected .param or .reg, found %s", describe(p.tok))
	}
	pr := &Param{Space: p.tok.text[1:]}
	p.advance()
	for p.tok.kind == tDirective {
		t := p.tok.text
		p.advance()
		switch {
		case t == ".align" && pr.Ptr:
			pr.PtrAlign = p.number()
		case t == ".align":
			pr.Align = p.number()
		case t == ".ptr":
			pr.Ptr = true
		case pr.Ptr && spaces[t]:
			pr.PtrSpace = t[1:]
		case t == ".v2" || t == ".v4" || t == ".v8":
			pr.Vector = int(t[2] - '0')
		case t == ".attribute":
			p.fail(".attribute on a parameter is not supported")
		case pr.Type == "":
			pr.Type = t[1:]
		default:
			p.fail("unexpected %s in parameter", quote(t))
		}
	}
	if pr.Type == "" {
		p.fail("parameter without a type")
	}
	pr.Name = p.expectKind(tIdent, "a parameter name")
	pr.Dims = p.dims()
	return pr
}

func (p *parser) dims() []int {
	var dims []int
	for p.is("[") {
		p.advance()
		if p.is("]") {
			dims = append(dims, -1)
		} else {
			dims = append(dims, p.number())
		}
		p.expect("]")
	}
	return dims
}

func (p *parser) varDecl(linkage string) *Var {
	v := &Var{Linkage: linkage, Space: p.tok.text[1:]}
	p.advance()
	for p.tok.kind == tDirective {
		t := p.tok.text
		switch {
		case t == ".attribute":
			v.Attributes = append(v.Attributes, p.attribute())
			continue
		case t == ".align":
			p.advance()
			v.Align = p.number()
			continue
		case t == ".v2" || t == ".v4" || t == ".v8":
			v.Vector = int(t[2] - '0')
		case v.Type == "":
			v.Type = t[1:]
		default:
			p.fail("unexpected %s in a declaration", quote(t))
		}
		p.advance()
	}
	if v.Type == "" {
		p.fail("declaration without a type")
	}
	for {
		n := VarName{Name: p.expectKind(tIdent, "a name")}
		if p.is("<") {
			p.advance()
			n.Count = p.number()
			p.expect(">")
		}
		n.Dims = p.dims()
		if p.is("=") {
			p.advance()
			init := p.initializer()
			n.Init = &init
		}
		v.Names = append(v.Names, n)
		if !p.is(",") {
			break
		}
		p.advance()
	}
	p.expect(";")
	return v
}

func (p *parser) initializer() Operand {
	switch {
	case p.is("{"):
		p.nest()
		p.advance()
		o := Operand{Kind: Vec}
		for !p.is("}") {
			if len(o.Elems) > 0 {
				p.expect(",")
			}
			o.Elems = append(o.Elems, p.initializer())
		}
		p.advance()
		p.depth--
		return o
	case p.tok.kind == tIdent && p.tok.text == "generic" && p.lookahead().kind == tPunct && p.lookahead().text == "(":
		p.advance()
		p.advance()
		o := Operand{Kind: Sym, Generic: true, Name: p.expectKind(tIdent, "a name")}
		p.expect(")")
		o.Offset = p.offset()
		return o
	case p.tok.kind == tIdent:
		o := Operand{Kind: Sym, Name: p.tok.text}
		p.advance()
		o.Offset = p.offset()
		return o
	}
	return p.immediate()
}

func (p *parser) immediate() Operand {
	neg := p.is("-")
	if neg {
		p.advance()
	}
	s := p.expectKind(tNumber, "a value")
	if neg {
		s = "-" + s
	}
	return Operand{Kind: Imm, Name: s}
}

// offset reads an optional "+N", "+-N" or "-N".
func (p *parser) offset() int64 {
	if !p.is("+") && !p.is("-") {
		return 0
	}
	neg := p.is("-")
	p.advance()
	if p.is("-") {
		neg = !neg
		p.advance()
	}
	line := p.tok.line
	s := p.expectKind(tNumber, "an offset")
	n, ok := parseInt(s)
	if !ok {
		panic(&Error{Line: line, Msg: fmt.Sprintf("offset %s is not an integer", quote(s))})
	}
	if neg {
		n = -n
	}
	return n
}

func (p *parser) block() []Stmt {
	p.nest()
	p.expect("{")
	base := len(p.stmts)
	for !p.is("}") {
		if p.tok.kind == tEOF {
			p.fail("unterminated body: missing }")
		}
		if s := p.statement(); s != nil {
			p.stmts = append(p.stmts, s)
		}
	}
	p.advance()
	p.depth--
	body := make([]Stmt, len(p.stmts)-base)
	copy(body, p.stmts[base:])
	clear(p.stmts[base:])
	p.stmts = p.stmts[:base]
	return body
}

func (p *parser) statement() Stmt {
	t := p.tok
	switch {
	case p.is("{"):
		return &Block{Body: p.block()}
	case p.is(";"):
		p.advance()
		return nil
	case t.kind == tDirective:
		switch {
		case spaces[t.text]:
			return p.varDecl("")
		case linkages[t.text]:
			p.advance()
			if p.tok.kind != tDirective || !spaces[p.tok.text] {
				p.fail("expected a declaration after %s, found %s", t.text, describe(p.tok))
			}
			return p.varDecl(t.text[1:])
		case t.text == ".loc":
			return p.loc()
		}
		return p.untilSemicolon()
	case t.kind == tIdent && p.lookahead().kind == tPunct && p.lookahead().text == ":":
		p.advance()
		p.advance()
		return &Label{Name: t.text}
	case t.kind == tIdent || p.is("@"):
		return p.instruction()
	}
	p.fail("expected a statement, found %s", describe(t))
	return nil
}

func (p *parser) instruction() *Instruction {
	in := p.newInstruction()
	in.Line, in.Pos = p.tok.line, p.pos
	if p.is("@") {
		p.advance()
		if p.is("!") {
			in.GuardNot = true
			p.advance()
		}
		in.Guard = p.expectKind(tIdent, "a guard predicate")
	}
	name := p.expectKind(tIdent, "an opcode")
	if name[0] == '%' || name[0] == '$' {
		p.fail("expected an opcode, found %s", quote(name))
	}
	op, ok := p.opcodes[name]
	if !ok {
		parts := strings.Split(name, ".")
		op = opcode{op: parts[0], mods: parts[1:]}
		if len(op.mods) == 0 {
			op.mods = nil
		}
		p.opcodes[name] = op
	}
	in.Opcode, in.Modifiers = op.op, op.mods
	if p.is(";") {
		p.advance()
		return in
	}
	start := len(p.operands)
	for {
		o := p.operand()
		if len(p.operands) == cap(p.operands) {
			// A new block, with this instruction's operands so far.
			fresh := make([]Operand, 0, max(4096, 2*(len(p.operands)-start)))
			p.operands = append(fresh, p.operands[start:]...)
			start = 0
		}
		p.operands = append(p.operands, o)
		if p.is(";") {
			p.advance()
			in.Operands = p.operands[start:len(p.operands):len(p.operands)]
			return in
		}
		if !p.is(",") {
			p.fail("expected , or ; after an operand of %s, found %s", name, describe(p.tok))
		}
		p.advance()
	}
}

func (p *parser) operand() Operand {
	t := p.tok
	switch {
	case p.is("!"):
		p.advance()
		o := p.name()
		if o.Offset != 0 {
			p.fail("! must negate a predicate")
		}
		o.Not = true
		return o
	case p.is("{"), p.is("("):
		kind, end := Vec, "}"
		if p.is("(") {
			kind, end = List, ")"
		}
		p.nest()
		p.advance()
		base := len(p.opStack)
		for !p.is(end) {
			if len(p.opStack) > base {
				p.expect(",")
			}
			e := p.operand()
			p.opStack = append(p.opStack, e)
		}
		p.advance()
		p.depth--
		o := Operand{Kind: kind, Elems: p.keep(p.opStack[base:])}
		if o.Elems == nil {
			o.Elems = []Operand{}
		}
		p.opStack = p.opStack[:base]
		return o
	case p.is("["):
		return p.address()
	case p.is("-") || t.kind == tNumber:
		return p.immediate()
	case t.kind == tIdent:
		o := p.name()
		if p.is("|") {
			p.advance()
			if o.Offset != 0 {
				p.fail("| must join two predicates")
			}
			second := p.name()
			return Operand{Kind: Pair, Elems: []Operand{o, second}}
		}
		return o
	}
	p.fail("expected an operand, found %s", describe(t))
	return Operand{}
}

// name reads a register or a symbol with an optional constant offset.
func (p *parser) name() Operand {
	s := p.expectKind(tIdent, "a name")
	if s[0] == '%' {
		if p.is("+") || p.is("-") {
			p.fail("a register takes an offset only inside [ ]")
		}
		return Operand{Kind: Reg, Name: s}
	}
	return Operand{Kind: Sym, Name: s, Offset: p.offset()}
}

func (p *parser) address() Operand {
	p.nest()
	p.advance()
	var base Operand
	switch {
	case p.tok.kind == tIdent:
		s := p.tok.text
		p.advance()
		base = Operand{Kind: Sym, Name: s}
		if s[0] == '%' {
			base.Kind = Reg
		}
	case p.tok.kind == tNumber:
		base = p.immediate()
	default:
		p.fail("expected an address, found %s", describe(p.tok))
	}
	o := Operand{Kind: Addr, Offset: p.offset()}
	o.Base = &base
	if p.is(",") {
		start := len(p.opStack)
		for p.is(",") {
			p.advance()
			e := p.operand()
			p.opStack = append(p.opStack, e)
		}
		o.Elems = p.keep(p.opStack[start:])
		p.opStack = p.opStack[:start]
	}
	p.expect("]")
	p.depth--
	return o
}

// resolve tells registers and labels from other names in a function: a
// name is a register when it starts with % or a .reg declares it, a label
// when the function defines it as one.
func resolve(f *Function) {
	plain := map[string]bool{}
	counted := map[string]int{}
	labels := map[string]bool{}
	for _, ps := range [][]*Param{f.Returns, f.Params} {
		for _, pr := range ps {
			if pr.Space == "reg" {
				plain[pr.Name] = true
			}
		}
	}
	var collect func([]Stmt)
	collect = func(body []Stmt) {
		for _, s := range body {
			switch s := s.(type) {
			case *Var:
				if s.Space != "reg" {
					continue
				}
				for _, n := range s.Names {
					if n.Count > 0 {
						counted[n.Name] = max(counted[n.Name], n.Count)
					} else {
						plain[n.Name] = true
					}
				}
			case *Label:
				labels[s.Name] = true
			case *Block:
				collect(s.Body)
			}
		}
	}
	collect(f.Body)
	isReg := func(name string) bool {
		if plain[name] {
			return true
		}
		i := len(name)
		for i > 0 && isDigit(name[i-1]) {
			i--
		}
		if i == len(name) || (name[i] == '0' && i < len(name)-1) {
			return false
		}
		n, err := strconv.Atoi(name[i:])
		return err == nil && n < counted[name[:i]]
	}
	var fix func(o *Operand)
	fix = func(o *Operand) {
		switch o.Kind {
		case Sym:
			if o.Offset != 0 || o.Generic {
				return
			}
			if isReg(o.Name) {
				o.Kind = Reg
			} else if labels[o.Name] {
				o.Kind = LabelRef
			}
		case Reg:
			// already a register
		case Addr:
			fix(o.Base)
		}
		for i := range o.Elems {
			fix(&o.Elems[i])
		}
	}
	eachInstruction(f.Body, func(in *Instruction) {
		for i := range in.Operands {
			fix(&in.Operands[i])
		}
	})
}

// typeSizes gives the bytes of each fundamental type a parameter may have.
var typeSizes = map[string]int{
	"b8": 1, "u8": 1, "s8": 1, "pred": 1,
	"b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2, "e4m3x2": 2, "e5m2x2": 2,
	"b32": 4, "u32": 4, "s32": 4, "f32": 4, "f16x2": 4, "bf16x2": 4, "tf32": 4,
	"b64": 8, "u64": 8, "s64": 8, "f64": 8, "texref": 8, "samplerref": 8, "surfref": 8,
	"b128": 16,
}

// layout places .param parameters in the parameter buffer.
func layout(params []*Param) {
	off, known := 0, true
	for _, pr := range params {
		pr.Offset, pr.Size = -1, -1
		if pr.Space != "param" || !known {
			continue
		}
		elem := typeSizes[pr.Type]
		size := elem * max(pr.Vector, 1)
		ok := elem > 0
		for _, d := range pr.Dims {
			if d < 0 || (d > 0 && size > (1<<30)/d) {
				ok = false
				break
			}
			size *= d
		}
		if !ok {
			known = false
			continue
		}
		align := pr.Align
		if align <= 0 {
			align = elem * max(pr.Vector, 1)
		}
		off = (off + align - 1) / align * align
		pr.Offset, pr.Size = off, size
		off += size
	}
}

// joinTokens joins tokens with single spaces, none before , ; or :, so
// that the text lexes back to the same tokens.
func joinTokens(toks []string) string {
	var b strings.Builder
	for i, t := range toks {
		if i > 0 && t != "," && t != ";" && t != ":" {
			b.WriteByte(' ')
		}
		b.WriteString(t)
	}
	return b.String()
}
