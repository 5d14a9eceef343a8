package agent

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/fatbin"
	"github.com/gpurr/gpurr/internal/kernels"
)

// A library's .nv_fatbin section (testdata/hostfatbin/gen.sh) gives the PTX of the kernels it
// declares, the newest architecture first, and of a cubin it holds, its container's; a kernel none declares is refused with the way out.
func TestHostFatbins(t *testing.T) {
	lib, err := filepath.Abs(filepath.Join("testdata", "hostfatbin", "host.so"))
	if err != nil {
		t.Fatal(err)
	}
	maps := filepath.Join(t.TempDir(), "maps")
	// A file mapped that is not a regular one (a device file, here a FIFO, whose open would
	// wait for a writer) is not opened.
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	lines := "7f0000000000-7f0000001000 r--p 00000000 08:01 42 " + lib + "\n" +
		"7f0000001000-7f0000002000 r-xp 00001000 08:01 42 " + lib + "\n" +
		"7f0000003000-7f0000004000 rw-p 00000000 00:00 0 \n" +
		"7f0000005000-7f0000006000 rw-s 00000000 00:05 7 " + fifo + "\n" +
		"7ffd00000000-7ffd00001000 rw-p 00000000 00:00 0 [stack]\n"
	if err := os.WriteFile(maps, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	files := mappedFiles(maps)
	if len(files) != 2 || files[0] != lib || files[1] != fifo {
		t.Fatalf("mapped files %q", files)
	}
	h := &hostFatbins{read: map[string]bool{}, kernels: map[string][]fatbin.PTX{}}
	done := make(chan bool)
	go func() {
		h.scan(files)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("reading the mapped files waits on the FIFO")
	}
	h.indexNew()
	text, err := h.ptxOf("gpurr_fixture_add")
	if err != nil || !strings.Contains(string(text), ".target sm_100") {
		t.Fatalf("PTX %q, %v; want sm_100's", text, err)
	}
	// The module the driver chose out of it: the PTX of its container.
	if text := h.forCubin([]byte("\x7fELF stand-in for a cubin")); !strings.Contains(string(text), ".target sm_80") {
		t.Errorf("PTX of the stand-in cubin: %q", text)
	}
	if text := h.forCubin([]byte("\x7fELF another cubin of 25b")); text != nil {
		t.Errorf("PTX of a cubin no container holds: %q", text)
	}
	if text := h.forNames(lib, []string{"gpurr_fixture_add"}); !strings.Contains(string(text), ".target sm_100") {
		t.Errorf("PTX by the module's kernels: %q", text)
	}
	if text := h.forNames(lib, []string{"gpurr_fixture_add", "other"}); text != nil {
		t.Errorf("PTX declaring only some of the module's kernels: %q", text)
	}
	if text := h.forNames("/elsewhere", []string{"gpurr_fixture_add"}); text != nil {
		t.Errorf("PTX of another file: %q", text)
	}
	if _, err := h.ptxOf("other"); err == nil || !strings.Contains(err.Error(), "compute_90") {
		t.Errorf("a kernel no fat binary declares: %v", err)
	}
	h = &hostFatbins{read: map[string]bool{}, kernels: map[string][]fatbin.PTX{}, spent: hostPTXBudget}
	h.scan(files)
	h.indexNew()
	if _, err := h.ptxOf("gpurr_fixture_add"); err == nil || !strings.Contains(err.Error(), "first 512 MiB") {
		t.Errorf("past the budget: %v", err)
	}
}

// gpurr demo's module is gpurr's own PTX, which the agent holds: its kernels, all of them and
// no other, say so.
func TestDemoModulePTX(t *testing.T) {
	names := fatbin.Kernels(kernels.DemoPTX())
	if ptx, from := programPTX(nil, names); from != "gpurr-demo" || string(ptx) != string(kernels.DemoPTX()) {
		t.Errorf("the demo's module: PTX of %d bytes from %q", len(ptx), from)
	}
	if _, from := programPTX(nil, names[:1]); from == "gpurr-demo" {
		t.Error("a module with one of the demo's kernels taken for the demo's")
	}
}
