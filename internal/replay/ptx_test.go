package replay

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/fatbin"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// fatbinCase opens testrec's replayable recording with a fixture of internal/fatbin as its
// module image, and its launch 2, whose kernel is named as the fixture's PTX declares it.
func fatbinCase(t *testing.T, fixture string) (*Source, *Case) {
	t.Helper()
	image, err := os.ReadFile(filepath.Join("..", "fatbin", "testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := testrec.WriteReplayableModule(dir, image); err != nil {
		t.Fatal(err)
	}
	src := openSource(t, dir)
	c, err := src.Case(2)
	if err != nil {
		t.Fatal(err)
	}
	c.Kernel.Name = "gpurr_fixture_add"
	return src, c
}

func fixturePTX(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "fatbin", "testdata", "kernel.ptx"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A module of machine code alone has no PTX, and the error says how to build one that does;
// PTX stored beside it (Triton's, the program's fat binary's) is found, as is a module that
// is PTX itself.
func TestRecordedPTX(t *testing.T) {
	dir, src, c := replayableCase(t)
	_, err := src.RecordedPTX(c)
	var none *NoPTXError
	want := "the recorded module of saxpy_gridstride (" + c.ModuleHash[:12] + ") holds no PTX (SASS only) and neither Triton's cache nor the program's fat binaries held it: " +
		"build with -gencode arch=compute_90,code=[sm_90,compute_90] to keep it, or pass a PTX file (--ptx=FILE)"
	if !errors.As(err, &none) || err.Error() != want {
		t.Errorf("a cubin without PTX beside it:\n%v\nwant\n%s", err, want)
	}
	text := []byte(".version 8.0\n.target sm_90a\n.address_size 64\n")
	beside := filepath.Join(dir, recording.ModulesDir, c.ModuleHash+recording.PTXExt)
	if err := os.WriteFile(beside, text, 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := src.RecordedPTX(c)
	if err != nil || len(p.Entries) != 1 || !bytes.Equal(p.Entries[0].Text, text) || p.Entries[0].Arch != 90 || p.From != "the recording" {
		t.Fatalf("PTX stored beside the module: %+v, %v", p, err)
	}
	if got := Target(p.Entries[0].Text); got != "compute_90a" {
		t.Errorf("target %q, want compute_90a", got)
	}
	c.Module = []byte(".version 8.0\n.target sm_80\n.address_size 64\n")
	if p, err := src.RecordedPTX(c); err != nil || !bytes.Equal(p.Entries[0].Text, c.Module) || p.Entries[0].Arch != 80 {
		t.Errorf("a PTX module: %+v, %v", p, err)
	}
}

// A module image that is a fat binary gives its PTX entries, stored plain or compressed; one
// of cubins only has none.
func TestRecordedPTXFatbin(t *testing.T) {
	want := fixturePTX(t)
	for _, fixture := range []string{"plain.fatbin", "lz4.fatbin", "zstd.fatbin"} {
		src, c := fatbinCase(t, fixture)
		p, err := src.RecordedPTX(c)
		if err != nil {
			t.Fatalf("%s: %v", fixture, err)
		}
		e, err := p.For(c.Kernel.Name, 90)
		if err != nil || !bytes.Equal(e.Text, want) || e.Arch != 80 {
			t.Errorf("%s: picked sm_%d, %v", fixture, e.Arch, err)
		}
		if got := p.Origin(e); got != "the recorded fat binary's PTX for sm_80" {
			t.Errorf("%s: origin %q", fixture, got)
		}
	}
	src, c := fatbinCase(t, "noptx.fatbin")
	_, err := src.RecordedPTX(c)
	var none *NoPTXError
	if !errors.As(err, &none) || !none.Fatbin || !strings.Contains(err.Error(), "holds no PTX (SASS only) in its fat binary of cubins: build with -gencode arch=compute_90,code=[sm_90,compute_90]") {
		t.Errorf("a fat binary of cubins: %v", err)
	}
}

// For picks the newest entry the GPU can compile, of those declaring the kernel.
func TestPTXFor(t *testing.T) {
	two, err := os.ReadFile(filepath.Join("..", "fatbin", "testdata", "two.fatbin"))
	if err != nil {
		t.Fatal(err)
	}
	ptxs, err := fatbin.PTXs(two)
	if err != nil {
		t.Fatal(err)
	}
	other := fatbin.PTX{Arch: 120, Text: []byte(".version 8.0\n.target sm_120\n.visible .entry another(\n)\n{\n}\n")}
	m := &ModulePTX{Entries: append(ptxs, other), From: "x"}
	for gpu, arch := range map[int]int{90: 80, 100: 100, 120: 100} {
		if e, err := m.For("gpurr_fixture_add", gpu); err != nil || e.Arch != arch {
			t.Errorf("sm_%d: picked sm_%d, %v; want sm_%d", gpu, e.Arch, err, arch)
		}
	}
	var ne *fatbin.NewerError
	if _, err := m.For("gpurr_fixture_add", 75); !errors.As(err, &ne) || ne.Oldest != 80 {
		t.Errorf("sm_75: %v", err)
	}
	// A kernel no entry declares: the newest the GPU takes; the driver then says it lacks it.
	if e, err := m.For("nowhere", 120); err != nil || e.Arch != 120 {
		t.Errorf("undeclared kernel: sm_%d, %v", e.Arch, err)
	}
}

// The session names the PTX it runs and its target; PTX for a newer architecture than the
// GPU's is refused in words before the driver sees it.
func TestPickPTX(t *testing.T) {
	h200 := cuda.Properties{Name: "NVIDIA H200", CCMajor: 9}
	for _, c := range []struct{ fixture, code, err string }{
		{"lz4.fatbin", "PTX from the recorded fat binary, for compute_80, JIT-compiled by the driver for sm_90", ""},
		{"newer.fatbin", "", "the PTX of saxpy_gridstride from the recorded fat binary targets compute_100, newer than this NVIDIA H200 (sm_90): " +
			"the driver cannot compile it for this GPU; replay on a GPU of sm_100 or newer, or pass PTX built for compute_90 or older (--ptx=FILE)"},
	} {
		src, cs := fatbinCase(t, c.fixture)
		p, err := src.RecordedPTX(cs)
		if err != nil {
			t.Fatal(err)
		}
		s := &Session{Case: cs, Device: h200}
		text, err := s.pickPTX(p)
		switch {
		case c.err != "":
			if err == nil || err.Error() != c.err {
				t.Errorf("%s:\n%v\nwant\n%s", c.fixture, err, c.err)
			}
		case err != nil || s.Code != c.code || !bytes.Equal(text, fixturePTX(t)) || s.moduleName != "the PTX from the recorded fat binary (compute_80)":
			t.Errorf("%s: code %q, name %q, %v", c.fixture, s.Code, s.moduleName, err)
		}
	}
}

// Replay of a launch whose module holds no PTX, asked to run its PTX, fails saying so,
// before any GPU is looked for.
func TestReplayRecordedPTXMissing(t *testing.T) {
	_, src, _ := replayableCase(t)
	o := src.Replay(2, nil, Request{RecordedPTX: true})
	if o.Status != StatusFailed || !strings.Contains(o.Why, "holds no PTX (SASS only)") || o.Device != "" {
		t.Errorf("outcome %s: %s (device %q)", o.Status, o.Why, o.Device)
	}
}
