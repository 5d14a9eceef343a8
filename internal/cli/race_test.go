package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/instrument"
	"github.com/gpurr/gpurr/internal/race"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// A Triton-style PTX of the recorded kernel, with .loc lines, as the recording keeps it.
const saxpyPTX = `.version 8.0
.target sm_90
.address_size 64
.file 1 "/home/ada/saxpy.py"
.visible .entry saxpy_gridstride(
	.param .u64 saxpy_gridstride_param_0,
	.param .u64 saxpy_gridstride_param_1,
	.param .u32 saxpy_gridstride_param_2,
	.param .f32 saxpy_gridstride_param_3
)
{
	.reg .b32 %r<4>;
	.reg .f32 %f<4>;
	.reg .b64 %rd<6>;
	.loc 1 12 5
	ld.param.u64 %rd1, [saxpy_gridstride_param_0];
	ld.param.u64 %rd2, [saxpy_gridstride_param_1];
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd1, %rd3;
	add.s64 %rd5, %rd2, %rd3;
	.loc 1 13 9
	ld.global.f32 %f1, [%rd4];
	ld.global.f32 %f2, [%rd5];
	add.f32 %f3, %f1, %f2;
	.loc 1 14 9
	st.global.f32 [%rd5], %f3;
	bar.sync 0;
	ret;
}
`

func TestRaceList(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	r, err := testrec.WriteReplayable(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Without PTX: one line naming the ways to get it.
	code, _, stderr := runCLI("race", dir, "--launch", "2", "--list")
	if code != exitUsage || !strings.Contains(stderr, "the recorded module of saxpy_gridstride (") || !strings.Contains(stderr, "holds no PTX (SASS only)") || !strings.Contains(stderr, "--ptx=FILE") {
		t.Errorf("no PTX: exit %d, stderr %q", code, stderr)
	}
	sum := sha256.Sum256(r.Module)
	if err := recording.PutModulePTX(dir, hex.EncodeToString(sum[:]), []byte(saxpyPTX)); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("race", dir, "--launch", "2", "--list", "--at", "global-store,barrier,global-load")
	expectOutput(t, "race --list", code, 0, stdout, stderr,
		"launch 2: saxpy_gridstride\n  PTX from the recording; 4 points picked",
		"     0  ld.global.f32                global-load   saxpy.py:13:9, PTX line 23",
		"     2  st.global.f32                global-store  saxpy.py:14:9, PTX line 27",
		"     3  bar.sync                     barrier       saxpy.py:14:9, PTX line 28")
	// --ptx FILE instead of the recording's copy.
	file := filepath.Join(t.TempDir(), "k.ptx")
	if err := os.WriteFile(file, []byte(saxpyPTX), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCLI("race", dir, "--launch", "2", "--list", "--ptx", file, "--at", "op:^st\\.")
	expectOutput(t, "race --ptx", code, 0, stdout, stderr, "PTX from "+file+"; 1 point picked", "st.global.f32                global-store")
	expectUsageErrors(t, []usageCase{
		{[]string{"race", dir, "--launch", "2", "--at", "barier"}, `unknown instruction class "barier"`},
		{[]string{"race", dir, "--launch", "2", "--delay", "5ms"}, "want 1ns to 1ms"},
		// Was Go's 'time: missing unit in duration "2"'.
		{[]string{"race", dir, "--launch", "2", "--delay", "2"}, `invalid argument "2" for "--delay" flag: want a time with its unit, such as 500ns, 2us or 1ms`},
		{[]string{"race", dir, "--launch", "2", "--fraction", "0"}, "fraction 0"},
		{[]string{"race", dir, "--launch", "2", "--points", "x"}, "--points"},
		{[]string{"race", dir, "--launch", "2", "--points", "9", "--ptx", file}, "no point 9"},
		{[]string{"race", dir, "--launch", "1", "--list"}, "no snapshot"},
	})
}

// --all and --kernels without a launch they can hunt: one line per launch saying why, then
// exit 2 with one line on stderr. (A launch they can hunt needs a GPU: gputest's race tests.)
func TestRaceAllCannotRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	if _, err := testrec.WriteReplayable(dir); err != nil {
		t.Fatal(err)
	}
	oldArch := filepath.Join(t.TempDir(), "sm60.ptx")
	if err := os.WriteFile(oldArch, []byte(strings.Replace(saxpyPTX, ".target sm_90", ".target sm_60", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	otherKernel := filepath.Join(t.TempDir(), "other.ptx")
	if err := os.WriteFile(otherKernel, []byte(strings.ReplaceAll(saxpyPTX, "saxpy_gridstride", "axpby")), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args    []string
		verdict string
	}{
		{[]string{"--all"}, "launch 2  saxpy_gridstride: no PTX (give --ptx FILE"},
		{[]string{"--kernels", "^saxpy"}, "launch 2  saxpy_gridstride: no PTX"},
		{[]string{"--all", "--ptx", oldArch}, "launch 2  saxpy_gridstride: cannot run: the PTX (" + oldArch + "): the module targets sm_60: delays need sm_70 or newer"},
		{[]string{"--all", "--ptx", otherKernel}, "cannot run: the PTX (" + otherKernel + ") has no kernel saxpy_gridstride"},
	} {
		code, stdout, stderr := runCLI(append([]string{"race", dir}, c.args...)...)
		if code != exitUsage || !strings.Contains(stdout, c.verdict) || !strings.Contains(stdout, "0 launches hunted of 1") ||
			!strings.Contains(stderr, "none of the 1 launch could be hunted") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: exit %d, want 2 and the line %q:\n%s%s", c.args, code, c.verdict, stdout, stderr)
		}
	}
	expectUsageErrors(t, []usageCase{
		{[]string{"race", dir, "--kernels", "^gemm"}, `has no snapshotted launch whose kernel matches --kernels "^gemm"`},
		{[]string{"race", dir, "--kernels", "("}, "--kernels"},
		{[]string{"race", dir, "--all", "--launch", "2"}, "give one or the other"},
		{[]string{"race", dir, "--all", "--list"}, "--list and --points work on one launch"},
		// One launch: PTX for an architecture without nanosleep, or without clusters.
		{[]string{"race", dir, "--launch", "2", "--ptx", oldArch}, "the module targets sm_60: delays need sm_70 or newer"},
		{[]string{"race", dir, "--launch", "2", "--ptx", oldArch, "--placement", "cluster"}, "delays need sm_90 or newer (nanosleep, clusters)"},
	})
}

// Counts of runs are refused when the flag is read, before any recording is, when they are
// negative, too few to mean anything, or so many the command would run for days.
func TestCountFlags(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "no-recording")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"race", gone, "--trials", "-1"}, `race: invalid argument "-1" for "--trials" flag: want a whole number from 0 to 100000 (see gpurr race --help)`},
		{[]string{"race", gone, "--trials", "1000000000"}, `"--trials" flag: want a whole number from 0 to 100000`},
		{[]string{"race", gone, "--trials", "99999999999999999999"}, `"--trials" flag: want a whole number from 0 to 100000`},
		{[]string{"race", gone, "--trials", "2.5"}, `"--trials" flag: want a whole number from 0 to 100000`},
		{[]string{"race", gone, "--plain-runs", "1"}, `"--plain-runs" flag: want a whole number from 2 to 100000`},
		{[]string{"replay", gone, "--repeat", "0"}, `replay: invalid argument "0" for "--repeat" flag: want a whole number from 1 to 100000`},
		{[]string{"replay", gone, "--repeat", "100001"}, `"--repeat" flag: want a whole number from 1 to 100000`},
		{[]string{"tune", gone, "--repeat", "-3"}, `tune: invalid argument "-3" for "--repeat" flag: want a whole number from 1 to 100000`},
	} {
		code, stdout, stderr := runCLI(c.args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, want 2 and the one line %q:\n%s%s", c.args, code, c.want, stdout, stderr)
		}
	}
}

// withPTX writes a replayable recording (timed or not) whose module has saxpyPTX beside it.
func withPTX(t *testing.T, write func(string) (testrec.Replayable, error)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rec")
	r, err := write(dir)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(r.Module)
	if err := recording.PutModulePTX(dir, hex.EncodeToString(sum[:]), []byte(saxpyPTX)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The hunt's plan is printed before it starts, which needs a GPU: the delays climb to the
// launch's recorded GPU time, or a fallback said so; --delay fixes one. Without a GPU the
// command then stops (exit 3); with one it hunts, so only the plan is checked.
func TestRacePlan(t *testing.T) {
	timed, untimed := withPTX(t, testrec.WriteReplayable), withPTX(t, testrec.WriteReplayableUntimed)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{timed}, "  hunting up to 2µs delays (the launch ran 400ns on the GPU), budget 10s: 3 steps (warp, thread, cta), 60 trials at most\n"},
		{[]string{untimed, "--trials", "5", "--budget", "1m"},
			"  hunting up to 100µs delays (the recording has no GPU time of this launch, so up to 100µs; --delay sets one), budget 1m0s: 18 steps (warp, thread, cta), 90 trials at most\n"},
		{[]string{untimed, "--placement", "cta", "--fraction", "0.5"}, "budget 10s: 6 steps (cta), 120 trials at most\n"},
		{[]string{timed, "--delay", "20us", "--trials", "7"}, "  hunting with 20µs at 25% of warps (--delay), budget 10s: 7 trials\n"},
		{[]string{timed, "--delay", "1ms", "--placement", "thread", "--budget", "3s"}, "  hunting with 1ms at 25% of threads (--delay), budget 3s: 20 trials\n"},
	} {
		code, stdout, stderr := runCLI(append([]string{"race", "--launch", "2", "--at", "global-store"}, c.args...)...)
		if !strings.Contains(stdout, c.want) || code == 0 && !strings.Contains(stdout, "trial") {
			t.Errorf("%v: exit %d, want the plan %q:\n%s%s", c.args, code, c.want, stdout, stderr)
		}
	}
	// No plan where no trial runs.
	for _, args := range [][]string{{"--trials", "0"}, {"--list"}} {
		if _, stdout, _ := runCLI(append([]string{"race", timed, "--launch", "2"}, args...)...); strings.Contains(stdout, "hunting") {
			t.Errorf("%v: a plan printed:\n%s", args, stdout)
		}
	}
	expectUsageErrors(t, []usageCase{
		{[]string{"race", timed, "--launch", "2", "--budget", "0"}, "race: --budget 0s: want a time more than 0, such as 30s"},
		{[]string{"race", timed, "--launch", "2", "--budget", "-5s"}, "race: --budget -5s: want a time more than 0"},
		{[]string{"race", timed, "--launch", "2", "--budget", "10"}, `invalid argument "10" for "--budget" flag: want a time with its unit`},
	})
}

// --format json holds the plan's steps with the trials each ran, and the witness with its
// step, points and reproduce command (the hunt itself needs a GPU: here a result as it
// returns one).
func TestRaceJSON(t *testing.T) {
	dir := withPTX(t, testrec.WriteReplayable)
	src, err := openReplaySource(newRaceCmd(), dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	c, err := src.Case(2)
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := instrument.ParseSelection("global-load,global-store")
	o := raceOptions{at: "global-load,global-store", trials: 4, budget: 5 * time.Second, fixed: map[string]bool{}}
	tg, err := prepareRace(src, c, o, sel)
	if err != nil {
		t.Fatal(err)
	}
	rep := tg.report(o)
	steps := tg.plan.steps
	res := &race.Result{Baseline: race.Output{1, 2}, Witness: race.Output{1, 3}, Found: true, Seed: 6, Points: []int{2}, Trials: 6, Runs: 14,
		Steps: []race.StepRun{{Step: steps[0], Ran: 4}, {Step: steps[1], Ran: 2}}}
	rep.add(res, &race.ReplayRunner{})
	// The access log of the witness: the delayed store (point 2) races with the load of
	// another CTA (instruction ordinals of the kernel, as instrument numbers them).
	store, load := tg.points[2].Index, tg.points[0].Index
	var text strings.Builder
	sides := reportSides(&text, tg, res, &race.Sides{Noted: 3000, Kept: 2048, Watched: [2]uint64{0x1000, 0x1040},
		Conflicts: []race.Conflict{
			{Store: load + 1, Other: load + 1, Pairs: 50, Addr: 0x2000}, // more pairs, but no delayed side
			{Store: store, Other: load, Pairs: 12, Addr: 0x1008, StoreCTA: 1, StoreThread: 2, OtherCTA: 3, OtherThread: 4}}})
	if i, j := strings.Index(text.String(), "st.global.f32*"), strings.Index(text.String(), "50 pairs"); i < 0 || j < 0 || i > j {
		t.Errorf("the pair with a delayed side is not first:\n%s", text.String())
	}
	for _, want := range []string{
		"the accesses that race (access log of the witness: 3000 noted; the log held 2048, the rest overflowed it; * delayed):",
		"st.global.f32* (saxpy.py:14:9, PTX line 27)  vs  ld.global.f32 (saxpy.py:13:9, PTX line 23)  global memory, 12 pairs, e.g. at 0x1008: CTA 1 thread 2, CTA 3 thread 4",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("sides: no %q in\n%s", want, text.String())
		}
	}
	var none strings.Builder
	reportSides(&none, tg, res, &race.Sides{Noted: 7, Kept: 7})
	if !strings.Contains(none.String(), "pairs no unordered store") {
		t.Errorf("no conflict: %q", none.String())
	}
	rep.addWitness(tg.points, res, []race.Spread{{Region: 1, First: 8, Bytes: 4, Size: 64}}, "gpurr race rec --launch 2 --points 2 --seed 6", sides)
	var b strings.Builder
	writeJSON(&b, rep)
	for _, want := range []string{
		`"launch": 2,`, `"gpu_time_ns": 400,`, `"longest_delay_ns": 2000,`, `"budget_ns": 5000000000,`, `"outcome": "race",`,
		`"trials": 6,`, `"regions_unlike_recording": [],`,
		// The steps: the first two ran, the third did not.
		`{
      "delay_ns": 2000,
      "fraction": 0.25,
      "placement": "warp",
      "planned": 4,
      "ran": 4
    },
    {
      "delay_ns": 2000,
      "fraction": 0.25,
      "placement": "thread",
      "planned": 4,
      "ran": 2
    },
    {
      "delay_ns": 2000,
      "fraction": 0.25,
      "placement": "cta",
      "planned": 4,
      "ran": 0
    }`,
		`"seed": 6,`, `"placement": "thread",`, `"instruction": "st.global.f32",`, `"source": "saxpy.py:14:9",`, `"ptx_line": 27`,
		`"other_side": {
      "noted": 3000,
      "kept": 2048,`, `"space": "global",
          "pairs": 12,`, `"delayed": true`,
		`"regions": [
      1
    ]`, `"changed": [
      {
        "region": 1,
        "first": 8,
        "bytes": 4,
        "size": 64
      }
    ]`, `"reproduce": "gpurr race rec --launch 2 --points 2 --seed 6"`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %s in\n%s", want, b.String())
		}
	}
	// Bad input; and nothing on standard output before the hunt's end.
	code, stdout, _ := runCLI("race", dir, "--launch", "2", "--format", "json")
	if code == 0 || code == exitFailure && stdout != "" {
		t.Errorf("--format json without a GPU: exit %d, stdout %q", code, stdout)
	}
	expectUsageErrors(t, []usageCase{
		{[]string{"race", dir, "--launch", "2", "--format", "yaml"}, `race: unknown --format "yaml" (want text, json)`},
		{[]string{"race", dir, "--all", "--format", "json"}, "--format json reports a hunt in one launch"},
		{[]string{"race", dir, "--launch", "2", "--list", "--format", "json"}, "--list and --points print text"},
	})
}

// A module image that is a fat binary gives its PTX entry (the newest for the recorded GPU),
// or says what it lacks.
func TestRaceFatbinModule(t *testing.T) {
	for _, c := range []struct{ fixture, want string }{
		// The fixture's kernel is another: the error names where the PTX came from.
		{"plain.fatbin", "race: the PTX (the recorded fat binary's PTX for sm_80) has no kernel saxpy_gridstride"},
		{"lz4.fatbin", "the recorded fat binary's PTX for sm_80"},
		{"noptx.fatbin", "holds no PTX (SASS only) in its fat binary of cubins"},
		{"newer.fatbin", "race: saxpy_gridstride: the fat binary's PTX is for sm_100 and newer, the GPU is sm_90: rebuild with an older compute_NN, or pass --ptx"},
	} {
		b, err := os.ReadFile(filepath.Join("..", "fatbin", "testdata", c.fixture))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "rec")
		if _, err := testrec.WriteReplayableModule(dir, b); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runCLI("race", dir, "--launch", "2", "--list")
		if code != exitUsage || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want %q", c.fixture, code, stderr, c.want)
		}
	}
}
