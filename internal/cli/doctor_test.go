package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/agentpath"
	"github.com/gpurr/gpurr/internal/cupti/locate"
	"github.com/gpurr/gpurr/internal/cupti/locate/locatetest"
)

func TestDoctorWithoutGPU(t *testing.T) {
	skipWithGPU(t)
	var stdout, stderr bytes.Buffer
	code := run([]string{"doctor"}, &stdout, &stderr)
	out := stdout.String()
	if code != exitFound {
		t.Errorf("exit %d, want %d", code, exitFound)
	}
	for _, want := range []string{
		"✗ NVIDIA driver  no CUDA driver: libcuda.so.1",
		"fix: install the NVIDIA driver",
		"– GPUs           skipped: needs the NVIDIA driver",
		"CUPTI",
		"looked in, in order:",
		"agent",
		"– injection      skipped: needs a GPU",
		"fix: build it with make",
		"problems: fix the",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Every ✗ line is followed by how to fix it.
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "✗") && (i+1 >= len(lines) || !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "fix: ")) {
			t.Errorf("✗ line without a fix after it: %q", l)
		}
	}
}

func TestDoctorCUPTIFlag(t *testing.T) {
	skipWithGPU(t)
	lib := t.TempDir() + "/libcupti.so.13"
	locatetest.Write(t, lib, locatetest.Library{Soname: "libcupti.so.13", Exports: []string{locate.CUPTISymbol}})
	var stdout, stderr bytes.Buffer
	run([]string{"doctor", "--cupti", lib}, &stdout, &stderr)
	out := stdout.String()
	// The fake passes the search; loading it shows the dlopen check runs.
	if !strings.Contains(out, lib) || !strings.Contains(out, "--cupti") {
		t.Errorf("output does not report the --cupti library:\n%s", out)
	}
	stdout.Reset()
	run([]string{"doctor", "--cupti", "/nonexistent/libcupti.so.13"}, &stdout, &stderr)
	if !strings.Contains(stdout.String(), "✗ CUPTI          CUPTI named by --cupti is not usable: /nonexistent/libcupti.so.13: does not exist") {
		t.Errorf("bad --cupti:\n%s", stdout.String())
	}
}

func TestDoctorNVTX(t *testing.T) {
	dir := t.TempDir()
	agent, old := dir+"/libgpurr.so", dir+"/old/libgpurr.so"
	locatetest.Write(t, agent, locatetest.Library{Soname: "libgpurr.so", Exports: []string{agentpath.EntryPoint, agentpath.NVTXEntryPoint}})
	if err := os.MkdirAll(dir+"/old", 0o755); err != nil {
		t.Fatal(err)
	}
	locatetest.Write(t, old, locatetest.Library{Soname: "libgpurr.so", Exports: []string{agentpath.EntryPoint}})
	for _, c := range []struct{ agent, prev, want string }{
		{agent, "", "✓ NVTX           ranges will be recorded"},
		{agent, agent, "✓ NVTX           ranges will be recorded"},
		{agent, "/opt/nsight/libToolsInjection64.so", "! NVTX           ranges will not be recorded: NVTX_INJECTION64_PATH=/opt/nsight/libToolsInjection64.so names another tool"},
		{old, "", "! NVTX           ranges will not be recorded: " + old + " has no InitializeInjectionNvtx2"},
	} {
		var out bytes.Buffer
		r := &report{w: &out}
		checkNVTX(r, c.agent, c.prev)
		if !strings.HasPrefix(out.String(), c.want) || r.failures != 0 {
			t.Errorf("checkNVTX(%s, %q) = %q (%d failures), want a line starting %q and no failure", c.agent, c.prev, out.String(), r.failures, c.want)
		}
	}
}

// The Triton cache line: a note (never a failure) while the cache is missing or holds no PTX,
// a ✓ with the count once it does.
func TestDoctorTritonCache(t *testing.T) {
	dir := t.TempDir()
	cache := dir + "/cache"
	check := func(want string) {
		t.Helper()
		var out bytes.Buffer
		r := &report{w: &out}
		checkTritonCache(r, cache)
		if !strings.HasPrefix(out.String(), want) || r.failures != 0 {
			t.Errorf("checkTritonCache = %q (%d failures), want a line starting %q", out.String(), r.failures, want)
		}
	}
	check("! Triton cache   " + cache + " does not exist yet")
	if err := os.MkdirAll(cache+"/ABCD", 0o755); err != nil {
		t.Fatal(err)
	}
	check("! Triton cache   " + cache + " holds no kernel's PTX yet")
	for _, f := range []string{"/ABCD/k.ptx", "/ABCD/k.cubin"} {
		if err := os.WriteFile(cache+f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check("✓ Triton cache   " + cache + ": 1 compiled kernel with PTX")
}

// torch.compile's per-device Triton caches: no line while there are none, a ✓ naming them
// with the kernels they hold once there are.
func TestDoctorInductorCaches(t *testing.T) {
	var out bytes.Buffer
	checkInductorCaches(&report{w: &out}, nil)
	if out.Len() != 0 {
		t.Errorf("no Inductor cache: %q, want no line", out.String())
	}
	dir := t.TempDir()
	for _, f := range []string{"/triton/0/ABCD/k.ptx", "/triton/0/ABCD/k.cubin", "/triton/1/EF01/j.ptx"} {
		if err := os.MkdirAll(filepath.Dir(dir+f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := &report{w: &out}
	checkInductorCaches(r, []string{dir + "/triton/0", dir + "/triton/1"})
	want := "✓ Inductor cache " + dir + "/triton/0, " + dir + "/triton/1: 2 compiled kernels with PTX from torch.compile"
	if !strings.HasPrefix(out.String(), want) || r.failures != 0 {
		t.Errorf("checkInductorCaches = %q, want a line starting %q", out.String(), want)
	}
}
