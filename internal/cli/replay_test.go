package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

func writeReplayable(t *testing.T) string {
	t.Helper()
	return newRec(t, func(dir string) error {
		_, err := testrec.WriteReplayable(dir)
		return err
	})
}

func TestExtractCLI(t *testing.T) {
	rec := writeReplayable(t)
	out := filepath.Join(t.TempDir(), "repro")
	code, stdout, stderr := runCLI("extract", rec, "-o", out)
	expectOutput(t, "extract", code, 0, stdout, stderr, "wrote launch 2 to "+out, "gpurr replay "+out)
	readme, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil || !strings.Contains(string(readme), "saxpy_gridstride") {
		t.Errorf("README: %v %q", err, readme)
	}
	code, stdout, stderr = runCLI("info", out)
	// What it holds, not the recorder's counters (none: 0 states, 0 snapshots) nor the
	// recording's --probe, whose records stay behind ('no launched kernel's name matched').
	expectOutput(t, "info of the reproducer", code, 0, stdout, stderr, "box-9", "states       2 recorded; 625.0 KiB hashed",
		"snapshots    2 states with contents stored", "chunk store  9 distinct chunks",
		// The launch's timing comes along: it said "GPU 0 kernel runs".
		"GPU          1 kernel runs, 400ns")
	if strings.Contains(stdout, "probes") {
		t.Errorf("info of the reproducer names the recording's --probe:\n%s", stdout)
	}
}

func TestReplayBadInput(t *testing.T) {
	rec := writeReplayable(t)
	hashed := writeRun(t, "hash", trainRun(1.5, false))
	missing := filepath.Join(t.TempDir(), "nope")
	empty := filepath.Join(t.TempDir(), "empty.cubin")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	expectUsageErrors(t, []usageCase{
		{[]string{"replay", rec, "--launch", "9"}, "has no launch 9 (launches 1 to 3)"},
		// --launch 0 was taken for no --launch: the only snapshotted launch was replayed, or
		// the user told to say --launch SEQ.
		{[]string{"replay", rec, "--launch", "0"}, `invalid argument "0" for "--launch" flag: launches are numbered from 1`},
		{[]string{"replay", rec, "--all", "--from", "0"}, `"--from" flag: launches are numbered from 1`},
		{[]string{"extract", rec, "--launch", "0", "-o", filepath.Join(t.TempDir(), "x")}, `"--launch" flag: launches are numbered from 1`},
		{[]string{"tune", rec, "--launch", "0", "--block", "64"}, `"--launch" flag: launches are numbered from 1`},
		{[]string{"race", rec, "--launch", "0"}, `"--launch" flag: launches are numbered from 1`},
		{[]string{"probe", rec, "--launch", "0"}, `"--launch" flag: launches are numbered from 1`},
		{[]string{"probe", rec, "--launch", "2x"}, `"--launch" flag: want a launch number as gpurr info and the launches table show it`},
		{[]string{"replay", rec, "--launch", "1"}, "launch 1 has no snapshot"},
		{[]string{"replay", rec, "--launch", "3"}, "captured into a CUDA graph"},
		{[]string{"replay", hashed, "--launch", "1"}, "record with --memory snapshot"},
		{[]string{"replay", hashed}, "no launch with snapshots before and after it (record with --memory snapshot)"},
		{[]string{"replay", missing}, "no such file or directory"},
		{[]string{"replay", rec, "--launch", "2", "--all"}, "not both"},
		{[]string{"replay", rec, "--from", "2"}, "--from goes with --all"},
		// It was told it had no launch with snapshots, and to check --snapshot-kernels.
		{[]string{"replay", rec, "--all", "--from", "3"}, "--from 3: box-9 has no snapshotted launch from there on (the last is 2)"},
		{[]string{"replay", rec, "--grid", "1,2,3,4"}, "more than 3 sizes"},
		{[]string{"replay", rec, "--block", "0"}, "1 or more"},
		{[]string{"replay", rec, "--dtype", "f33"}, "unknown dtype"},
		{[]string{"replay", rec, "--rtol", "0.1"}, "need --dtype"},
		// A NaN tolerance held every differing element outside it: 'differs', exit 1.
		{[]string{"replay", rec, "--dtype", "f32", "--atol", "NaN"}, "--elements, --atol and --rtol take 0 or more"},
		{[]string{"tune", rec, "--block", "64", "--dtype", "f32", "--rtol", "nan"}, "--elements, --atol and --rtol take 0 or more"},
		{[]string{"replay", rec, "--module", missing}, "--module " + missing + ": no such file or directory"},
		// Found by the driver, after a GPU was looked for; none here: 'no usable GPU', exit 3.
		{[]string{"replay", rec, "--module", empty}, "--module " + empty + " is no cubin, PTX or fatbin (unknown image, 0 bytes)"},
		{[]string{"replay", rec, "--module", os.Args[0]}, "is no cubin, PTX or fatbin (ELF file that is not a cubin"},
		{[]string{"race", rec, "--ptx", missing}, "--ptx " + missing + ": no such file or directory"},
		{[]string{"replay", rec, "--format", "xml"}, "unknown --format"},
		// A negative --device or --smem read as unset (the recorded one), in silence, after the
		// GPU was looked for.
		{[]string{"replay", rec, "--launch", "2", "--device", "-2"}, `invalid argument "-2" for "--device" flag: want a whole number, 0 or more`},
		{[]string{"replay", rec, "--launch", "2", "--smem", "-5"}, `"--smem" flag: want a whole number, 0 or more`},
		{[]string{"replay", rec, "--launch", "2", "--smem", "1q"}, `"--smem" flag: want a whole number, 0 or more, of bytes or with a unit`},
		{[]string{"tune", rec, "--block", "64", "--device", "-1"}, `"--device" flag: want a whole number, 0 or more`},
		{[]string{"race", rec, "--device", "-1"}, `"--device" flag: want a whole number, 0 or more`},
		{[]string{"probe", rec, "--device", "-1"}, `"--device" flag: want a whole number, 0 or more`},
		{[]string{"extract", rec, "--launch", "2"}, "-o DIR is required"},
		{[]string{"extract", rec, "--launch", "1", "-o", filepath.Join(t.TempDir(), "x")}, "launch 1 has no snapshot"},
		{[]string{"extract", rec, "--launch", "2", "-o", filepath.Join(rec, "repro")}, "would write over"},
		{[]string{"tune", rec}, "give --block and/or --grid"},
		{[]string{"tune", rec, "--block", "64,abc"}, "--block"},
		{[]string{"tune", rec, "--block", "64", "--search", "random:0"}, "random:N"},
		{[]string{"tune", rec, "--block", "64", "--search", "random:5x"}, "random:N"},
		{[]string{"tune", rec, "--block", "64", "--search", "annealing"}, "want grid or random:N"},
		// Was '--chart  is a directory: name a file'.
		{[]string{"tune", rec, "--block", "64", "--chart", ""}, `tune: invalid argument "" for "--chart" flag: an empty name: give a path`},
		{[]string{"tune", rec, "--launch", "1", "--block", "64"}, "launch 1 has no snapshot"},
	})
}

// A module image whose bytes no longer hash to its name (same size, so info passes it) is
// named as damaged; extract wrote it into the reproducer as the code that ran.
func TestDamagedModuleRefused(t *testing.T) {
	rec := writeReplayable(t)
	images, err := filepath.Glob(filepath.Join(rec, "modules", "*.cubin"))
	if err != nil || len(images) != 1 {
		t.Fatalf("module images %v: %v", images, err)
	}
	image, err := os.ReadFile(images[0])
	if err != nil {
		t.Fatal(err)
	}
	image[len(image)-1] ^= 1
	if err := os.WriteFile(images[0], image, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "repro")
	want := "module of kernel saxpy_gridstride: " + images[0] + " is damaged (its bytes do not hash to its name)"
	expectUsageErrors(t, []usageCase{
		{[]string{"extract", rec, "-o", out}, want},
		{[]string{"replay", rec}, want},
	})
	if _, err := os.Stat(out); err == nil {
		t.Errorf("extract of a damaged module left %s", out)
	}
}

// A launch past the end of a recording that ended short is said to be lost with the end, by
// every verb that looks one up; rewind also says which launches there are, as replay did.
func TestNoLaunchPastAShortEnd(t *testing.T) {
	short := variantRec(t, testrec.Incomplete) // rank 0 was killed between frames
	whole := variantRec(t, testrec.Good)
	out := filepath.Join(t.TempDir(), "x.bin")
	const lost = "; the recording ends short, the program killed: later launches were not written)"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rewind", short, "--launch", "999", "--after", "--region", "0", "-o", out}, "gpu-box-4242 has no launch 999 (launches 1 to "},
		{[]string{"replay", short, "--launch", "999"}, "gpu-box-4242 has no launch 999 (launches 1 to "},
		{[]string{"rewind", whole, "--launch", "999", "--after", "--region", "0", "-o", out}, "gpu-box-4242 has no launch 999 (launches 1 to "},
	} {
		code, _, errs := runCLI(append(c.args, "--process", "0")...)
		if code != exitUsage || !strings.Contains(errs, c.want) || strings.Contains(errs, lost) != (c.args[1] == short) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2, %q, and the end named only when it is short", c.args[:2], code, errs, c.want)
		}
	}
}

// The reproducer keeps the module's PTX where the recording did (Triton's), so race and
// probe work on it as on the recording; it was left behind ('the recording has no PTX').
func TestExtractKeepsPTX(t *testing.T) {
	rec := writeReplayable(t)
	images, err := filepath.Glob(filepath.Join(rec, "modules", "*.cubin"))
	if err != nil || len(images) != 1 {
		t.Fatalf("module images %v: %v", images, err)
	}
	digest := strings.TrimSuffix(filepath.Base(images[0]), recording.ModuleExt)
	if err := recording.PutModulePTX(rec, digest, []byte(saxpyPTX)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "repro")
	if code, _, errs := runCLI("extract", rec, "-o", out); code != 0 {
		t.Fatalf("extract: exit %d: %s", code, errs)
	}
	code, stdout, stderr := runCLI("race", out, "--list")
	expectOutput(t, "race --list of the reproducer", code, 0, stdout, stderr, "PTX from the recording")
}

// A module image that is a FIFO is refused, naming it, instead of blocking the verb forever
// on reading it (replay and extract hung; info already called it damaged).
func TestModuleFIFORefused(t *testing.T) {
	rec := writeReplayable(t)
	images, err := filepath.Glob(filepath.Join(rec, "modules", "*.cubin"))
	if err != nil || len(images) != 1 {
		t.Fatalf("module images %v: %v", images, err)
	}
	if err := os.Remove(images[0]); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(images[0], 0o600); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		expectUsageErrors(t, []usageCase{
			{[]string{"extract", rec, "-o", filepath.Join(t.TempDir(), "repro")}, images[0] + ": not a regular file (a FIFO)"},
			{[]string{"replay", rec}, images[0] + ": not a regular file (a FIFO)"},
		})
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("extract or replay still reads the FIFO after 20 s")
	}
}

// A replay that goes on in a new process after a fault keeps the flags that choose how each
// launch is replayed, and replays the rest, as JSON, from the launch after the fault.
func TestReplayFromArgs(t *testing.T) {
	cmd := newReplayCmd()
	if err := cmd.ParseFlags([]string{"--all", "--from", "2", "--ptx", "--dtype", "bf16", "--atol", "0.5", "--repeat", "3", "--format", "table"}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(replayFromArgs(cmd.Flags(), "rec", 7), " ")
	for _, want := range []string{"replay rec ", "--ptx=recorded", "--dtype=bf16", "--atol=0.5", "--repeat=3", "--all --from 7 --format json"} {
		if !strings.Contains(got, want) {
			t.Errorf("args %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "--from=2") || strings.Contains(got, "table") {
		t.Errorf("args %q keep this run's --from or --format", got)
	}
	// They parse as replay's own.
	again := newReplayCmd()
	if err := again.ParseFlags(replayFromArgs(cmd.Flags(), "rec", 7)[2:]); err != nil {
		t.Errorf("the new process's flags do not parse: %v", err)
	}
}
