package instrument

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gpurr/gpurr/internal/ptx"
)

// The access log says who touched the bytes a race changed: InjectAccessLog makes a kernel
// note, before each of its global and shared loads, stores and atomics, the address it
// touches, the instruction, the thread, its CTA and how many barriers the thread has passed
// (its epoch), into a fixed-size buffer (its address in ProbeSymbol, as a probe buffer). A
// global or generic access is noted only when its address falls in [AccessLogLo,
// AccessLogHi), module variables the runner sets to the changed bytes; every shared access is
// noted (shared memory is per CTA, and a race in it changes global bytes only through later
// stores). Two accesses of one address, one a store, by threads no barrier separates (another
// CTA, or the same epoch of the same CTA) are the two sides of a race (race.Conflicts).
const (
	AccessLogLo  = "gpurr_log_lo"  // .u64: the first global byte watched
	AccessLogHi  = "gpurr_log_hi"  // .u64: one past the last
	AccessLogCap = "gpurr_log_cap" // .u32: the records the buffer holds

	// AccessHeaderBytes is the buffer's header: a u32 count of the accesses noted, which goes
	// on counting past AccessLogCap (zero it first).
	AccessHeaderBytes = 32
	// AccessRecordBytes is one record after the header: the address (u64 at 0), the
	// instruction's ordinal among the kernel's (u32 at 8), AccessStore|AccessShared and the
	// access's size in bytes << 8 (u32 at 12), the CTA's linear index (u32 at 16), the
	// thread's in its CTA (u32 at 20), its epoch (u32 at 24).
	AccessRecordBytes = 32
)

// Access record flags.
const (
	AccessStore  = 1 // a store, or an atomic (which stores)
	AccessShared = 2 // a shared-memory address, in its CTA's window
)

const epochReg = "%gpurr_epoch"

// InjectAccessLog puts the access log into kernel of m and returns the accesses it watches.
// Run it before InjectDelays (whose own load of the seed it would watch), with the points
// InjectDelays takes picked before it.
func InjectAccessLog(m *ptx.Module, kernel string) ([]Point, error) {
	fn := m.Function(kernel)
	if fn == nil || !fn.HasBody {
		return nil, fmt.Errorf("the module has no kernel %s", kernel)
	}
	if m.AddressSize == 32 {
		return nil, fmt.Errorf("the module is 32-bit (.address_size 32): the access log needs 64-bit addresses")
	}
	for _, d := range []string{
		".visible .global .align 8 .u64 " + ProbeSymbol + ";\n",
		".visible .global .align 8 .u64 " + AccessLogLo + ";\n",
		".visible .global .align 8 .u64 " + AccessLogHi + ";\n",
		".visible .global .align 4 .u32 " + AccessLogCap + ";\n",
	} {
		name := strings.TrimSuffix(strings.Fields(d)[len(strings.Fields(d))-1], ";")
		if err := declareVar(m, name, d); err != nil {
			return nil, err
		}
	}
	widths := regWidths(fn.Body)
	index := map[*ptx.Instruction]int{}
	for i, in := range fn.Instructions() {
		index[in] = i
	}
	var watched []Point
	var failed error
	fn.Body = insertAround(fn.Body, func(in *ptx.Instruction) (before, after []ptx.Stmt) {
		if failed != nil {
			return nil, nil
		}
		if c := ClassOf(in); c == Barrier {
			return nil, mustParse(&failed, "add.u32 "+epochReg+", "+epochReg+", 1;\n")
		}
		a, ok := accessOf(in)
		if !ok {
			return nil, nil
		}
		watched = append(watched, Point{Index: index[in], Instr: in, Class: ClassOf(in)})
		text, err := logBlock(a, uint32(index[in]), in.Guard, in.GuardNot, widths)
		if err != nil {
			failed = err
			return nil, nil
		}
		return mustParse(&failed, text), nil
	})
	if failed != nil {
		return nil, failed
	}
	start, err := parseBody(".reg .u32 " + epochReg + ";\nmov.u32 " + epochReg + ", 0;\n")
	if err != nil {
		return nil, err
	}
	fn.Body = append(start, fn.Body...)
	return watched, nil
}

func mustParse(failed *error, text string) []ptx.Stmt {
	s, err := parseBody(text)
	if err != nil && *failed == nil {
		*failed = err
	}
	return s
}

// insertAround is insertBefore with statements after an instruction too.
func insertAround(body []ptx.Stmt, add func(*ptx.Instruction) (before, after []ptx.Stmt)) []ptx.Stmt {
	out := make([]ptx.Stmt, 0, len(body))
	for _, s := range body {
		var after []ptx.Stmt
		switch s := s.(type) {
		case *ptx.Instruction:
			var before []ptx.Stmt
			before, after = add(s)
			out = append(out, before...)
		case *ptx.Block:
			s.Body = insertAround(s.Body, add)
		}
		out = append(out, s)
		out = append(out, after...)
	}
	return out
}

// access is what the log needs of a memory instruction.
type access struct {
	addr   ptx.Operand // the [address] operand
	store  bool
	shared bool
	size   int
}

// accessOf says whether in is a global, generic or shared load, store or atomic, and how.
func accessOf(in *ptx.Instruction) (access, bool) {
	var a access
	switch ClassOf(in) {
	case GlobalLoad:
	case GlobalStore:
		a.store = true
	case SharedLoad:
		a.shared = true
	case SharedStore:
		a.shared, a.store = true, true
	case Atomic:
		a.store = true
		a.shared = in.Has("shared")
		if !a.shared && !in.Has("global") && hasSpace(in) {
			return a, false // an atomic on another space (shared::cluster)
		}
	default:
		return a, false
	}
	found := false
	for _, o := range in.Operands {
		if o.Kind == ptx.Addr && o.Base != nil && len(o.Elems) == 0 {
			a.addr, found = o, true
			break
		}
	}
	if !found || (a.addr.Base.Kind != ptx.Reg && a.addr.Base.Kind != ptx.Sym) {
		return a, false
	}
	a.size = accessSize(in)
	return a, true
}

func hasSpace(in *ptx.Instruction) bool {
	for _, m := range in.Modifiers {
		if strings.HasPrefix(m, "shared") || m == "local" || m == "param" || m == "const" {
			return true
		}
	}
	return false
}

var typeBits = regexp.MustCompile(`^[bsuf](8|16|32|64|128)$`)

// accessSize is the bytes an instruction's type and vector width make, 0 when unknown.
func accessSize(in *ptx.Instruction) int {
	vec, bits := 1, 0
	for _, m := range in.Modifiers {
		switch m {
		case "v2":
			vec = 2
		case "v4":
			vec = 4
		case "v8":
			vec = 8
		}
		if s := typeBits.FindStringSubmatch(m); s != nil {
			bits, _ = strconv.Atoi(s[1])
		}
	}
	return vec * bits / 8
}

// regWidths maps the registers a body declares (a parameterized %r<N> by its prefix) to their
// bits.
func regWidths(body []ptx.Stmt) map[string]int {
	out := map[string]int{}
	for _, s := range body {
		v, ok := s.(*ptx.Var)
		if !ok || v.Space != "reg" {
			continue
		}
		bits := 0
		if s := typeBits.FindStringSubmatch(v.Type); s != nil {
			bits, _ = strconv.Atoi(s[1])
		}
		for _, n := range v.Names {
			out[n.Name] = bits
		}
	}
	return out
}

func regWidth(widths map[string]int, name string) int {
	if w, ok := widths[name]; ok {
		return w
	}
	return widths[strings.TrimRight(name, "0123456789")]
}

// logBlock is the PTX that notes one access of instruction point.
// A guarded access is noted only where its guard holds.
func logBlock(a access, point uint32, guard string, guardNot bool, widths map[string]int) (string, error) {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("{")
	w(".reg .u64 %%gpurr_a, %%gpurr_b, %%gpurr_e, %%gpurr_x;")
	w(".reg .u32 %%gpurr_n, %%gpurr_c, %%gpurr_v, %%gpurr_w;")
	w(".reg .pred %%gpurr_q, %%gpurr_g;")
	switch base := a.addr.Base; base.Kind {
	case ptx.Reg:
		switch regWidth(widths, base.Name) {
		case 64:
			w("mov.b64 %%gpurr_a, %s;", base.Name)
		case 32:
			w("cvt.u64.u32 %%gpurr_a, %s;", base.Name)
		default:
			return "", fmt.Errorf("the address register %s has no 32- or 64-bit declaration", base.Name)
		}
	case ptx.Sym:
		w("mov.u64 %%gpurr_a, %s;", base.Name)
	}
	if off := a.addr.Offset + a.addr.Base.Offset; off != 0 {
		w("add.s64 %%gpurr_a, %%gpurr_a, %d;", off)
	}
	if a.shared {
		w("setp.eq.u64 %%gpurr_q, %%gpurr_a, %%gpurr_a;")
	} else {
		w("ld.global.u64 %%gpurr_x, [%s];", AccessLogLo)
		w("setp.ge.u64 %%gpurr_q, %%gpurr_a, %%gpurr_x;")
		w("ld.global.u64 %%gpurr_x, [%s];", AccessLogHi)
		w("setp.lt.and.u64 %%gpurr_q, %%gpurr_a, %%gpurr_x, %%gpurr_q;")
	}
	if guard != "" {
		if guardNot {
			w("not.pred %%gpurr_g, %s;", guard)
		} else {
			w("mov.pred %%gpurr_g, %s;", guard)
		}
		w("and.pred %%gpurr_q, %%gpurr_q, %%gpurr_g;")
	}
	w("ld.global.u64 %%gpurr_b, [%s];", ProbeSymbol)
	w("@%%gpurr_q atom.global.add.u32 %%gpurr_n, [%%gpurr_b], 1;")
	w("ld.global.u32 %%gpurr_c, [%s];", AccessLogCap)
	w("setp.lt.and.u32 %%gpurr_q, %%gpurr_n, %%gpurr_c, %%gpurr_q;")
	w("mul.wide.u32 %%gpurr_e, %%gpurr_n, %d;", AccessRecordBytes)
	w("add.u64 %%gpurr_e, %%gpurr_e, %%gpurr_b;")
	w("@%%gpurr_q st.global.u64 [%%gpurr_e+%d], %%gpurr_a;", AccessHeaderBytes)
	w("@%%gpurr_q st.global.u32 [%%gpurr_e+%d], %d;", AccessHeaderBytes+8, point)
	flags := a.size << 8
	if a.store {
		flags |= AccessStore
	}
	if a.shared {
		flags |= AccessShared
	}
	w("@%%gpurr_q st.global.u32 [%%gpurr_e+%d], %d;", AccessHeaderBytes+12, flags)
	// The CTA's linear index, then the thread's; special registers are read with mov only.
	linear := func(ids, sizes [3]string, at int) {
		w("mov.u32 %%gpurr_v, %s;", ids[2])
		for _, i := range []int{1, 0} {
			w("mov.u32 %%gpurr_w, %s;", sizes[i])
			w("mul.lo.u32 %%gpurr_v, %%gpurr_v, %%gpurr_w;")
			w("mov.u32 %%gpurr_w, %s;", ids[i])
			w("add.u32 %%gpurr_v, %%gpurr_v, %%gpurr_w;")
		}
		w("@%%gpurr_q st.global.u32 [%%gpurr_e+%d], %%gpurr_v;", AccessHeaderBytes+at)
	}
	linear([3]string{"%ctaid.x", "%ctaid.y", "%ctaid.z"}, [3]string{"%nctaid.x", "%nctaid.y", "%nctaid.z"}, 16)
	linear([3]string{"%tid.x", "%tid.y", "%tid.z"}, [3]string{"%ntid.x", "%ntid.y", "%ntid.z"}, 20)
	w("@%%gpurr_q st.global.u32 [%%gpurr_e+%d], %s;", AccessHeaderBytes+24, epochReg)
	w("}")
	return b.String(), nil
}
