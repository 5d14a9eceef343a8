// Package xla reads the optimized HLO modules that XLA dumps as text
// (--xla_dump_to with --xla_dump_hlo_as_text) and maps the kernels XLA
// launches back to what made them: the fusion a kernel was emitted for, the
// JAX op name and the Python source lines of the instructions fused into it.
//
// A dump holds, per compiled module, MODULE.sm_X_gpu_after_optimizations.txt
// (the HLO text with per-instruction metadata={op_name=... stack_frame_id=N}
// and the module's FileNames, FunctionNames, FileLocations and StackFrames
// tables, which resolve a stack frame to file:line) and, from newer XLA,
// MODULE.thunk_sequence.txt (each kernel as launched, with its grid and
// block). Kernel names are the fusion's HLO name with every character
// outside [A-Za-z0-9_] made '_' (gemm_fusion_dot.2 launches as
// gemm_fusion_dot_2).
package xla

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Line is one Python source line an HLO instruction came from.
type Line struct {
	File     string
	Line     uint32
	Function string
}

// Site is what one kernel of one module computes.
type Site struct {
	Module string // the HLO module's name, e.g. jit_step
	File   string // the dump file it was read from, base name
	Fusion string // the HLO instruction the kernel was emitted for, e.g. gemm_fusion_dot.2
	OpName string // the JAX op name of the fusion's root (or of the fusion itself)
	// Lines are the distinct source lines of the instructions fused into
	// the kernel: the root's first, then the others in the module's order.
	Lines []Line
	Grid  [3]uint32 // from the thunk sequence; zero when the dump has none
	Block [3]uint32
}

// Module is one optimized HLO module of a dump.
type Module struct {
	Name    string
	File    string
	Kernels map[string]*Site // by kernel name as launched
}

// Dump is a directory of XLA dumps, indexed by kernel name.
type Dump struct {
	Modules []*Module
	byName  map[string][]*Site
	mods    map[*Site]*Module
}

// afterOptimizations names the optimized module's text; the buffer
// assignment and memory reports that share its prefix are other files.
var afterOptimizations = regexp.MustCompile(`^(.*)\.sm_[0-9a-z.]+_gpu_after_optimizations\.txt$`)

// Keep reports whether a file of an XLA dump directory is one that Read
// uses; a recorder deletes the others to keep the recording small.
func Keep(name string) bool {
	return afterOptimizations.MatchString(name) || strings.HasSuffix(name, ".thunk_sequence.txt")
}

// Read indexes the dump directory dir. A directory with files but no
// module Read can parse is an error: a dump of an XLA whose text it does
// not know. Modules that fail to parse next to others that do are skipped.
func Read(dir string) (*Dump, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	d := &Dump{byName: map[string][]*Site{}, mods: map[*Site]*Module{}}
	var firstErr error
	seen := 0
	for _, e := range entries {
		m := afterOptimizations.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		seen++
		mod, err := readModule(filepath.Join(dir, e.Name()), filepath.Join(dir, m[1]+".thunk_sequence.txt"))
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		d.add(mod)
	}
	switch {
	case seen == 0:
		return nil, fmt.Errorf("%s: no *_gpu_after_optimizations.txt module", dir)
	case len(d.Modules) == 0:
		return nil, firstErr
	}
	return d, nil
}

func (d *Dump) add(m *Module) {
	d.Modules = append(d.Modules, m)
	names := make([]string, 0, len(m.Kernels))
	for k := range m.Kernels {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		s := m.Kernels[k]
		d.byName[k] = append(d.byName[k], s)
		d.mods[s] = m
	}
}

func readModule(path, thunks string) (*Module, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	m.File = filepath.Base(path)
	for _, s := range m.Kernels {
		s.File = m.File
	}
	if t, err := os.Open(thunks); err == nil {
		defer t.Close()
		if err := m.readThunks(t); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(thunks), err)
		}
	}
	return m, nil
}

// Candidates are the sites of the kernel name in every module that has one.
func (d *Dump) Candidates(kernel string) []*Site { return d.byName[kernel] }

// Find returns the site of a launch of kernel: among the modules with a
// kernel of that name, those that hold every kernel of the launched CUDA
// module (moduleKernels, when known), then those whose thunk sequence
// launches it with this grid and block. Each filter applies only when it
// leaves a candidate. ambiguous is true when the candidates left differ in
// op name or lines: then site is nil, and n says how many modules remain.
func (d *Dump) Find(kernel string, moduleKernels []string, grid, block [3]uint32) (site *Site, n int, ambiguous bool) {
	c := d.byName[kernel]
	if len(c) == 0 {
		return nil, 0, false
	}
	c = narrow(c, func(s *Site) bool {
		for _, k := range moduleKernels {
			if d.mods[s].Kernels[k] == nil {
				return false
			}
		}
		return true
	})
	c = narrow(c, func(s *Site) bool { return s.Grid == grid && s.Block == block })
	for _, s := range c[1:] {
		if s.OpName != c[0].OpName || !slices.Equal(s.Lines, c[0].Lines) {
			return nil, len(c), true
		}
	}
	return c[0], len(c), false
}

func narrow(c []*Site, keep func(*Site) bool) []*Site {
	var out []*Site
	for _, s := range c {
		if keep(s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return c
	}
	return out
}

// KernelName is the name XLA gives the kernel it emits for an HLO
// instruction.
func KernelName(instruction string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, instruction)
}

// instruction is one line of a computation.
type instruction struct {
	name, op, calls string
	operands        []string
	root            bool
	opName          string
	frame           int
}

type location struct{ file, function, line int }

type parser struct {
	files, functions map[int]string
	locations        map[int]location
	frames           map[int]int // stack frame -> file location
	comps            map[string][]instruction
	order            []string
}

var (
	header      = regexp.MustCompile(`^HloModule ([^ ,]+)`)
	compStart   = regexp.MustCompile(`^(?:ENTRY )?%([^ ]+) .*\{$`)
	instrLine   = regexp.MustCompile(`^\s+(ROOT )?%([^ ]+) = .*? ([a-z][a-z0-9-]*)\(`)
	callsAttr   = regexp.MustCompile(`, calls=%([^ ,]+)`)
	tableRow    = regexp.MustCompile(`^(\d+) (.*)$`)
	fieldsInRow = regexp.MustCompile(`(\w+)=(\d+)`)
	operandName = regexp.MustCompile(`%([^ ,)]+)`)
)

// Parse reads one module's optimized HLO text and returns its fusions as
// kernels.
func Parse(r io.Reader) (*Module, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	p := &parser{files: map[int]string{}, functions: map[int]string{}, locations: map[int]location{},
		frames: map[int]int{}, comps: map[string][]instruction{}}
	m := &Module{Kernels: map[string]*Site{}}
	table, comp := "", ""
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if n == 1 {
			h := header.FindStringSubmatch(line)
			if h == nil {
				return nil, fmt.Errorf("line 1: no HloModule header")
			}
			m.Name = h[1]
			continue
		}
		switch {
		case line == "":
			table = ""
		case comp != "":
			if line == "}" {
				comp = ""
				continue
			}
			if in, ok := parseInstruction(line); ok {
				p.comps[comp] = append(p.comps[comp], in)
			}
		case line == "FileNames" || line == "FunctionNames" || line == "FileLocations" || line == "StackFrames":
			table = line
		case table != "":
			if err := p.row(table, line); err != nil {
				return nil, fmt.Errorf("line %d: %s: %w", n, table, err)
			}
		default:
			if c := compStart.FindStringSubmatch(line); c != nil {
				comp = c[1]
				p.order = append(p.order, comp)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if m.Name == "" {
		return nil, fmt.Errorf("empty file")
	}
	for _, comp := range p.order {
		for _, in := range p.comps[comp] {
			if in.op != "fusion" || in.calls == "" {
				continue
			}
			s := &Site{Module: m.Name, Fusion: in.name}
			p.describe(s, in)
			m.Kernels[KernelName(in.name)] = s
		}
	}
	return m, nil
}

func (p *parser) row(table, line string) error {
	r := tableRow.FindStringSubmatch(line)
	if r == nil {
		return fmt.Errorf("unexpected row %.60q", line)
	}
	id, _ := strconv.Atoi(r[1])
	switch table {
	case "FileNames", "FunctionNames":
		s, err := strconv.Unquote(r[2])
		if err != nil {
			return fmt.Errorf("row %d: %v", id, err)
		}
		if table == "FileNames" {
			p.files[id] = s
		} else {
			p.functions[id] = s
		}
	case "FileLocations":
		f := fields(r[2])
		p.locations[id] = location{file: f["file_name_id"], function: f["function_name_id"], line: f["line"]}
	case "StackFrames":
		p.frames[id] = fields(r[2])["file_location_id"]
	}
	return nil
}

func fields(s string) map[string]int {
	out := map[string]int{}
	for _, m := range fieldsInRow.FindAllStringSubmatch(s, -1) {
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	return out
}

func parseInstruction(line string) (instruction, bool) {
	m := instrLine.FindStringSubmatch(line)
	if m == nil {
		return instruction{}, false
	}
	in := instruction{root: m[1] != "", name: m[2], op: m[3]}
	args := line[len(m[0]):]
	if end := strings.IndexByte(args, ')'); end >= 0 {
		for _, o := range operandName.FindAllStringSubmatch(args[:end], -1) {
			in.operands = append(in.operands, o[1])
		}
	}
	if c := callsAttr.FindStringSubmatch(line); c != nil {
		in.calls = c[1]
	}
	if i := strings.Index(line, "metadata={"); i >= 0 {
		in.opName, in.frame = metadata(line[i+len("metadata={"):])
	}
	return in, true
}

// metadata reads op_name and stack_frame_id from the text after
// "metadata={": space-separated key=value pairs up to '}', values quoted
// with backslash escapes or bare.
func metadata(s string) (opName string, frame int) {
	for len(s) > 0 && s[0] != '}' {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return
		}
		key, rest := s[:eq], s[eq+1:]
		var val string
		if strings.HasPrefix(rest, `"`) {
			end := 1
			for end < len(rest) && rest[end] != '"' {
				if rest[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(rest) {
				return
			}
			val, rest = unescape(rest[1:end]), rest[end+1:]
		} else {
			end := strings.IndexAny(rest, " }")
			if end < 0 {
				return
			}
			val, rest = rest[:end], rest[end:]
		}
		switch key {
		case "op_name":
			opName = val
		case "stack_frame_id":
			frame, _ = strconv.Atoi(val)
		}
		s = strings.TrimLeft(rest, " ")
	}
	return
}

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// describe fills a fusion's op name and lines from the instructions of the
// computation it calls (and of fusions nested in it), root first: the
// instruction whose result the kernel writes. A multi-output fusion's root
// is a tuple of its results, which come first then.
func (p *parser) describe(s *Site, fusion instruction) {
	var ins []instruction
	var walk func(comp string, depth int)
	walk = func(comp string, depth int) {
		if depth > 8 {
			return
		}
		for _, in := range p.comps[comp] {
			ins = append(ins, in)
			if in.op == "fusion" && in.calls != "" {
				walk(in.calls, depth+1)
			}
		}
	}
	walk(fusion.calls, 0)
	var first []string // the names of the instructions the kernel writes
	for _, in := range p.comps[fusion.calls] {
		if in.root {
			first = []string{in.name}
			if in.op == "tuple" {
				first = in.operands
			}
		}
	}
	rank := func(in instruction) int {
		if i := slices.Index(first, in.name); i >= 0 {
			return i
		}
		return len(first)
	}
	slices.SortStableFunc(ins, func(a, b instruction) int { return rank(a) - rank(b) })
	ins = append(ins, fusion) // the fusion's own metadata, last
	for _, in := range ins {
		if s.OpName == "" {
			s.OpName = in.opName
		}
		if l, ok := p.line(in.frame); ok && !slices.Contains(s.Lines, l) {
			s.Lines = append(s.Lines, l)
		}
	}
}

func (p *parser) line(frame int) (Line, bool) {
	if frame == 0 {
		return Line{}, false
	}
	loc, ok := p.locations[p.frames[frame]]
	if !ok || loc.line <= 0 {
		return Line{}, false
	}
	return Line{File: p.files[loc.file], Line: uint32(loc.line), Function: p.functions[loc.function]}, true
}

var thunkLine = regexp.MustCompile(`^\d+: \S+ \[[^]]*\] (\S+) grid: \[(\d+), (\d+), (\d+)\] threads: \[(\d+), (\d+), (\d+)\]`)

// readThunks adds each kernel's grid and block from a thunk sequence.
func (m *Module) readThunks(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		t := thunkLine.FindStringSubmatch(sc.Text())
		if t == nil {
			continue
		}
		s := m.Kernels[t[1]]
		if s == nil {
			continue
		}
		for i := range 3 {
			g, _ := strconv.ParseUint(t[2+i], 10, 32)
			b, _ := strconv.ParseUint(t[5+i], 10, 32)
			s.Grid[i], s.Block[i] = uint32(g), uint32(b)
		}
	}
	return sc.Err()
}

// Text is a site's lines as a launch's python_line shows them: the first
// as file:line function, and how many more the kernel fuses; "" without
// lines.
func (s *Site) Text() string {
	if len(s.Lines) == 0 {
		return ""
	}
	l := s.Lines[0]
	t := fmt.Sprintf("%s:%d %s", l.File, l.Line, l.Function)
	if n := len(s.Lines) - 1; n > 0 {
		t += fmt.Sprintf(" +%d more", n)
	}
	return t
}
