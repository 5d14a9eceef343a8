package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNativeUnwinder runs the C checks of the native unwinder (unwind.c):
// gp_unwind against glibc's backtrace() on chains of 1..64 calls, garbage
// above a frame on a guarded stack, JIT code, a signal handler and a
// coroutine stack, and gp_unwind of the built bin/libgpurr.so when make
// has built it. unwind_test/run.sh builds them with gcc, as on a GPU machine
// without Go; each check it reports is a subtest here.
func TestNativeUnwinder(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: the unwinder's checks are a C program")
	}
	// go test reuses a passing result until a file the test opened
	// changes; bash and gcc read these, so open them here too.
	sources, err := os.ReadDir("unwind_test")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range sources {
		if _, err := os.ReadFile(filepath.Join("unwind_test", e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	os.Stat(filepath.Join("..", "..", "bin", "libgpurr.so"))
	out, err := exec.Command("bash", "unwind_test/run.sh", "test").CombinedOutput()
	checks := 0
	for _, line := range strings.Split(string(out), "\n") {
		verdict, rest, _ := strings.Cut(line, " ")
		if verdict != "ok" && verdict != "FAIL" && verdict != "skip" {
			continue
		}
		name, why, _ := strings.Cut(rest, " ")
		name = strings.TrimSuffix(name, ":")
		checks++
		t.Run(name, func(t *testing.T) {
			if verdict == "FAIL" {
				t.Error(why)
			} else if verdict == "skip" {
				t.Skip(why)
			} else if why != "" {
				t.Log(why)
			}
		})
	}
	if err != nil || checks == 0 {
		t.Fatalf("unwind_test/run.sh test: %v\n%s", err, out)
	}
}
