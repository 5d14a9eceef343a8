package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
)

// alikeLine is what diff says when threads launch alike (testrec.Threaded's 8 workers).
const alikeLine = "  8 threads launch alike (same kernel and callstack): paired by the order they were created\n"

// writeThreaded writes a testrec.Threaded run and returns its recording's directory and the
// seqs of each worker's launches.
func writeThreaded(t *testing.T, o testrec.Threaded) (string, [][]uint64) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "threads")
	if _, err := testrec.WriteThreaded(dir, o); err != nil {
		t.Fatal(err)
	}
	_, seqs := testrec.ThreadedBatches(o)
	return dir, seqs
}

// Eight threads that each launch on a stream of their own, reaching their launches in another
// order in each run: diff pairs them thread by thread, and says once that it paired them by
// the order they were created, since they launch alike; verify against a manifest pairs them
// the same way.
func TestDiffThreads(t *testing.T) {
	a, _ := writeThreaded(t, testrec.Threaded{Workers: 8, Order: []int{0, 1, 2, 3, 4, 5, 6, 7}})
	b, _ := writeThreaded(t, testrec.Threaded{Workers: 8, Order: []int{5, 2, 7, 0, 3, 6, 1, 4}, Late: true})
	code, out, errs := runCLI("diff", a, b)
	expectOutput(t, "threads in another order", code, 0, out, errs,
		"gpu-box-4242 vs gpu-box-4242: the runs agree: 9 launches compared after they ran (9 matched)\n"+alikeLine)
	if n := strings.Count(out, "threads launch alike"); n != 1 {
		t.Errorf("the alike line %d times, want once:\n%s", n, out)
	}

	c, seqs := writeThreaded(t, testrec.Threaded{Workers: 8, Order: []int{7, 6, 5, 4, 3, 2, 1, 0}, Changed: 3})
	code, out, errs = runCLI("diff", a, c)
	expectOutput(t, "one thread's data changed", code, 1, out, errs,
		fmt.Sprintf("the runs part ways at launch %d of A and %d of B: the memory after it differs\n  kernel   fill_kernel (stream 3)\n", 4, seqs[2][0]),
		"  A        /home/ada/threads.py:25 work\n",
		"9 launches matched, 9 compared; 1 of them differ after they ran, this one first\n"+alikeLine)

	m := writeManifest(t, a)
	code, out, errs = runCLI("verify", b, "--manifest", m)
	expectOutput(t, "verify, threads in another order", code, 0, out, errs, "gpu-box-4242: matches the manifest: 9 launches compared after they ran (9 matched)")

	// One thread of each kind: nothing launches alike, and nothing is said.
	one, _ := writeThreaded(t, testrec.Threaded{Workers: 1})
	code, out, errs = runCLI("diff", one, one)
	expectOutput(t, "one worker", code, 0, out, errs, "the runs agree")
	if strings.Contains(out, "alike") {
		t.Errorf("one worker: an alike line:\n%s", out)
	}
}
