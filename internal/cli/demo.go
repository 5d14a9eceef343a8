package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/agentcfg"
	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/demo"
	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/kernels"
	"github.com/gpurr/gpurr/internal/nanscan"
	"github.com/gpurr/gpurr/internal/outdir"
	"github.com/gpurr/gpurr/recording"
)

func newDemoCmd() *cobra.Command {
	var out, variant string
	var workload bool
	cmd := &cobra.Command{
		Use:   "demo [-o DIR]",
		Short: "Record two runs of a small GPU program that part ways and end in a NaN, and walk through them",
		Long: `demo records two runs of gpurr's own small GPU program (two streams of fills,
saxpys and reductions, checked against the host) with memory capture: in the
second run one value differs, as a clock or an unseeded generator would make
it, and both runs end with a scale that overflowed to infinity, which turns
zeros into NaN. Then it walks through them with the commands you would use:
info, query, trace, diff, nan, rewind, manifest and verify, and replay.

Without a usable GPU it says why and walks through the recordings of the
same two runs that ship inside gpurr.

The recordings go into a temporary directory, removed at the end; -o DIR
keeps them (DIR/a, DIR/b): DIR must not exist or be empty. When it fails,
or is interrupted (Ctrl-C, SIGTERM, SIGHUP), demo removes its temporary
directory, or puts -o DIR back as it found it, so that the same command can
run again; interrupted, it exits with 128 + the signal's number.

Exit status: 0 when the demo ran, 1 when the workload, its recording or a
step of the walk failed, or when there is no GPU and this build carries no
recording, 2 when -o DIR cannot be its folder (it exists and is not empty,
or is a file or a symlink to nothing), 3 when it cannot write its files
(its temporary folder, the recordings that ship inside gpurr).`,
		Example: `  gpurr demo
  gpurr demo -o demo && gpurr diff demo/a demo/b`,
		Args: positional(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if workload {
				v, err := demo.ParseVariant(variant)
				if err != nil {
					return usageErrorf("demo: %v", err)
				}
				return runWorkload(cmd.OutOrStdout(), cmd.ErrOrStderr(), v)
			}
			return runDemo(cmd.OutOrStdout(), cmd.ErrOrStderr(), out)
		},
	}
	f := cmd.Flags()
	outputVar(f, &out, "output", "o", "", "directory to keep the recordings in, which must not exist or be empty (default: a temporary directory, removed at the end)")
	// --workload is the recorded program: gpurr demo runs
	// "gpurr record -- gpurr demo --workload [--variant a|b]".
	f.BoolVar(&workload, "workload", false, "run the demo workload in this process and exit")
	f.StringVar(&variant, "variant", "", "with --workload: the story's run a or b")
	f.MarkHidden("workload")
	f.MarkHidden("variant")
	return cmd
}

// runWorkload is gpurr demo --workload.
func runWorkload(stdout, stderr io.Writer, v demo.Variant) error {
	_, err := demo.RunWorkload(stdout, v)
	if err != nil {
		err = fmt.Errorf("demo workload: %w", err)
	}
	if os.Getenv(agentcfg.Injection) != "" {
		// A Go program skips atexit handlers on exit, and the injected
		// agent writes the end of the recording in one: leave through
		// the C library.
		code := exitOK
		if err != nil {
			fmt.Fprintf(stderr, "gpurr: %v\n", err)
			code = exitFound
		}
		cuda.Exit(code)
	}
	if err != nil {
		return &exitError{code: exitFound, err: err}
	}
	return nil
}

// storyRecordFlags are the memory capture the story's runs are recorded with: hashes of every
// launch, NaN counted on the GPU, snapshots of the saxpys (what rewind and replay need).
var storyRecordFlags = []string{"--memory", recording.MemorySnapshot, "--snapshot-kernels", "^" + kernels.DemoSaxpy + "$", "--nan-scan", "f32"}

func runDemo(stdout, stderr io.Writer, out string) (err error) {
	dir, release, err := demoDir(out)
	if err != nil {
		return err
	}
	defer func() { release(err == nil) }()
	if out == "" {
		defer func() {
			os.RemoveAll(dir)
			fmt.Fprintf(stdout, "\n(The recordings were in %s, now removed: gpurr demo -o DIR keeps them.)\n", dir)
		}()
	}
	a, b := argPath(dir, demo.StoryRuns[0]), argPath(dir, demo.StoryRuns[1])
	sys, err := cuda.Probe()
	if err != nil {
		fmt.Fprintf(stdout, "No usable GPU here (%v).\n", err)
		if !demo.HasStory() {
			return showBundled(stdout, stderr, dir)
		}
		if err := demo.ExtractStory(dir); err != nil {
			return &exitError{code: exitFailure, err: fmt.Errorf("demo: %w", err)}
		}
		fmt.Fprintf(stdout, "Walking instead through two recordings of gpurr's demo program that ship with gpurr\n"+
			"(gpurr doctor says what this machine needs to record one itself).\n")
		return walkStory(stdout, stderr, a, b, dir, false)
	}
	exe, err := os.Executable()
	if err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("demo: cannot find the gpurr executable: %w", err)}
	}
	fmt.Fprintf(stdout, "Recording two runs of gpurr's demo program on GPU 0 (%s) into %s\n\n", describeDevice(sys.Devices[0]), dir)
	for i, rec := range []string{a, b} {
		if err := recordWorkload(context.Background(), exe, rec, storyRecordFlags, demo.StoryRuns[i], stdout, stderr); err != nil {
			return &exitError{code: exitFound, err: fmt.Errorf("demo: %w (gpurr doctor checks what recording needs)", err)}
		}
	}
	return walkStory(stdout, stderr, a, b, dir, true)
}

// walkStory runs, on the story's recordings a and b, each verb a user would reach for, saying
// why before each; work is where their outputs go. With a GPU it replays the NaN's launch too.
func walkStory(stdout, stderr io.Writer, a, b, work string, gpu bool) error {
	step := func(why string, want int, args ...string) error {
		quoted := make([]string, len(args))
		for i, arg := range args {
			quoted[i] = shellQuote(arg)
		}
		fmt.Fprintf(stdout, "\n# %s\n$ gpurr %s\n", why, strings.Join(quoted, " "))
		if code := run(args, stdout, stderr); code != want {
			return &exitError{code: exitFound, err: fmt.Errorf("demo: gpurr %s exited %d, expected %d", args[0], code, want)}
		}
		return nil
	}
	steps := []struct {
		why  string
		want int
		args []string
	}{
		{"What ran, where the GPU time went, what memory capture kept:", exitOK, []string{"info", a}},
		{"Every launch is a row: SQL answers the questions info does not.", exitOK,
			[]string{"query", a, "SELECT name, count(*) AS launches FROM launches GROUP BY name ORDER BY launches DESC"}},
		{"A timeline to open at https://ui.perfetto.dev:", exitOK, []string{"trace", a, "-o", argPath(work, "a.json")}},
		{"The runs should be the same. Where do they part ways?", exitFound, []string{"diff", a, b}},
		{"Where did the first NaN or Inf appear?", exitFound, []string{"nan", a}},
	}
	for _, s := range steps {
		if err := step(s.why, s.want, s.args...); err != nil {
			return err
		}
	}
	seq, region, err := firstNaN(a)
	if err != nil {
		return &exitError{code: exitFound, err: fmt.Errorf("demo: %w", err)}
	}
	launch, reg := strconv.FormatUint(seq, 10), strconv.Itoa(region)
	if err := step("What that launch read, as an array NumPy loads (np.load):", exitOK,
		"rewind", a, "--launch", launch, "--before", "--region", reg, "--npy", "--dtype", "f32", "-o", argPath(work, "before.npy")); err != nil {
		return err
	}
	manifest := argPath(work, "a-manifest.json")
	if err := step("Run A's memory hashes as a manifest, to check later runs against (in CI, say):", exitOK,
		"manifest", a, "-o", manifest); err != nil {
		return err
	}
	if err := step("Run B against it:", exitFound, "verify", b, "--manifest", manifest); err != nil {
		return err
	}
	if gpu {
		return step("That launch again, alone, on its recorded inputs, checked bit for bit:", exitOK, "replay", a, "--launch", launch)
	}
	fmt.Fprintf(stdout, "\n# On a machine with a GPU, these run that launch again alone, and search its launch shape:\n"+
		"$ gpurr replay %s --launch %s\n$ gpurr tune %s --launch %s --block 64,128,256,512\n", shellQuote(a), launch, shellQuote(a), launch)
	return nil
}

// firstNaN finds the launch and region where the recording at dir first holds a NaN or Inf.
func firstNaN(dir string) (seq uint64, region int, err error) {
	set, err := recording.Open(dir)
	if err != nil {
		return 0, 0, err
	}
	types, err := dtype.ParseList("f32")
	if err != nil {
		return 0, 0, err
	}
	found, _, err := nanscan.Scan(set.Processes[0], types, nanscan.Options{})
	if err != nil {
		return 0, 0, err
	}
	if found == nil || len(found.Regions) == 0 {
		return 0, 0, fmt.Errorf("%s holds no NaN: the story's recording is not what it should be", dir)
	}
	return found.Launch.GetSeq(), found.Regions[0].Index, nil
}

// showBundled extracts the recording of the plain workload that ships in the binary (builds
// without the story's recordings) and shows it.
func showBundled(stdout, stderr io.Writer, dir string) error {
	if !demo.HasBundled() {
		return &exitError{code: exitFound, err: fmt.Errorf("demo: %w, so there is nothing to show (gpurr doctor says what recording needs)", demo.ErrNoBundled)}
	}
	if err := demo.ExtractBundled(dir); err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("demo: %w", err)}
	}
	fmt.Fprintf(stdout, "Showing instead the recording of gpurr's demo program that ships with gpurr\n"+
		"(gpurr doctor says what this machine needs to record one itself).\n\n")
	return showRecording(stdout, stderr, dir)
}

// demoDir returns the directory to record into: out, or a new temporary directory. Until
// release, an interrupt removes the temporary directory, or puts out back as it was, so that
// gpurr demo -o out can run again; release(false), for a demo that failed, puts out back too.
func demoDir(out string) (dir string, release func(ok bool), err error) {
	if out != "" {
		// Like record's -o: the story's recordings and outputs are never mixed into what
		// the folder holds (a second gpurr demo -o DIR would fail half way through).
		if err := checkOutFolder("demo", "-o", out, nil); err != nil {
			return "", nil, err
		}
		undo := outdir.Track(out)
		done, _ := outdir.Undoable(func() (func(), error) { return undo, nil })
		return out, func(ok bool) {
			if !ok {
				undo()
			}
			done()
		}, nil
	}
	dir, done, err := tempDir("gpurr-demo-")
	if err != nil {
		return "", nil, &exitError{code: exitFailure, err: fmt.Errorf("demo: %w", err)}
	}
	return dir, func(bool) { done() }, nil
}

// argPath joins elem into a path to give a verb as an argument: one that would begin with
// "-" (demo -o -x) begins with "./", so that it is not taken for a flag.
func argPath(elem ...string) string {
	p := filepath.Join(elem...)
	if strings.HasPrefix(p, "-") {
		p = "." + string(filepath.Separator) + p
	}
	return p
}

// showRecording runs gpurr info on dir and suggests next commands.
func showRecording(stdout, stderr io.Writer, dir string) error {
	if code := run([]string{"info", dir}, stdout, stderr); code != exitOK {
		return exitWith(code)
	}
	q := shellQuote(dir)
	fmt.Fprintf(stdout, "\nNext, try:\n"+
		"  gpurr query %s 'SELECT name, count(*) FROM launches GROUP BY name'\n"+
		"  gpurr record -o DIR -- YOUR-PROGRAM   to record your own\n", q)
	return nil
}
