package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSASSRunDependent(t *testing.T) {
	text, err := os.ReadFile("testdata/clocked.sass")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ kernel, want string }{
		{"_Z7clockedPxi", "reads SR_CLOCKLO (SASS /*0010*/)"},
		{"_Z7stampedPy", "reads SR_GLOBALTIMERLO (SASS /*0000*/, in _Z5stampv)"},
		{"_Z6placedPj", "reads SR_VIRTID (SASS /*0010*/), reads SR_CLOCKHI (SASS /*0020*/)"},
		{"_Z4heapPPi", "calls malloc (SASS /*0010*/)"},
		{"_Z5plainPf", ""},
		{"_Z7missingv", ""},
	} {
		reads := sassRunDependent(string(text), c.kernel)
		parts := make([]string, len(reads))
		for i, r := range reads {
			parts[i] = r.String()
		}
		if got := strings.Join(parts, ", "); got != c.want {
			t.Errorf("%s: %q, want %q", c.kernel, got, c.want)
		}
	}
	// nvdisasm names a function by its section's label.
	nv := ".text._Z7clockedPxi:\n        /*0000*/                   LDC R1, c[0x0][0x28] ;\n" +
		"        /*0010*/                   CS2UR UR4, SR_CLOCKLO ;\n"
	if got := sassRunDependent(nv, "_Z7clockedPxi"); len(got) != 1 || got[0].String() != "reads SR_CLOCKLO (SASS /*0010*/)" {
		t.Errorf("nvdisasm listing: %v", got)
	}
}

// fakeTool installs an executable script named tool in a fresh folder that is then the only
// place disassemblers are looked for.
func fakeTool(t *testing.T, tool, script string) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	old := cudaBin
	cudaBin = filepath.Join(dir, "cuda", "bin")
	t.Cleanup(func() { cudaBin = old })
	if tool != "" {
		if err := os.WriteFile(filepath.Join(dir, tool), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// A cubin without PTX beside it is explained from the SASS the toolkit's disassembler
// prints; with no disassembler installed, or one that fails, replay says so and what it
// cannot tell.
func TestExplainMachineCode(t *testing.T) {
	if _, err := os.Stat("/bin/cat"); err != nil {
		t.Skip("no /bin/cat for the stand-in disassembler")
	}
	fixture, err := filepath.Abs("testdata/clocked.sass")
	if err != nil {
		t.Fatal(err)
	}
	cubin := []byte("\x7fELF not really")
	fakeTool(t, "cuobjdump", `[ "$1" = -sass ] && exec /bin/cat `+fixture+"\n")
	want := "the replay is repeatable but differs from the recording, and the kernel reads SR_CLOCKLO (SASS /*0010*/): its output depends on when it runs"
	if got := explainMachineCode("_Z7clockedPxi", cubin, true); got != want {
		t.Errorf("cuobjdump on PATH:\n got  %s\n want %s", got, want)
	}
	if got := explainMachineCode("_Z5plainPf", cubin, true); got != whyDiffers {
		t.Errorf("a kernel whose SASS reads no clock: %s", got)
	}

	fakeTool(t, "nvdisasm", "exec /bin/cat "+fixture+"\n")
	if got := explainMachineCode("_Z6placedPj", cubin, false); !strings.Contains(got, "two replays disagree with each other, and the kernel reads SR_VIRTID (SASS /*0010*/), reads SR_CLOCKHI (SASS /*0020*/): its output depends on where it runs (which SM and warp slot) and when it runs") {
		t.Errorf("nvdisasm on PATH: %s", got)
	}

	fakeTool(t, "cuobjdump", "echo 'cuobjdump fatal   : Could not open input file' >&2; exit 1\n")
	if got := explainMachineCode("_Z7clockedPxi", cubin, true); !strings.Contains(got, "cuobjdump could not read its machine code") ||
		!strings.Contains(got, "Could not open input file") || !strings.Contains(got, "whether it reads a clock is not known") {
		t.Errorf("a failing cuobjdump: %s", got)
	}

	fakeTool(t, "", "")
	if got := explainMachineCode("_Z7clockedPxi", cubin, true); !strings.Contains(got, "no cuobjdump or nvdisasm on PATH or in ") ||
		!strings.HasPrefix(got, whyDiffers) || !strings.HasSuffix(got, "whether it reads a clock is not known)") {
		t.Errorf("no disassembler: %s", got)
	}
}
