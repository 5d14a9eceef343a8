package agent

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestStartWithoutCUDA runs gp_start against a stand-in for CUPTI and the
// driver (testdata/fakecuda): it reports a libcuda that internal/cuda could
// not open, a driver function it cannot do without (and memory capture's,
// only when memory capture is on), and a CUPTI that lacks a function, each
// in one line; with every function it needs it starts and reads both
// versions.
func TestStartWithoutCUDA(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: the stand-in library is C")
	}
	touchSources(t, filepath.Join("testdata", "fakecuda"))
	lib := filepath.Join(t.TempDir(), "libfakecuda.so")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-shared", "-fPIC", filepath.Join("testdata", "fakecuda", "fake.c"), "-o", lib).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	defer cannedBind("")
	for _, c := range []struct {
		what, bind, cupti, driverError string
		memory                         bool
		want                           string
	}{
		{"no libcuda", lib, lib, "no CUDA driver: libcuda.so.1 not found", false,
			"cannot load libcuda.so.1: no CUDA driver: libcuda.so.1 not found"},
		{"no driver function", "", lib, "", false, "libcuda.so.1 has no symbol cuFuncGetParamInfo (driver too old?)"},
		{"CUPTI without its functions", lib, "libc.so.6", "", false, "libc.so.6 has no symbol cuptiSubscribe"},
		{"no memory capture functions", lib, lib, "", true,
			"libcuda.so.1 has no symbol cuMemGetAddressRange_v2 (driver too old for memory capture?)"},
		{"started", lib, lib, "", false, ""},
	} {
		if err := cannedBind(c.bind); err != nil {
			t.Fatal(err)
		}
		if got := cannedStart(c.cupti, c.memory, c.driverError); got != c.want {
			t.Errorf("%s: gp_start says %q, want %q", c.what, got, c.want)
		}
	}
	if cupti, driver := startedVersions(); cupti != 130001 || driver != 13000 {
		t.Errorf("versions: CUPTI %d, driver %d; want 130001, 13000", cupti, driver)
	}
}
