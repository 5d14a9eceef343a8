package ptx

import "fmt"

// RunDependence is an instruction that makes a kernel's output depend on the run, not only on
// the memory it reads: it reads a clock, or where on the GPU it runs, or allocates from the
// device heap (whose addresses differ from run to run).
type RunDependence struct {
	What     string // the special register ("%clock64") or the function called ("malloc")
	Line     int    // PTX line of the first instruction that does it
	Function string // the function holding that instruction: the kernel or a device function it calls
}

// String says it as replay reports it: "reads %clock64 (PTX line 36)".
func (d RunDependence) String() string {
	verb := "reads"
	if !runRegisters[d.What] {
		verb = "calls"
	}
	where := fmt.Sprintf("PTX line %d", d.Line)
	if d.Function != "" {
		where = fmt.Sprintf("PTX line %d, in %s", d.Line, d.Function)
	}
	return fmt.Sprintf("%s %s (%s)", verb, d.What, where)
}

// runRegisters are the special registers whose value differs from run to run: clocks and
// timers, and which SM and warp slot a thread landed on.
var runRegisters = map[string]bool{
	"%clock": true, "%clock64": true, "%clock_hi": true,
	"%globaltimer": true, "%globaltimer_lo": true, "%globaltimer_hi": true,
	"%smid": true, "%nsmid": true, "%warpid": true, "%nwarpid": true,
}

// runCalls are the external functions whose result differs from run to run: the device heap.
var runCalls = map[string]bool{"malloc": true}

// RunDependent lists what makes the kernel named entry depend on the run: the first read of
// each such special register and the first call of each such function, in the kernel and in
// the device functions it calls (Function names those), in the order met. Nil when the module
// has no kernel of that name, or it has none of them.
func (m *Module) RunDependent(entry string) []RunDependence {
	f := m.Function(entry)
	if f == nil || !f.HasBody {
		return nil
	}
	var out []RunDependence
	seen := map[string]bool{}
	visited := map[*Function]bool{}
	var walk func(f *Function)
	walk = func(f *Function) {
		visited[f] = true
		for _, in := range f.Instructions() {
			var callee *Function
			if in.Opcode == "call" {
				for _, o := range in.Operands {
					if o.Kind != Sym {
						continue
					}
					if runCalls[o.Name] && !seen[o.Name] {
						seen[o.Name] = true
						out = append(out, RunDependence{What: o.Name, Line: in.Line})
					}
					callee = m.Function(o.Name)
					break
				}
			}
			eachOperand(in.Operands, func(o *Operand) {
				if o.Kind == Reg && runRegisters[o.Name] && !seen[o.Name] {
					seen[o.Name] = true
					out = append(out, RunDependence{What: o.Name, Line: in.Line})
				}
			})
			if callee != nil && callee.HasBody && !visited[callee] {
				n := len(out)
				walk(callee)
				for i := n; i < len(out); i++ {
					if out[i].Function == "" {
						out[i].Function = callee.Name
					}
				}
			}
		}
	}
	walk(f)
	return out
}

// eachOperand calls fn on each operand and on those nested in it.
func eachOperand(ops []Operand, fn func(*Operand)) {
	for i := range ops {
		o := &ops[i]
		fn(o)
		if o.Base != nil {
			fn(o.Base)
		}
		eachOperand(o.Elems, fn)
	}
}
