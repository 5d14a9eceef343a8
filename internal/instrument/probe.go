package instrument

import (
	"fmt"
	"strings"

	"github.com/gpurr/gpurr/internal/ptx"
)

// ProbeSymbol is the module-scope variable InjectProbes adds: the device address of the
// probe buffer, which the runner sets (cuModuleGetGlobal) before the launch.
const ProbeSymbol = "gpurr_probe_buf"

// ProbeRecordBytes is the size of one CTA's record in the probe buffer: the earliest entry
// and latest exit %globaltimer of its threads (u64 at 0 and 8, atomic min and max: fill the
// entries with all ones and the exits with zeros first) and the SM it ran on (u32 at 16).
// The record of the CTA at (x, y, z) is at index x + nctaid.x * (y + nctaid.y * z).
const ProbeRecordBytes = 32

// InjectProbes makes every thread of kernel note, in its CTA's record of the probe buffer,
// when it started (entry) and when it reached each ret or exit, and the CTA's SM. The times are
// the GPU's %globaltimer (ns); a CTA's duration is its latest exit minus its earliest entry.
func InjectProbes(m *ptx.Module, kernel string) error {
	fn := m.Function(kernel)
	if fn == nil || !fn.HasBody {
		return fmt.Errorf("the module has no kernel %s", kernel)
	}
	if sm := targetSM(m); sm < 35 {
		return fmt.Errorf("the module targets %s: probes need sm_35 or newer (64-bit atomic min and max)", strings.Join(m.Target, ","))
	}
	if m.AddressSize == 32 {
		return fmt.Errorf("the module is 32-bit (.address_size 32): probes need 64-bit addresses")
	}
	if err := declareVar(m, ProbeSymbol, ".visible .global .align 8 .u64 "+ProbeSymbol+";\n"); err != nil {
		return err
	}
	entry, err := parseBody(`.reg .u64 %gpurr_pa;
{
.reg .u64 %gpurr_b, %gpurr_t;
.reg .u32 %gpurr_c, %gpurr_x;
ld.global.u64 %gpurr_b, [` + ProbeSymbol + `];
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
mov.u64 %gpurr_t, %globaltimer;
atom.global.min.u64 %gpurr_t, [%gpurr_pa], %gpurr_t;
mov.u32 %gpurr_x, %smid;
st.global.u32 [%gpurr_pa+16], %gpurr_x;
}
`)
	if err != nil {
		return err
	}
	exit := func() []ptx.Stmt {
		b, _ := parseBody(`{
.reg .u64 %gpurr_t;
mov.u64 %gpurr_t, %globaltimer;
atom.global.max.u64 %gpurr_t, [%gpurr_pa+8], %gpurr_t;
}
`)
		return b
	}
	fn.Body = insertBefore(fn.Body, func(in *ptx.Instruction) []ptx.Stmt {
		if in.Opcode == "ret" || in.Opcode == "exit" {
			return exit()
		}
		return nil
	})
	fn.Body = append(entry, fn.Body...)
	return nil
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
