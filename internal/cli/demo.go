package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/agentcfg"
	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/demo"
	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/kernels"
	"github.com/gpurr/gpurr/internal/nanscan"
	"github.com/gpurr/gpurr/internal/outdir"
	"github.com/gpurr/gpurr/internal/termsafe"
	"github.com/gpurr/gpurr/recording"
)

func newDemoCmd() *cobra.Command {
	var out, variant string
	var workload bool
	cmd := &cobra.Command{
		Use:   "demo [-o DIR]",
		Short: "Record two runs of a small PyTorch training loop that part ways and end in a NaN, and walk through them",
		Long: `demo records two runs of a small PyTorch training loop that ships with gpurr
(train.py, written into the demo's folder) with memory hashes and NaN counted
on the GPU (--memory hash --nan-scan f32): in the second run the learning
rate is one float32 ulp larger, and at step 4 the loss takes a log of
negative numbers. Then it walks through them with the commands you would
use: info, query (a line per launch; a backward kernel at its forward
line), trace, diff (where the runs part ways, and the parameter that
differs), nan (the launch and line that made the NaN, and whether its
inputs were finite), manifest and verify.

It needs a GPU and a Python that imports torch: $PYTHON, else python3. With
a GPU and no torch it records gpurr's own small GPU program instead (two
runs that part ways and end in a NaN). Without a usable GPU it says why and
walks through recordings of the training loop's two runs, made on a GPU,
that ship inside gpurr.

The recordings go into a temporary directory, which stays for the commands
the walk printed (its end names it); -o DIR puts them there instead (DIR/a,
DIR/b): DIR must not exist or be empty. When it fails, or is interrupted
(Ctrl-C, SIGTERM, SIGHUP), demo removes its temporary directory, or puts -o
DIR back as it found it, so that the same command can run again;
interrupted, it exits with 128 + the signal's number.

Exit status: 0 when the demo ran, 1 when the program, its recording or a
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
	outputVar(f, &out, "output", "o", "", "directory to keep the recordings in, which must not exist or be empty (default: a temporary directory, named at the end)")
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
		// The commands the walk printed name the recordings: they stay, unless the demo failed.
		defer func() {
			if err != nil {
				os.RemoveAll(dir)
				return
			}
			fmt.Fprintf(stdout, "\n(The recordings stay in %s for the commands above: rm -r %s when done.\n"+
				"gpurr demo -o DIR puts them where you choose.)\n", dir, shellQuote(dir))
		}()
	}
	a, b := argPath(dir, demo.StoryRuns[0]), argPath(dir, demo.StoryRuns[1])
	sys, err := cuda.Probe()
	if err != nil {
		fmt.Fprintf(stdout, "No usable GPU here (%v).\n", err)
		return walkBundled(stdout, stderr, a, b, dir)
	}
	exe, err := os.Executable()
	if err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("demo: cannot find the gpurr executable: %w", err)}
	}
	python, err := torchPython(context.Background())
	if err != nil {
		fmt.Fprintf(stdout, "No Python with torch here (%v): recording gpurr's own demo program instead.\n", err)
		fmt.Fprintf(stdout, "Recording two runs of gpurr's demo program on GPU 0 (%s) into %s\n\n", describeDevice(sys.Devices[0]), dir)
		for i, rec := range []string{a, b} {
			if err := recordWorkload(context.Background(), exe, rec, storyRecordFlags, demo.StoryRuns[i], stdout, stderr); err != nil {
				return &exitError{code: exitFound, err: fmt.Errorf("demo: %w (gpurr doctor checks what recording needs)", err)}
			}
		}
		return walkStory(stdout, stderr, a, b, dir, true)
	}
	script, err := demo.WriteTrainScript(dir)
	if err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("demo: %w", err)}
	}
	if script, err = filepath.Abs(script); err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("demo: %w", err)}
	}
	fmt.Fprintf(stdout, "Recording two runs of a small PyTorch training loop (%s) on GPU 0 (%s) into %s:\n"+
		"run b's learning rate is one float32 ulp above run a's, and at step %d the loss takes a log of negative numbers.\n\n",
		script, describeDevice(sys.Devices[0]), dir, demo.TrainNaNStep)
	for i, rec := range []string{a, b} {
		fmt.Fprintf(stdout, "$ gpurr record -o %s %s -- %s %s %s\n", shellQuote(rec), strings.Join(demo.TrainRecordFlags, " "),
			shellQuote(python), shellQuote(script), demo.TrainRuns[i])
		program := []string{python, script, demo.TrainRuns[i]}
		if err := recordProgram(context.Background(), exe, rec, demo.TrainRecordFlags, program, "", stdout, stderr); err != nil {
			return &exitError{code: exitFound, err: fmt.Errorf("demo: %w (gpurr doctor checks what recording needs)", err)}
		}
	}
	return walkTrain(stdout, stderr, a, b, dir, python)
}

// walkBundled walks through the recordings that ship in this build: the training story's,
// else (builds made before it was recorded) the story of gpurr's own program, else the plain
// workload's.
func walkBundled(stdout, stderr io.Writer, a, b, dir string) error {
	const doctor = "(gpurr doctor says what this machine needs to record them itself).\n"
	switch {
	case demo.HasTrain():
		if err := demo.ExtractTrain(dir); err != nil {
			return &exitError{code: exitFailure, err: fmt.Errorf("demo: %w", err)}
		}
		script, err := demo.WriteTrainScript(dir)
		if err != nil {
			return &exitError{code: exitFailure, err: fmt.Errorf("demo: %w", err)}
		}
		fmt.Fprintf(stdout, "Walking instead through two recordings of a small PyTorch training loop (%s), made on a GPU\n"+
			"and shipped with gpurr: run b's learning rate is one float32 ulp above run a's, and at step %d\n"+
			"the loss takes a log of negative numbers "+doctor, script, demo.TrainNaNStep)
		return walkTrain(stdout, stderr, a, b, dir, "python3")
	case demo.HasStory():
		if err := demo.ExtractStory(dir); err != nil {
			return &exitError{code: exitFailure, err: fmt.Errorf("demo: %w", err)}
		}
		fmt.Fprintf(stdout, "Walking instead through two recordings of gpurr's demo program that ship with gpurr\n"+doctor)
		return walkStory(stdout, stderr, a, b, dir, false)
	}
	return showBundled(stdout, stderr, dir)
}

// torchPython finds the Python that records the training story: $PYTHON, else python3 on
// PATH, when it imports torch and torch sees a GPU.
func torchPython(ctx context.Context) (string, error) {
	python := os.Getenv("PYTHON")
	if python == "" {
		python = "python3"
	}
	path, err := exec.LookPath(python)
	if err != nil {
		return "", fmt.Errorf("no %s: set PYTHON to one that imports torch", python)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-c", "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)")
	var msg bytes.Buffer
	cmd.Stderr = &msg
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return path, nil
	case errors.As(err, &ee) && ee.ExitCode() == 3:
		return "", fmt.Errorf("%s imports torch, which sees no GPU", path)
	case strings.Contains(msg.String(), "No module named 'torch'"):
		return "", fmt.Errorf("%s does not import torch: set PYTHON to one that does", path)
	}
	lines := strings.Split(strings.TrimSpace(msg.String()), "\n")
	return "", fmt.Errorf("%s -c 'import torch': %v: %s", path, err, termsafe.String(lines[len(lines)-1]))
}

// walkStep prints why, then the command "gpurr args...", and runs it: it must exit with want.
func walkStep(stdout, stderr io.Writer, why string, want int, args ...string) error {
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

// demoStep is a step of a walk: why, the exit status expected, gpurr's arguments.
type demoStep struct {
	why  string
	want int
	args []string
}

func walkSteps(stdout, stderr io.Writer, steps []demoStep) error {
	for _, s := range steps {
		if err := walkStep(stdout, stderr, s.why, s.want, s.args...); err != nil {
			return err
		}
	}
	return nil
}

// trainStepQuery lists one training step's launches with their lines: the step after the
// first, whose launches all come from the loop.
const trainStepQuery = "SELECT seq, backward_node, user_line, substr(demangled, 1, 40) AS kernel FROM launches WHERE step = 1 ORDER BY seq"

// walkTrain runs, on the training story's recordings a and b, the verbs a user would reach
// for, saying why before each; work is where their outputs go, and holds train.py. python is
// what the commands it suggests at the end run the script with.
func walkTrain(stdout, stderr io.Writer, a, b, work, python string) error {
	manifest := argPath(work, "a-manifest.json")
	err := walkSteps(stdout, stderr, []demoStep{
		{"What ran, where the GPU time went, which lines of train.py launched it:", exitOK, []string{"info", a}},
		{"A line per launch: the kernels of training step 1, each with the line of train.py that made it;\n" +
			"# a kernel of the backward pass names its autograd node and the forward line whose gradient it computes.",
			exitOK, []string{"query", a, trainStepQuery}},
		{"A timeline to open at https://ui.perfetto.dev:", exitOK, []string{"trace", a, "-o", argPath(work, "a.json")}},
		{"The runs differ only in the learning rate. Where do they part ways, and why?", exitFound, []string{"diff", a, b}},
		{fmt.Sprintf("Step %d's loss is NaN. Which launch made the first NaN, at which line, and were its inputs finite?", demo.TrainNaNStep),
			exitFound, []string{"nan", a}},
		{"Run A's memory hashes as a manifest, to check later runs against (in CI, say):", exitOK, []string{"manifest", a, "-o", manifest}},
		{"Run B against it:", exitFound, []string{"verify", b, "--manifest", manifest}},
	})
	if err != nil {
		return err
	}
	seq, region, err := firstNaN(a)
	if err != nil {
		return &exitError{code: exitFound, err: fmt.Errorf("demo: %w", err)}
	}
	values := argPath(work, "a-values")
	script := shellQuote(argPath(work, demo.TrainScriptName))
	fmt.Fprintf(stdout, "\n# Hashes say where, not what: to see the values that launch read, record it again with a\n"+
		"# snapshot before and after it (on a machine with a GPU and torch), then read them back or replay it:\n"+
		"$ gpurr record --memory snapshot --snapshot-launches %d -o %s -- %s %s a\n"+
		"$ gpurr rewind %s --launch %d --before --region %d --npy --dtype f32 -o %s\n"+
		"$ gpurr replay %s --launch %d\n",
		seq, shellQuote(values), shellQuote(python), script,
		shellQuote(values), seq, region, shellQuote(argPath(work, "before.npy")), shellQuote(values), seq)
	return nil
}

// walkStory runs, on the recordings a and b of gpurr's own program's story, each verb a user
// would reach for, saying why before each; work is where their outputs go. With a GPU it
// replays the NaN's launch too.
func walkStory(stdout, stderr io.Writer, a, b, work string, gpu bool) error {
	err := walkSteps(stdout, stderr, []demoStep{
		{"What ran, where the GPU time went, what memory capture kept:", exitOK, []string{"info", a}},
		{"Every launch is a row: SQL answers the questions info does not.", exitOK,
			[]string{"query", a, "SELECT name, count(*) AS launches FROM launches GROUP BY name ORDER BY launches DESC"}},
		{"A timeline to open at https://ui.perfetto.dev:", exitOK, []string{"trace", a, "-o", argPath(work, "a.json")}},
		{"The runs should be the same. Where do they part ways?", exitFound, []string{"diff", a, b}},
		{"Where did the first NaN or Inf appear?", exitFound, []string{"nan", a}},
	})
	if err != nil {
		return err
	}
	seq, region, err := firstNaN(a)
	if err != nil {
		return &exitError{code: exitFound, err: fmt.Errorf("demo: %w", err)}
	}
	launch, reg := strconv.FormatUint(seq, 10), strconv.Itoa(region)
	manifest := argPath(work, "a-manifest.json")
	err = walkSteps(stdout, stderr, []demoStep{
		{"What that launch read, as an array NumPy loads (np.load):", exitOK,
			[]string{"rewind", a, "--launch", launch, "--before", "--region", reg, "--npy", "--dtype", "f32", "-o", argPath(work, "before.npy")}},
		{"Run A's memory hashes as a manifest, to check later runs against (in CI, say):", exitOK, []string{"manifest", a, "-o", manifest}},
		{"Run B against it:", exitFound, []string{"verify", b, "--manifest", manifest}},
	})
	if err != nil {
		return err
	}
	if gpu {
		return walkStep(stdout, stderr, "That launch again, alone, on its recorded inputs, checked bit for bit:", exitOK, "replay", a, "--launch", launch)
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
