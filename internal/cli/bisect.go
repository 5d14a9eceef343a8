package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/gpurr/gpurr/internal/bisect"
	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/nanscan"
	"github.com/gpurr/gpurr/recording"
)

type bisectOptions struct {
	out            string
	format         string
	nan            bool
	digestEvery    uint32
	stepEvery      uint32
	stepRange      string
	rounds         int
	recordFlags    []string
	includeLibrary bool
	frames         int
}

func newBisectCmd() *cobra.Command {
	var o bisectOptions
	cmd := &cobra.Command{
		Use:   "bisect [flags] -- CMD [ARGS...]  |  bisect [flags] A B",
		Short: "Run a program again and again to find the kernel launch where its runs part ways, or that first makes NaN",
		Long: `bisect runs CMD twice with step digests (gpurr record --memory digest),
finds the first training step whose state differs between the runs, runs it
twice more hashing every launch of that step alone (--hash-steps), and
reports, as gpurr diff does, the first launch that differs: its kernel, its
Python line, its rank and why. When the reruns part ways in another step, it
narrows there. Given two digest recordings A and B instead of CMD, it starts
from them and reruns each with the command it recorded.

--nan runs CMD once with digests (they count NaN and Inf as f32), finds the
first step whose digest holds one, runs it once more counting NaN and Inf
after every launch of that step, and reports, as gpurr nan does, the launch
that first held one and whether it made it.

Every run's recording is kept in the output folder, with the program's
output beside it (NAME.log). Exit status: 0 when the runs agree at every
digest (--nan: no NaN at any), 1 when they part ways (a NaN found), 2 on bad
input or a run whose program failed, 128+N when interrupted (what was made
is kept).`,
		Example: `  gpurr bisect -- python train.py --steps 20
  gpurr bisect -o hunt -- torchrun --nproc-per-node 2 train.py
  gpurr bisect --nan -- python train.py
  gpurr bisect run1 run2
  gpurr bisect --step-every 500 -- ./my_cuda_program`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runBisect(cmd, o, args) },
	}
	cmd.Flags().SetInterspersed(false) // flags after CMD belong to CMD
	f := cmd.Flags()
	outputVar(f, &o.out, "output", "o", "", "folder for every run's recording, made anew (default gpurr-bisect-YYYYMMDD-HHMMSS)")
	f.StringVar(&o.format, "format", "text", "output format: text or json")
	completeValues(cmd, "format", "text", "json")
	f.BoolVar(&o.nan, "nan", false, "find the first launch that makes NaN or Inf instead of where two runs part ways")
	f.Uint32Var(&o.digestEvery, "digest-every", 1, "take the digest of every Nth step only: 1/N of their cost, a divergence placed within N steps, which the reruns hash whole")
	f.Uint32Var(&o.stepEvery, "step-every", 0, "training steps are runs of N launch calls, for programs without torch.optim (passed to every run)")
	f.StringVar(&o.stepRange, "step-range", "", "number the reports' steps by the NVTX ranges whose message matches this regular expression (passed to every run: digests are taken where those ranges end)")
	countVar(f, &o.rounds, "rounds", 3, 1, "narrowings at most: reruns that part ways in another step, or do not part ways, are run again")
	f.StringArrayVar(&o.recordFlags, "record-flag", nil, "a gpurr record flag for every run, as FLAG=VALUE (repeatable), e.g. --record-flag=--callstack=python")
	f.BoolVar(&o.includeLibrary, "include-library", false, "compare communication libraries' own memory too (NCCL's buffers), which differs from run to run by design")
	countVar(f, &o.frames, "frames", 6, 0, "Python frames of each callstack to show, innermost first")
	return cmd
}

func runBisect(cmd *cobra.Command, o bisectOptions, args []string) error {
	if err := checkFormat("bisect", o.format, "text", "json"); err != nil {
		return err
	}
	opts := bisect.Options{NaN: o.nan, DigestEvery: o.digestEvery, Rounds: o.rounds}
	switch {
	case cmd.ArgsLenAtDash() == 0 && len(args) > 0: // -- CMD
		if _, err := exec.LookPath(args[0]); err != nil {
			return usageErrorf("bisect: cannot run %q: %v", args[0], unwrapExecError(err))
		}
		opts.Commands = [2][]string{args, args}
	case cmd.ArgsLenAtDash() < 0 && (!o.nan && len(args) == 2 || o.nan && len(args) == 1):
		for i, dir := range args {
			if _, err := openRecording(cmd, dir); err != nil {
				return err
			}
			c, err := recording.SetCommand(dir)
			if err != nil {
				return usageErrorf("bisect: %s: no command to run again: %v", dir, err)
			}
			opts.Given[i], opts.Commands[i] = dir, c
		}
		if len(args) == 1 {
			opts.Commands[1] = opts.Commands[0]
		}
	case o.nan:
		return usageErrorf("bisect: --nan takes -- CMD [ARGS...], or one digest recording")
	default:
		return usageErrorf("bisect: give -- CMD [ARGS...] to run, or two digest recordings A B")
	}
	if o.digestEvery == 0 || cmd.Flags().Changed("step-every") && o.stepEvery == 0 {
		return usageErrorf("bisect: --digest-every and --step-every take a count of 1 or more")
	}
	if o.stepEvery > 0 && o.stepRange != "" {
		return usageErrorf("bisect: --step-every and --step-range each say what a training step is: give one")
	}
	if _, err := recording.CompileStepRange(o.stepRange); o.stepRange != "" && err != nil {
		return usageErrorf("bisect: --step-range: %v", err)
	}
	if o.stepEvery > 0 {
		opts.Flags = append(opts.Flags, "--step-every", strconv.FormatUint(uint64(o.stepEvery), 10))
	}
	if o.stepRange != "" {
		opts.Flags = append(opts.Flags, "--step-range", o.stepRange)
	}
	for _, fl := range o.recordFlags {
		if !strings.HasPrefix(fl, "--") || !strings.Contains(fl, "=") {
			return usageErrorf("bisect: --record-flag %q: want --FLAG=VALUE, as gpurr record takes it", fl)
		}
		if name, _, _ := strings.Cut(fl, "="); name == "--memory" || name == "--hash-steps" || name == "--digest-every" || name == "-o" || name == "--output" {
			return usageErrorf("bisect: --record-flag %s: bisect sets %s itself", fl, name)
		}
		opts.Flags = append(opts.Flags, fl)
	}
	if o.out == "" {
		o.out = "gpurr-bisect-" + time.Now().Format("20060102-150405")
	}
	var given []string
	for _, g := range opts.Given {
		if g != "" {
			given = append(given, g)
		}
	}
	if err := checkOutFolder("bisect", "-o", o.out, given); err != nil {
		return err
	}
	out, err := filepath.Abs(o.out)
	if err != nil {
		return usageErrorf("bisect: -o %s: %v", o.out, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return usageErrorf("bisect: -o %s: %v", o.out, err)
	}
	opts.Out = out
	self, err := selfPath()
	if err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("bisect: cannot find gpurr itself to record with: %v", err)}
	}
	stderr := cmd.ErrOrStderr()
	if term.IsTerminal(int(os.Stderr.Fd())) { // the report names every run at the end
		opts.Progress = func(line string) { fmt.Fprintf(stderr, "gpurr: bisect: %s\n", line) }
	}

	// An interrupt (the terminal's goes to the program's run too) ends bisect once the run
	// under way has ended: what was made is kept, and named.
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	var caught os.Signal
	rec := &bisectRecorder{self: self}
	go func() {
		for s := range sigs {
			if caught == nil {
				caught = s
			}
			rec.signal(s)
			cancel()
		}
	}()
	opts.Record = rec.record
	opts.Narrow = bisectNarrower{cmd: cmd, o: o}
	res, err := bisect.Bisect(ctx, opts)
	if caught != nil {
		sig := caught.(syscall.Signal)
		fmt.Fprintf(stderr, "gpurr: bisect: interrupted by %s; kept: %s\n", unix.SignalName(sig), keptList(res))
		return exitWith(128 + int(sig))
	}
	if err != nil {
		if errors.Is(err, bisect.ErrProgram) {
			return usageErrorf("bisect: %v", err)
		}
		var ee *exitError
		if errors.As(err, &ee) {
			return err
		}
		return usageErrorf("bisect: %v (kept: %s)", err, keptList(res))
	}
	w := cmd.OutOrStdout()
	if o.format == "json" {
		err = diff.WriteJSON(w, res)
	} else {
		err = res.WriteText(w)
	}
	if err != nil {
		return err
	}
	switch res.Outcome {
	case "agree", "finite":
		return nil
	}
	return exitWith(exitFound)
}

// selfPath is the gpurr that runs, to run again as gpurr record: as it was invoked (a name
// on PATH, or a path), which is the gpurr a wrapper or a link stands for, else the
// executable the kernel names.
func selfPath() (string, error) {
	if name := os.Args[0]; name != "" {
		if p, err := exec.LookPath(name); err == nil {
			return filepath.Abs(p)
		}
	}
	return os.Executable()
}

// keptList names what bisect's runs left: each recording, or the log of a run that made none.
func keptList(res *bisect.Result) string {
	var out []string
	for _, run := range res.Runs {
		if run.Given {
			continue
		}
		if _, err := os.Stat(run.Dir); err == nil {
			out = append(out, run.Dir)
		} else if _, err := os.Stat(run.Dir + ".log"); err == nil {
			out = append(out, run.Dir+".log")
		}
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, ", ")
}

// bisectRecorder makes bisect's runs with gpurr record, the program's output going to
// NAME.log beside the recording.
type bisectRecorder struct {
	self    string
	running *os.Process
}

func (r *bisectRecorder) record(ctx context.Context, run *bisect.Run) error {
	log, err := os.OpenFile(run.Dir+".log", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	args := append([]string{"record", "-o", run.Dir}, run.Flags...)
	args = append(append(args, "--"), run.Command...)
	c := exec.Command(r.self, args...)
	c.Stdout, c.Stderr = log, log
	if err := c.Start(); err != nil {
		return err
	}
	r.running = c.Process
	err = c.Wait()
	r.running = nil
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		run.Exit = ee.ExitCode()
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			run.Exit = 128 + int(st.Signal())
		}
	default:
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// gpurr record's own failure (exit 2 or 3 before its program ran) leaves no recording.
	if _, err := os.Stat(run.Dir); err != nil {
		return fmt.Errorf("gpurr record made no recording (exit %d; see %s.log)", run.Exit, run.Dir)
	}
	if _, err := recording.Open(run.Dir); err != nil {
		return fmt.Errorf("gpurr record made no readable recording (exit %d; see %s.log): %v", run.Exit, run.Dir, err)
	}
	return nil
}

// signal passes a signal to the run under way (gpurr record passes it to its program).
func (r *bisectRecorder) signal(s os.Signal) {
	if p := r.running; p != nil {
		_ = p.Signal(s)
	}
}

// bisectNarrower reads bisect's runs as gpurr diff and gpurr nan do.
type bisectNarrower struct {
	cmd *cobra.Command
	o   bisectOptions
}

func (n bisectNarrower) Diff(a, b string) (bisect.Report, bool, error) {
	do := diffOptions{format: n.o.format, elements: 8, unmatched: 5, frames: n.o.frames, includeLibrary: n.o.includeLibrary}
	report, err := compareRecordings(n.cmd, do, a, b, false)
	if err != nil {
		return nil, false, err
	}
	return report, report.Parted > 0, nil
}

func (n bisectNarrower) NaN(dir string) (bisect.Report, bool, error) {
	set, err := recording.Open(dir)
	if err != nil {
		return nil, false, err
	}
	// Of the processes that hold one, the one whose launch came first by the wall clock:
	// ranks hand each other their NaN through collectives.
	var first *nanscan.Report
	var firstAt int64
	firstReceived := false
	for _, p := range set.Processes {
		if p.Info.GetMemory() == nil { // a launcher (torchrun's) that ran no kernel
			continue
		}
		// The types the rerun counted (bisect asks for the digests' own).
		types, err := dtype.ParseFloatList(strings.Join(p.Info.GetMemory().GetNanScan(), ","))
		if err != nil || len(types) == 0 {
			return nil, false, fmt.Errorf("%s counted no NaN (--nan-scan): %v", p.Dir, err)
		}
		found, st, err := nanscan.Scan(p, types, nanscan.Options{})
		if err != nil {
			return nil, false, err
		}
		if found == nil {
			continue
		}
		report, err := nanscan.NewReport(p, types, false, found, st, n.o.frames)
		if err != nil {
			return nil, false, err
		}
		// A NaN that first shows in a collective's output was received from another rank: a
		// rank where a kernel of its own made one comes first, whatever the host clocks say.
		received := diff.IsCollective(found.Kernel.GetName())
		at := p.Info.GetStartUnixNs() + int64(found.Launch.GetHostNs()) - int64(p.Info.GetStartNs())
		if first == nil || firstReceived && !received || firstReceived == received && at < firstAt {
			first, firstAt, firstReceived = report, at, received
		}
	}
	if first == nil {
		return nil, false, nil
	}
	return first, true, nil
}

func (n bisectNarrower) Pair(a, b *recording.Set) ([][2]*recording.Process, []string) {
	pa, pb := diff.Procs(a), diff.Procs(b)
	idx, warnings := diff.PairProcesses(a.Dir, pa, b.Dir, pb)
	out := make([][2]*recording.Process, len(idx))
	for i, ij := range idx {
		out[i] = [2]*recording.Process{a.Processes[ij[0]], b.Processes[ij[1]]}
	}
	return out, warnings
}
