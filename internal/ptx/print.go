package ptx

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
)

// WriteTo prints the module as PTX text that parses back to an equal
// module. Comments and the original layout are not kept.
func (m *Module) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	bw := bufio.NewWriter(cw)
	pr := printer{w: bw}
	for i, it := range m.Items {
		if _, isFunc := it.(*Function); isFunc && i > 0 {
			bw.WriteByte('\n')
		}
		pr.item(it)
	}
	err := bw.Flush()
	return cw.n, err
}

// String gives the module as PTX text.
func (m *Module) String() string {
	var b bytes.Buffer
	_, _ = m.WriteTo(&b)
	return b.String()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

type printer struct {
	w      *bufio.Writer
	indent int
}

func (p *printer) tabs() {
	for range p.indent {
		p.w.WriteByte('\t')
	}
}

func (p *printer) item(it Item) {
	switch it := it.(type) {
	case *Directive:
		p.directive(it)
	case *Var:
		p.varDecl(it)
	case *Section:
		p.w.WriteString(".section " + it.Name + "\n{\n")
		for _, l := range it.Lines {
			p.w.WriteString("\t" + l + "\n")
		}
		p.w.WriteString("}\n")
	case *Function:
		p.function(it)
	}
}

func (p *printer) directive(d *Directive) {
	p.tabs()
	p.w.WriteString("." + d.Name)
	if len(d.Args) > 0 {
		p.w.WriteString(" " + joinTokens(d.Args))
	}
	if !lineDirectives[d.Name] {
		p.w.WriteByte(';')
	}
	p.w.WriteByte('\n')
}

func (p *printer) varDecl(v *Var) {
	p.tabs()
	if v.Linkage != "" {
		p.w.WriteString("." + v.Linkage + " ")
	}
	p.w.WriteString("." + v.Space)
	for _, a := range v.Attributes {
		p.w.WriteString(" " + a)
	}
	if v.Align > 0 {
		p.w.WriteString(" .align " + strconv.Itoa(v.Align))
	}
	if v.Vector > 0 {
		p.w.WriteString(" .v" + strconv.Itoa(v.Vector))
	}
	p.w.WriteString(" ." + v.Type + " ")
	for i, n := range v.Names {
		if i > 0 {
			p.w.WriteString(", ")
		}
		p.w.WriteString(n.Name)
		if n.Count > 0 {
			p.w.WriteString("<" + strconv.Itoa(n.Count) + ">")
		}
		p.dims(n.Dims)
		if n.Init != nil {
			p.w.WriteString(" = ")
			p.operand(n.Init)
		}
	}
	p.w.WriteString(";\n")
}

func (p *printer) dims(dims []int) {
	for _, d := range dims {
		if d < 0 {
			p.w.WriteString("[]")
		} else {
			p.w.WriteString("[" + strconv.Itoa(d) + "]")
		}
	}
}

func (p *printer) param(pr *Param) {
	p.w.WriteString("." + pr.Space)
	if pr.Align > 0 {
		p.w.WriteString(" .align " + strconv.Itoa(pr.Align))
	}
	if pr.Vector > 0 {
		p.w.WriteString(" .v" + strconv.Itoa(pr.Vector))
	}
	p.w.WriteString(" ." + pr.Type)
	if pr.Ptr {
		p.w.WriteString(" .ptr")
		if pr.PtrSpace != "" {
			p.w.WriteString(" ." + pr.PtrSpace)
		}
		if pr.PtrAlign > 0 {
			p.w.WriteString(" .align " + strconv.Itoa(pr.PtrAlign))
		}
	}
	p.w.WriteString(" " + pr.Name)
	p.dims(pr.Dims)
}

func (p *printer) params(ps []*Param, multiline bool) {
	p.w.WriteByte('(')
	for i, pr := range ps {
		if i > 0 {
			p.w.WriteByte(',')
			if !multiline {
				p.w.WriteByte(' ')
			}
		}
		if multiline {
			p.w.WriteString("\n\t")
		}
		p.param(pr)
	}
	if multiline && len(ps) > 0 {
		p.w.WriteByte('\n')
	}
	p.w.WriteByte(')')
}

func (p *printer) function(f *Function) {
	if f.Linkage != "" {
		p.w.WriteString("." + f.Linkage + " ")
	}
	if f.Entry {
		p.w.WriteString(".entry ")
	} else {
		p.w.WriteString(".func ")
	}
	for _, a := range f.Attributes {
		p.w.WriteString(a + " ")
	}
	if len(f.Returns) > 0 {
		p.params(f.Returns, false)
		p.w.WriteByte(' ')
	}
	p.w.WriteString(f.Name)
	p.params(f.Params, true)
	p.w.WriteByte('\n')
	for _, d := range f.Directives {
		p.w.WriteString("." + d.Name)
		if len(d.Args) > 0 {
			p.w.WriteString(" " + joinTokens(d.Args))
		}
		if d.Name == "pragma" {
			p.w.WriteByte(';')
		}
		p.w.WriteByte('\n')
	}
	if !f.HasBody {
		p.w.WriteString(";\n")
		return
	}
	p.w.WriteString("{\n")
	p.indent = 1
	p.body(f.Body)
	p.indent = 0
	p.w.WriteString("}\n")
}

func (p *printer) body(body []Stmt) {
	for _, s := range body {
		switch s := s.(type) {
		case *Instruction:
			p.tabs()
			p.instruction(s)
			p.w.WriteByte('\n')
		case *Label:
			p.w.WriteString(s.Name + ":\n")
		case *Var:
			p.varDecl(s)
		case *Directive:
			p.directive(s)
		case *Block:
			p.tabs()
			p.w.WriteString("{\n")
			p.indent++
			p.body(s.Body)
			p.indent--
			p.tabs()
			p.w.WriteString("}\n")
		}
	}
}

func (p *printer) instruction(in *Instruction) {
	if in.Guard != "" {
		p.w.WriteByte('@')
		if in.GuardNot {
			p.w.WriteByte('!')
		}
		p.w.WriteString(in.Guard + " ")
	}
	p.w.WriteString(in.Opcode)
	for _, m := range in.Modifiers {
		p.w.WriteString("." + m)
	}
	for i := range in.Operands {
		if i == 0 {
			p.w.WriteByte(' ')
		} else {
			p.w.WriteString(", ")
		}
		p.operand(&in.Operands[i])
	}
	p.w.WriteByte(';')
}

func (p *printer) offset(n int64) {
	if n != 0 {
		p.w.WriteString("+" + strconv.FormatInt(n, 10))
	}
}

func (p *printer) operand(o *Operand) {
	switch o.Kind {
	case Reg, LabelRef:
		if o.Not {
			p.w.WriteByte('!')
		}
		p.w.WriteString(o.Name)
	case Imm:
		p.w.WriteString(o.Name)
	case Sym:
		if o.Not {
			p.w.WriteByte('!')
		}
		if o.Generic {
			p.w.WriteString("generic(" + o.Name + ")")
		} else {
			p.w.WriteString(o.Name)
		}
		p.offset(o.Offset)
	case Addr:
		p.w.WriteByte('[')
		if o.Base != nil {
			p.operand(o.Base)
		}
		p.offset(o.Offset)
		for i := range o.Elems {
			p.w.WriteString(", ")
			p.operand(&o.Elems[i])
		}
		p.w.WriteByte(']')
	case Vec, List:
		open, end := "{", "}"
		if o.Kind == List {
			open, end = "(", ")"
		}
		p.w.WriteString(open)
		for i := range o.Elems {
			if i > 0 {
				p.w.WriteString(", ")
			}
			p.operand(&o.Elems[i])
		}
		p.w.WriteString(end)
	case Pair:
		for i := range o.Elems {
			if i > 0 {
				p.w.WriteByte('|')
			}
			p.operand(&o.Elems[i])
		}
	}
}
