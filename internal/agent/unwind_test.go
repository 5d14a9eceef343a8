package agent

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNativeUnwinder runs the C checks of the native unwinder (unwind.c):
// gp_unwind against glibc's backtrace() on chains of 1..64 calls, garbage
// above a frame on a guarded stack, JIT code, a signal handler and a
// coroutine stack, and gp_unwind of the built bin/libgpurr.so when make
// has built it. testdata/unwind/run.sh builds them with gcc, as on a GPU
// machine without Go; each check it reports is a subtest here.
func TestNativeUnwinder(t *testing.T) {
	// The artifact check reads the built library: a rebuilt one reruns it.
	os.Stat(filepath.Join("..", "..", "bin", "libgpurr.so"))
	runChecks(t, "unwind", "test")
}
