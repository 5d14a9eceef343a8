package replay

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// A module recorded as machine code only (a cubin, or a fat binary without
// PTX) says what it reads in its SASS, which the CUDA toolkit's
// disassemblers print: S2R and CS2R (S2UR, CS2UR into uniform registers)
// of the clock, global timer and virtual SM id registers, and calls of the
// device heap's malloc.

// sassRunRegisters are the special registers of SASS whose value differs
// from run to run (ptxas's names for %clock, %clock_hi, %globaltimer_lo
// and _hi, and %smid and %warpid, which it reads from SR_VIRTID's bits).
var sassRunRegisters = map[string]bool{
	"SR_CLOCKLO": true, "SR_CLOCKHI": true, "SR_GLOBALTIMERLO": true, "SR_GLOBALTIMERHI": true,
	"SR_VIRTID": true, "SR_VIRTUALSMID": true, "SR_SMID": true,
}

// Lines of cuobjdump -sass ("Function : NAME") and nvdisasm (".text.NAME:")
// that begin a function, and instruction lines ("/*0040*/ [@P0] OP ARGS ;").
var (
	sassFunction    = regexp.MustCompile(`^(?:Function : (\S+)|\.text\.(\S+):)$`)
	sassInstruction = regexp.MustCompile(`^/\*([0-9a-fA-F]+)\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z0-9_.]+)\s*([^;]*);`)
	sassSpecial     = regexp.MustCompile(`\bSR_[A-Z0-9_]+\b`)
	sassCallee      = regexp.MustCompile("`\\(([^)]+)\\)")
)

// sassFunc is what one function of a SASS listing reads and calls, in order.
type sassFunc struct {
	reads   []codeRead
	callees []string
}

// sassRunDependent lists what makes kernel depend on the run in a SASS
// listing: the first read of each run-dependent special register and the
// first call of malloc, in kernel and in the functions it calls (named in
// each), in the order met. Nil when the listing has no function of that
// name, or it has none of them.
func sassRunDependent(text, kernel string) []codeRead {
	funcs := map[string]*sassFunc{}
	var cur *sassFunc
	seenIn := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if m := sassFunction.FindStringSubmatch(line); m != nil {
			name := m[1] + m[2]
			if funcs[name] == nil {
				funcs[name] = &sassFunc{}
			}
			cur, seenIn = funcs[name], map[string]bool{}
			continue
		}
		m := sassInstruction.FindStringSubmatch(line)
		if m == nil || cur == nil {
			continue
		}
		offset, op, args := m[1], strings.SplitN(m[2], ".", 2)[0], m[3]
		switch op {
		case "S2R", "CS2R", "S2UR", "CS2UR":
			for _, reg := range sassSpecial.FindAllString(args, -1) {
				if sassRunRegisters[reg] && !seenIn[reg] {
					seenIn[reg] = true
					cur.reads = append(cur.reads, codeRead{what: reg, verb: "reads", where: "SASS /*" + offset + "*/"})
				}
			}
		case "CALL", "JCAL":
			c := sassCallee.FindStringSubmatch(args)
			switch {
			case c == nil:
			case c[1] == "malloc":
				if !seenIn["malloc"] {
					seenIn["malloc"] = true
					cur.reads = append(cur.reads, codeRead{what: "malloc", verb: "calls", where: "SASS /*" + offset + "*/"})
				}
			default:
				cur.callees = append(cur.callees, c[1])
			}
		}
	}
	var out []codeRead
	seen := map[string]bool{}
	visited := map[string]bool{}
	var walk func(name string, in string)
	walk = func(name, in string) {
		f := funcs[name]
		if f == nil || visited[name] {
			return
		}
		visited[name] = true
		for _, r := range f.reads {
			if !seen[r.what] {
				seen[r.what] = true
				if in != "" {
					r.where += ", in " + in
				}
				out = append(out, r)
			}
		}
		for _, c := range f.callees {
			walk(c, c)
		}
	}
	walk(kernel, "")
	return out
}

// Where the disassemblers are looked for beside PATH, and which, in order
// of preference (cuobjdump reads fat binaries too, nvdisasm cubins only).
var (
	cudaBin       = "/usr/local/cuda/bin"
	disassemblers = []string{"cuobjdump", "nvdisasm"}
)

// findTool is the path of tool on PATH or in cudaBin, "" when in neither.
func findTool(tool string) string {
	if p, err := exec.LookPath(tool); err == nil {
		return p
	}
	p := filepath.Join(cudaBin, tool)
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		return p
	}
	return ""
}

// disassemble returns the SASS of a module image and the tool that printed
// it; tool "" when no disassembler is installed.
func disassemble(image []byte, fatbin bool) (text, tool string, err error) {
	var path string
	for _, t := range disassemblers {
		if t == "nvdisasm" && fatbin {
			continue
		}
		if path = findTool(t); path != "" {
			tool = t
			break
		}
	}
	if tool == "" {
		return "", "", nil
	}
	f, err := os.CreateTemp("", "gpurr-module-*.cubin")
	if err != nil {
		return "", tool, err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(image)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", tool, err
	}
	args := []string{f.Name()}
	if tool == "cuobjdump" {
		args = []string{"-sass", f.Name()}
	}
	out, err := exec.Command(path, args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
			err = fmt.Errorf("%v: %s", err, strings.TrimSpace(strings.SplitN(string(ee.Stderr), "\n", 2)[0]))
		}
		return "", tool, err
	}
	return string(out), tool, nil
}

// explainMachineCode says why kernel's replay differs, from the SASS of its
// module image (machine code, no PTX): what the SASS reads that depends on
// the run, or that it could not be read, and why.
func explainMachineCode(kernel string, image []byte, repeatable bool) string {
	why := whyFor(repeatable)
	text, tool, err := disassemble(image, ModuleKind(image) == "fatbin")
	switch {
	case tool == "":
		return why + " (the recording has no PTX of its module, only machine code, and there is no cuobjdump or nvdisasm on PATH or in " + cudaBin + " to read it: whether it reads a clock is not known)"
	case err != nil:
		return why + fmt.Sprintf(" (the recording has no PTX of its module, and %s could not read its machine code: %v; whether it reads a clock is not known)", tool, err)
	}
	return explainReads(why, sassRunDependent(text, kernel), repeatable)
}
