package agent

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/hotpath/scenario.golden from the actual records")

// runChecks runs the C harness testdata/DIR/run.sh with args, which prints
// a verdict line per check ("ok NAME", "FAIL NAME: why" or "skip NAME:
// why"), and reports each verdict as a subtest. The harnesses are built
// with gcc, as on a GPU machine without Go.
func runChecks(t *testing.T, dir string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: the checks are C programs")
	}
	touchSources(t, filepath.Join("testdata", dir))
	out, err := exec.Command("bash", append([]string{filepath.Join("testdata", dir, "run.sh")}, args...)...).CombinedOutput()
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
			switch {
			case verdict == "FAIL":
				t.Error(why)
			case verdict == "skip":
				t.Skip(why)
			case why != "":
				t.Log(why)
			}
		})
	}
	if err != nil || checks == 0 {
		t.Fatalf("testdata/%s/run.sh %s: %v\n%s", dir, strings.Join(args, " "), err, out)
	}
}

// touchSources opens every file of dir: go test reuses a passing result
// until a file the test opened changes, and bash and gcc read these.
func touchSources(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		_, err = os.ReadFile(path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHotPathScenario drives the CUPTI launch callbacks on the CPU
// (testdata/hotpath: the agent's C files with fakes for CUPTI and the
// driver) through every launch API, parameters in kernelParams and in
// `extra`, a filtered kernel, a failed launch, a launch captured into a
// graph, cloned and API-built graph nodes, kernel nodes added and changed
// through the graph API, graph launches, a destroyed
// stream and an EXIT without its ENTER. Every byte of every record the Go
// writer reads, host_ns and tid aside, must equal scenario.golden, which the
// agent wrote before its C was split by job (callstacks off: their frames
// name this checkout's paths).
func TestHotPathScenario(t *testing.T) {
	harnessGolden(t, "--scenario", "scenario.golden")
}

// TestMemoryScenario drives hash mode's write sets through the same harness, on a fake
// driver whose GPU finishes each hash job as it is launched: a region only proved read-only
// words point into is carried from the job that last hashed its allocation (given no bytes);
// a memset into it, a 2D copy and a graph launch end that (a copy out of it does not); a
// launch whose regions are all carried launches no hash kernel. With --defer-hashes, jobs wait
// in a batch that is launched before a launch that may write what it hashes, a launch on
// another stream, a copy to the host, an event record, a free of a batched region and at
// exit; a batch whose stream joined a capture is lost, not captured; with =stream, batches run
// on the program's stream with no event or wait. Every job the writer is handed must equal
// memory_scenario.golden.
func TestMemoryScenario(t *testing.T) {
	harnessGolden(t, "--memory-scenario", "memory_scenario.golden")
}

// TestDigestScenario drives step digests through the same harness: with --step-every 3, the
// launch that begins each step is preceded by a digest of every live allocation of the
// program's (a free leaves it out, as does an allocation made from inside a library named
// libnccl*, which is NCCL's own memory); a graph launch counts as a call; with --hash-steps,
// only the launches of those steps are hashed and the other boundaries get digests; with
// --step-range, the first call after a matching NVTX range ends (pushed and popped, a
// registered string, started and ended) begins the next step, and a range it does not match
// begins none.
func TestDigestScenario(t *testing.T) {
	harnessGolden(t, "--digest-scenario", "digest_scenario.golden")
}

// TestSnapshotScenario drives snapshots through the same harness with a staging ring of 4
// chunks: a region of 10 chunks is taken in pieces of 2 before and after its launch, each a
// job that waits for the writer (a thread beside the launches) to free staging space, and no
// launch is skipped for its size; a new allocation's snapshot copies every chunk of every piece,
// as does the next after the writer asks it to (gp_mem_copy_all: a chunk changed while copied).
func TestSnapshotScenario(t *testing.T) {
	harnessGolden(t, "--snapshot-scenario", "snapshot_scenario.golden")
}

// TestTimingStartsAfterFirstLaunch: CUPTI's kernel activity is turned on as the process's
// first launch begins, not at start (a context made while it is on pays 3-4 us of GPU time per kernel
// for its life: +15% to +28% on a compiled GPT-2 step), sampled timing's windows wait for that
// launch, and the hang watch, which needs every kernel, has it from the start.
func TestTimingStartsAfterFirstLaunch(t *testing.T) {
	runChecks(t, "hotpath", "--timing-check")
}

// TestCUPTIClient: a profiler inside the program that links CUPTI (as torch.profiler's Kineto
// does), against a stand-in CUPTI that takes one subscriber, subscribes beside the agent: its
// cupti* imports are rebound, it gets the callback and the activity records of the kinds it
// enabled (not the agent's own kernels), a kind it uses stays on when the agent's timing turns
// it off, and what it enabled goes off when it stops, the agent's staying on.
func TestCUPTIClient(t *testing.T) {
	runChecks(t, "hotpath", "--client-check")
}

// TestAllocTable checks hash mode's allocation table (dead keys left by frees, taken again by
// allocations) against a plain list of live allocations over 200,000 random steps: every
// lookup must find exactly the allocation holding the address, or none.
func TestAllocTable(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: the hot-path harness is a C program")
	}
	touchSources(t, filepath.Join("testdata", "hotpath"))
	out, err := exec.Command("bash", filepath.Join("testdata", "hotpath", "run.sh"), "--alloc-check").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "\nok: ") {
		t.Fatalf("testdata/hotpath/run.sh --alloc-check: %v\n%s", err, out)
	}
}

// harnessGolden runs testdata/hotpath/run.sh with flag and compares what it writes with the
// golden file of that name (-update rewrites it).
func harnessGolden(t *testing.T, flag, name string) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not found: the hot-path harness is a C program")
	}
	touchSources(t, filepath.Join("testdata", "hotpath"))
	got := filepath.Join(t.TempDir(), "scenario.txt")
	if out, err := exec.Command("bash", filepath.Join("testdata", "hotpath", "run.sh"), flag, got).CombinedOutput(); err != nil {
		t.Fatalf("testdata/hotpath/run.sh %s: %v\n%s", flag, err, out)
	}
	have, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "hotpath", name)
	if *update {
		if err := os.WriteFile(golden, have, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		haveLines, wantLines := strings.Split(string(have), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(haveLines), len(wantLines)) {
			h, w := line(haveLines, i), line(wantLines, i)
			if h != w {
				t.Fatalf("output differs from %s at line %d:\n got  %s\n want %s\n(go test -run %s -update rewrites it after a deliberate change)", golden, i+1, h, w, t.Name())
			}
		}
	}
}

func line(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end)"
}

// TestPythonStacks runs pystack.c's checks (testdata/pystack) against every
// supported CPython installed under pyenv: frames, lines and names equal to
// what the interpreter reports, with and without the GIL, on threads
// CPython does not know, generators, coroutines, tracing, non-ASCII and
// str-subclass names, bad pointers, the line decoder against
// PyCode_Addr2Line for every reachable instruction, the layout table
// against the installed headers; and that an unsupported version (3.9) is
// refused cleanly. A version that is not installed is a skipped subtest.
func TestPythonStacks(t *testing.T) {
	runChecks(t, "pystack")
}
