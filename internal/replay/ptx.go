package replay

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/gpurr/gpurr/internal/fatbin"
)

// ModulePTX is PTX of a launch's kernel: what gpurr race and probe instrument, and what gpurr
// replay --ptx runs instead of the module's machine code, compiled by the driver's JIT for the
// GPU it runs on.
type ModulePTX struct {
	// Entries are the candidates, each with the architecture it targets (sm_NN as NN, 0 when
	// its text names none): a fat binary's PTX entries, else one.
	Entries []fatbin.PTX
	// From says where it came from: "the recording", "the recorded fat binary", a file's name.
	From   string
	fatbin bool // Entries are a fat binary's: Origin names the one picked
}

// NoPTXError says the recording holds no PTX of a launch's module: its machine code only.
type NoPTXError struct {
	Kernel string // demangled
	Module string // its SHA-256
	Fatbin bool   // the module is a fat binary of cubins only
	Arch   string // compute_NN of the recorded GPU, for the build hint
}

func (e *NoPTXError) Error() string {
	what := "and neither Triton's cache nor the program's fat binaries held it"
	if e.Fatbin {
		what = "in its fat binary of cubins"
	}
	sm := "sm_" + strings.TrimPrefix(e.Arch, "compute_")
	return fmt.Sprintf("the recorded module of %s (%.12s) holds no PTX (SASS only) %s: build with -gencode arch=%s,code=[%s,%s] to keep it, or pass a PTX file (--ptx=FILE)",
		e.Kernel, e.Module, what, e.Arch, sm, e.Arch)
}

// RecordedPTX finds the PTX the recording holds of c's module: the module image itself when it
// is PTX, else the PTX stored beside it (Triton's cache, the program's fat binary), else the
// PTX entries of a module image that is a fat binary. A *NoPTXError when there is none.
func (src *Source) RecordedPTX(c *Case) (*ModulePTX, error) {
	if strings.HasPrefix(ModuleKind(c.Module), "PTX") {
		return TextPTX(c.Module, "the recording"), nil
	}
	b, err := src.Proc.ModulePTX(c.ModuleHash)
	if err == nil {
		return TextPTX(b, "the recording"), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	none := &NoPTXError{Kernel: c.Name, Module: c.ModuleHash, Arch: "compute_NN"}
	if d := c.Device; d != nil {
		none.Arch = fmt.Sprintf("compute_%d%d", d.CcMajor, d.CcMinor)
	}
	if ModuleKind(c.Module) != "fatbin" {
		return nil, none
	}
	ptxs, err := fatbin.PTXs(c.Module)
	if errors.Is(err, fatbin.ErrNoPTX) {
		none.Fatbin = true
		return nil, none
	}
	if err != nil {
		return nil, fmt.Errorf("the module of %s (%.12s): %w", c.Name, c.ModuleHash, err)
	}
	return &ModulePTX{Entries: ptxs, From: "the recorded fat binary", fatbin: true}, nil
}

// TextPTX is PTX text from where (a file's name, "the recording"), targeting what its .target
// line names.
func TextPTX(text []byte, where string) *ModulePTX {
	return &ModulePTX{Entries: []fatbin.PTX{{Arch: targetArch(text), Text: text}}, From: where}
}

// For picks the entry to run kernel (mangled) on a GPU of sm_NN (gpu; 0 when not known): of
// the entries that declare kernel (all, when none does), the newest at most gpu's. It fails
// with a *fatbin.NewerError when each is for a newer architecture than gpu.
func (m *ModulePTX) For(kernel string, gpu int) (fatbin.PTX, error) {
	var declaring []fatbin.PTX
	for _, e := range m.Entries {
		if slices.Contains(fatbin.Kernels(e.Text), kernel) {
			declaring = append(declaring, e)
		}
	}
	if len(declaring) == 0 {
		declaring = m.Entries
	}
	return fatbin.Pick(declaring, gpu)
}

// Origin says where entry e came from: From, and for a fat binary's entry, which one.
func (m *ModulePTX) Origin(e fatbin.PTX) string {
	if m.fatbin {
		return fmt.Sprintf("%s's PTX for sm_%d", m.From, e.Arch)
	}
	return m.From
}

// Target is the virtual architecture PTX text targets, as nvcc names it: "compute_90",
// "compute_90a" for .target sm_90a; "" when its text has no .target.
func Target(text []byte) string {
	m := ptxTarget.FindSubmatch(text)
	if m == nil {
		return ""
	}
	return "compute_" + strings.TrimPrefix(string(m[1]), "sm_")
}

// targetArch is the sm_NN of text's .target as NN (90 for sm_90a), 0 when it names none.
func targetArch(text []byte) int {
	t := strings.TrimPrefix(Target(text), "compute_")
	n, _ := strconv.Atoi(strings.TrimRight(t, "abcdefghijklmnopqrstuvwxyz"))
	return n
}
