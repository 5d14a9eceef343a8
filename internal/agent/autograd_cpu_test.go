package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAutogradFakeTorch runs autograd.c's start-up and hot path against a
// stand-in libtorch_cpu.so (testdata/faketorch) laid out as torch 2.11:
// version detection beside the library, symbols found though the library is
// loaded RTLD_LOCAL, forward sequence numbers, backward nodes named once from
// their RTTI, the node reference count left as found, and an unknown torch
// version left unread with a reason.
func TestAutogradFakeTorch(t *testing.T) {
	for _, tool := range []string{"gcc", "g++"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s to build the fake libtorch", tool)
		}
	}
	dir := t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	src := filepath.Join("testdata", "faketorch")
	harness := filepath.Join(dir, "harness")
	run("gcc", "-std=gnu11", "-O2", "-Wall", "-I.", filepath.Join(src, "harness.c"), "autograd.c", "-o", harness, "-ldl", "-lpthread")
	for _, c := range []struct {
		version, linked, want string
	}{
		{"2.11.0+fake", "1", "version 2.11.0+fake linked 1"},
		{"2.3.0", "0", "torch 2.3.0: the autograd node layout of this version is not known"},
	} {
		lib := filepath.Join(dir, c.version, "torch", "lib")
		if err := os.MkdirAll(lib, 0o755); err != nil {
			t.Fatal(err)
		}
		run("g++", "-std=c++17", "-O2", "-shared", "-fPIC", filepath.Join(src, "fake_torch.cpp"), "-o", filepath.Join(lib, "libtorch_cpu.so"))
		// Other lines name __version__ too, as torch/version.py does.
		py := "__all__ = ['__version__', 'debug']\n__version__ = '" + c.version + "'\ndebug = False\n"
		if err := os.WriteFile(filepath.Join(lib, "..", "version.py"), []byte(py), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(harness, lib, c.linked).CombinedOutput()
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Errorf("torch %s: %v\n%s", c.version, err, out)
		}
	}
}
