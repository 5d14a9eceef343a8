package instrument

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpurr/gpurr/internal/ptx"
	"github.com/gpurr/gpurr/recording"
)

// ProbeSymbol is the module-scope variable InjectProbes adds: the device address of the
// probe buffer, which the runner sets (cuModuleGetGlobal) before the launch.
const ProbeSymbol = "gpurr_probe_buf"

// ProbeRecordBytes is the size of one CTA's record in the probe buffer, the recording's own
// layout (recording.ProbeRecordBytes): the earliest entry of its warps (noted by each warp's
// lane 0) and the latest exit of its threads (noted by one thread of each group of a warp that
// exits together) on %globaltimer (u64 at 0 and 8, atomic min and max: fill the entries with
// all ones and the exits with zeros first), the SM it ran on (u32 at 16), and how many times
// its threads ran the counted instructions (u64 at 24, zero first). The record of the CTA at
// (x, y, z) is at index x + nctaid.x * (y + nctaid.y * z).
const ProbeRecordBytes = recording.ProbeRecordBytes

// InjectProbes makes every warp of kernel note, in its CTA's record of the probe buffer, when
// it started (entry, by its lane 0) and every thread when it reached each ret or exit, and the
// CTA's SM. The times are the GPU's %globaltimer (ns); a CTA's duration is its latest exit
// minus its earliest entry.
// With a non-empty count, each thread also counts, in a register, the instructions count picks
// it runs (a guarded one only when its guard holds), and adds its count to the record's at
// exit: one atomic per thread, not one per instruction. It returns how many instructions of
// the kernel are counted.
func InjectProbes(m *ptx.Module, kernel string, count Selection) (counted int, err error) {
	return injectProbes(m, kernel, count, false)
}

// ProbeParam is the parameter InjectLiveProbes appends to the kernel: the device address of
// the launch's probe records, which the agent passes with each launch it swaps in.
const ProbeParam = "gpurr_probe_arg"

// InjectLiveProbes is InjectProbes for a program's own launches (gpurr record --probe), where
// launches of one kernel on several streams run at once: each gets its records' address as
// one more parameter (ProbeParam, a .u64 after the kernel's own) rather than through a
// module variable. Its records need no filling: they start zeroed, and the entry time is
// stored complemented (atomic max of ^%globaltimer), so a reader takes ^word 0 for the entry
// and the layout is otherwise ProbeRecordBytes's.
func InjectLiveProbes(m *ptx.Module, kernel string, count Selection) (counted int, err error) {
	return injectProbes(m, kernel, count, true)
}

func injectProbes(m *ptx.Module, kernel string, count Selection, live bool) (counted int, err error) {
	fn := m.Function(kernel)
	if fn == nil || !fn.HasBody {
		return 0, fmt.Errorf("the module has no kernel %s", kernel)
	}
	if sm := targetSM(m); sm < 70 {
		return 0, fmt.Errorf("the module targets %s: probes need sm_70 or newer (warp votes among the threads that exit)", strings.Join(m.Target, ","))
	}
	if !versionAtLeast(m.Version, 6, 2) {
		return 0, fmt.Errorf("the module is PTX %q: probes need PTX 6.2 or newer (activemask)", m.Version)
	}
	if m.AddressSize == 32 {
		return 0, fmt.Errorf("the module is 32-bit (.address_size 32): probes need 64-bit addresses")
	}
	picked := map[*ptx.Instruction]bool{}
	if len(count.Classes)+len(count.Patterns) > 0 {
		for _, p := range Points(fn, count) {
			picked[p.Instr] = true
		}
	}
	load := "ld.global.u64 %gpurr_b, [" + ProbeSymbol + "];\n"
	// Lane 0 of each warp notes the entry, with a reduction, which no thread waits for: at
	// a kernel's start a warp's lanes run together, and 32 atomics on one address per warp, each
	// waited for, cost a GEMM a quarter of its time.
	entryNote := "@%gpurr_lead red.global.min.u64 [%gpurr_pa], %gpurr_t;\n"
	if live {
		for _, p := range fn.Params {
			if p.Name == ProbeParam {
				return 0, fmt.Errorf("the kernel %s is instrumented already", kernel)
			}
		}
		fn.Params = append(fn.Params, &ptx.Param{Space: "param", Type: "u64", Name: ProbeParam})
		load = "ld.param.u64 %gpurr_b, [" + ProbeParam + "];\ncvta.to.global.u64 %gpurr_b, %gpurr_b;\n"
		entryNote = "not.b64 %gpurr_t, %gpurr_t;\n@%gpurr_lead red.global.max.u64 [%gpurr_pa], %gpurr_t;\n"
	} else if err := declareVar(m, ProbeSymbol, ".visible .global .align 8 .u64 "+ProbeSymbol+";\n"); err != nil {
		return 0, err
	}
	counter := "" // the thread's count, a register of the function's scope
	if len(picked) > 0 {
		counter = ".reg .u64 %gpurr_n;\nmov.u64 %gpurr_n, 0;\n"
	}
	entry, err := parseBody(`.reg .u64 %gpurr_pa;
{
.reg .u64 %gpurr_b, %gpurr_t;
.reg .u32 %gpurr_c, %gpurr_x;
.reg .pred %gpurr_lead;
` + load + `mov.u32 %gpurr_x, %laneid;
setp.eq.u32 %gpurr_lead, %gpurr_x, 0;
mov.u32 %gpurr_c, %ctaid.z;
mov.u32 %gpurr_x, %nctaid.y;
mul.lo.u32 %gpurr_c, %gpurr_c, %gpurr_x;
mov.u32 %gpurr_x, %ctaid.y;
add.u32 %gpurr_c, %gpurr_c, %gpurr_x;
mov.u32 %gpurr_x, %nctaid.x;
mul.lo.u32 %gpurr_c, %gpurr_c, %gpurr_x;
mov.u32 %gpurr_x, %ctaid.x;
add.u32 %gpurr_c, %gpurr_c, %gpurr_x;
mul.wide.u32 %gpurr_pa, %gpurr_c, ` + fmt.Sprint(ProbeRecordBytes) + `;
add.u64 %gpurr_pa, %gpurr_pa, %gpurr_b;
@%gpurr_lead mov.u64 %gpurr_t, %globaltimer;
` + entryNote + `mov.u32 %gpurr_x, %smid;
@%gpurr_lead st.global.u32 [%gpurr_pa+16], %gpurr_x;
}
` + counter)
	if err != nil {
		return 0, err
	}
	// Notes before an instruction follow its guard: a predicated-off instruction did not run,
	// and a guarded ret the thread does not take is not its exit.
	guard := func(in *ptx.Instruction) string {
		switch {
		case in.Guard == "":
			return ""
		case in.GuardNot:
			return "@!" + in.Guard + " "
		}
		return "@" + in.Guard + " "
	}
	var bodyErr error
	fn.Body = insertBefore(fn.Body, func(in *ptx.Instruction) []ptx.Stmt {
		g, add := guard(in), ""
		if picked[in] {
			add += g + "add.u64 %gpurr_n, %gpurr_n, 1;\n"
		}
		if in.Opcode == "ret" || in.Opcode == "exit" {
			add += exitNote(in)
			if len(picked) > 0 {
				add += g + "red.global.add.u64 [%gpurr_pa+24], %gpurr_n;\n"
			}
		}
		if add == "" {
			return nil
		}
		b, err := parseBody(add)
		if err != nil {
			bodyErr = err
		}
		return b
	})
	if bodyErr != nil {
		return 0, bodyErr
	}
	fn.Body = append(entry, fn.Body...)
	return len(picked), nil
}

// versionAtLeast says whether a .version "MAJOR.MINOR" is at least major.minor.
func versionAtLeast(v string, major, minor int) bool {
	a, b, ok := strings.Cut(v, ".")
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	if !ok || errA != nil || errB != nil {
		return false
	}
	return x > major || x == major && y >= minor
}

// exitNote is the exit time a ret or exit notes: one thread of those of its warp that take it
// (the lowest lane of the ballot of its guard among the active ones) reads %globaltimer and
// reduces it into the record's latest exit. The others reaching it with that thread exit with
// it; a warp whose lanes leave by different rets notes each group.
func exitNote(in *ptx.Instruction) string {
	ballot := ""
	if in.Guard != "" {
		not := ""
		if in.GuardNot {
			not = "!"
		}
		ballot = "vote.sync.ballot.b32 %gpurr_m, " + not + in.Guard + ", %gpurr_m;\n"
	}
	return `{
.reg .u64 %gpurr_t;
.reg .u32 %gpurr_m, %gpurr_e;
.reg .pred %gpurr_one;
activemask.b32 %gpurr_m;
` + ballot + `neg.s32 %gpurr_e, %gpurr_m;
and.b32 %gpurr_e, %gpurr_e, %gpurr_m;
mov.u32 %gpurr_m, %lanemask_eq;
setp.eq.u32 %gpurr_one, %gpurr_e, %gpurr_m;
@%gpurr_one mov.u64 %gpurr_t, %globaltimer;
@%gpurr_one red.global.max.u64 [%gpurr_pa+8], %gpurr_t;
}
`
}

// declareVar puts decl, the declaration of gpurr's module-scope variable name, before the
// module's first function, unless the module declares name already (instrumented twice).
func declareVar(m *ptx.Module, name, decl string) error {
	if hasVar(m, name) {
		return nil
	}
	items, err := parseItems(decl)
	if err != nil {
		return err
	}
	at := 0
	for i, it := range m.Items {
		if _, ok := it.(*ptx.Function); ok {
			at = i
			break
		}
	}
	m.Items = append(m.Items[:at], append(items, m.Items[at:]...)...)
	return nil
}

func hasVar(m *ptx.Module, name string) bool {
	for _, it := range m.Items {
		if v, ok := it.(*ptx.Var); ok {
			for _, n := range v.Names {
				if n.Name == name {
					return true
				}
			}
		}
	}
	return false
}

// parseItems parses module-scope declarations, without the header the parser needs them in.
func parseItems(decls string) ([]ptx.Item, error) {
	const header = ".version 8.0\n.target sm_90\n.address_size 64\n"
	m, err := ptx.Parse([]byte(header + decls))
	if err != nil {
		return nil, fmt.Errorf("gpurr's own PTX does not parse (a bug): %v", err)
	}
	return m.Items[3:], nil
}
