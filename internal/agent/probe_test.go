package agent

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/agentcfg"
)

// What a loaded module offers live probes, by what the program passed: PTX text is kept; a
// cubin gets its PTX from Triton's cache when a picked kernel is in it, and is forgotten when
// none is; a fat binary, an image without CUPTI's copy, bytes that are none of these and
// text that is not PTX each get their reason.
func TestProbeModuleClassify(t *testing.T) {
	cubin, err := os.ReadFile("../../recording/cubin/testdata/demo_sm90.cubin")
	if err != nil {
		t.Fatal(err)
	}
	names := moduleFunctions(cubin)
	if len(names) == 0 {
		t.Fatal("the fixture cubin lists no kernels")
	}
	root := t.TempDir()
	t.Setenv("TRITON_CACHE_DIR", root)
	dir := filepath.Join(root, "ABCD")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	const cachedPTX = "//\n.version 8.0\n.target sm_90\n.address_size 64\n"
	for file, data := range map[string][]byte{names[0] + ".cubin": cubin, names[0] + ".ptx": []byte(cachedPTX)} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	probes := func(expr string) *liveProbes {
		p, err := newLiveProbes(regexp.QuoteMeta(expr) + ":entry,exit")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	text := func(s string) func() string { return func() string { return s } }
	image := func(b []byte) func() []byte { return func() []byte { return b } }
	elf := cubin[:4]

	if m, keep := probes(names[0]).classify(elf, text(""), image(cubin), image(nil)); !keep || string(m.ptx) != cachedPTX {
		t.Errorf("a cached Triton cubin: keep %v, PTX %q, reason %q", keep, m.ptx, m.reason)
	}
	if _, keep := probes("no_such_kernel").classify(elf, text(""), image(cubin), image(nil)); keep {
		t.Error("a cubin no picked kernel is in was kept")
	}
	if m, _ := probes(names[0]).classify(elf, text(""), image(nil), image(nil)); !strings.Contains(m.reason, "CUPTI gave no image") {
		t.Errorf("a cubin without CUPTI's image: %q", m.reason)
	}
	const source = "// Generated\n.version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\nret;\n}\n"
	if m, keep := probes("k").classify([]byte(source[:4]), text(source), image(nil), image(nil)); !keep || string(m.ptx) != source {
		t.Errorf("PTX text: keep %v, reason %q", keep, m.reason)
	}
	// A module loaded from a fat binary: its PTX entry.
	fat, err := os.ReadFile(filepath.Join("..", "fatbin", "testdata", "plain.fatbin"))
	if err != nil {
		t.Fatal(err)
	}
	if m, keep := probes("gpurr_fixture_add").classify(fat[:4], text(""), image(nil), image(fat)); !keep || !strings.Contains(string(m.ptx), ".entry gpurr_fixture_add") {
		t.Errorf("a fat binary: keep %v, reason %q", keep, m.reason)
	}
	for _, c := range []struct {
		head   []byte
		text   string
		reason string
	}{
		{[]byte{0x50, 0xed, 0x55, 0xba}, "", "loaded from a fat binary: not a fat binary"},
		{[]byte{1, 2, 3, 4}, "\x01\x02\x03\x04", "an image gpurr does not read"},
		{[]byte(".ver"), ".version 8.0\n.target sm_90\nnonsense here;\n", "does not parse"},
	} {
		if m, keep := probes("k").classify(c.head, text(c.text), image(nil), image(c.head)); !keep || m.ptx != nil || !strings.Contains(m.reason, c.reason) {
			t.Errorf("%q: keep %v, reason %q, want %q", c.head, keep, m.reason, c.reason)
		}
	}
}

// A kernel --probe picks whose module gpurr never saw load, or saw without PTX, is not
// instrumented, with the reason; its PTX declaring other parameters than the driver's is
// refused before any JIT.
func TestProbeInstrumentRefuses(t *testing.T) {
	p, err := newLiveProbes("k:entry,exit")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.instrument(1, "k", 0); err == nil || !strings.Contains(err.Error(), "the program's fat binaries hold none declaring it") {
		t.Errorf("unknown module: %v", err)
	}
	p.modules[2] = probeModule{reason: "no PTX read: its module was loaded from a fat binary"}
	if _, _, err := p.instrument(2, "k", 0); err == nil || !strings.Contains(err.Error(), "fat binary") {
		t.Errorf("module without PTX: %v", err)
	}
	p.modules[3] = probeModule{ptx: []byte(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .u64 a)\n{\nret;\n}\n")}
	if _, _, err := p.instrument(3, "k", 2); err == nil || !strings.Contains(err.Error(), "declares 1 parameters, the driver 2") {
		t.Errorf("parameter count mismatch: %v", err)
	}
	if _, err := newLiveProbes("k"); err == nil || !strings.Contains(err.Error(), agentcfg.Probe) {
		t.Errorf("bad spec: %v", err)
	}
}
