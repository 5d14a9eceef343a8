package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/instrument"
	"github.com/gpurr/gpurr/internal/ptx"
	"github.com/gpurr/gpurr/internal/race"
	"github.com/gpurr/gpurr/internal/replay"
)

type raceOptions struct {
	launch    uint64
	at        string
	delay     time.Duration
	fraction  float64
	placement string
	trials    int
	seed      uint64
	points    string
	ptxFile   string
	list      bool
	process   string
	device    int
}

func newRaceCmd() *cobra.Command {
	var o raceOptions
	cmd := &cobra.Command{
		Use:   "race REC --launch SEQ [--at CLASSES] [--delay 2us] [--trials N] [--list]",
		Short: "Hunt a data race in a recorded launch: replay it with delays injected, find and shrink a witness",
		Long: `race replays a snapshotted launch on its recorded inputs, first as it is (a kernel
that is nondeterministic already is reported as such), then with delays
injected before the instructions --at names, in the threads a seed picks. A
trial whose result differs is a race witness; race shrinks it, with the same
seed, to a minimal set of delay points that still changes the result, and
names those instructions with their source lines.

It needs the kernel's PTX: stored beside the module for Triton kernels
(recorded while Triton's cache was reachable), or given with --ptx FILE (for
nvcc code, build with -gencode arch=compute_90,code=compute_90 and extract
it with cuobjdump -ptx). --list shows the points without a GPU.

Exit status: 0 no witness, 1 a witness or a nondeterministic kernel, 2 bad input.`,
		Example: `  gpurr race run --launch 42 --list
  gpurr race run --launch 42 --at barrier,shared-store,global-store --trials 50
  gpurr race run --launch 42 --points 3,17 --seed 1042     # reproduce a witness`,
		Args: positional(1, 1, "one recording"),
		RunE: func(cmd *cobra.Command, args []string) error { return runRace(cmd, o, args[0]) },
	}
	f := cmd.Flags()
	f.Uint64Var(&o.launch, "launch", 0, "launch sequence number (default: the only snapshotted launch)")
	f.StringVar(&o.at, "at", "barrier,shared-load,shared-store,global-load,global-store,atomic", "where to delay: instruction classes ("+classNames()+") or op:REGEX, comma-separated")
	f.DurationVar(&o.delay, "delay", 2*time.Microsecond, "how long a chosen thread sleeps at a point (1ns to 1ms)")
	f.Float64Var(&o.fraction, "fraction", 0.25, "share of the placement's units (threads, warps, CTAs) that sleep at each point")
	f.StringVar(&o.placement, "placement", "warp", "who shares a decision: thread, warp, cta, or cluster (one CTA of each)")
	f.IntVar(&o.trials, "trials", 20, "seeded trials, each with every point delayed")
	f.Uint64Var(&o.seed, "seed", 1, "the first trial's seed (trial k uses seed+k)")
	f.StringVar(&o.points, "points", "", "with --seed: run once with delays at these points only (a witness race printed), e.g. 3,17")
	f.StringVar(&o.ptxFile, "ptx", "", "the module's PTX, where the recording has none")
	f.BoolVar(&o.list, "list", false, "list the points --at picks, with their source lines, and stop (no GPU needed)")
	f.StringVar(&o.process, "process", "", "process of a multi-process recording: its directory name, pid or rank")
	f.IntVar(&o.device, "device", -1, "GPU to run on (default: the recorded one)")
	completeValues(cmd, "placement", "thread", "warp", "cta", "cluster")
	completeValues(cmd, "at", append(classNameList(), "op:")...)
	return cmd
}

func classNameList() []string {
	var out []string
	for _, c := range instrument.Classes {
		out = append(out, string(c))
	}
	return out
}

func classNames() string { return strings.Join(classNameList(), ", ") }

func runRace(cmd *cobra.Command, o raceOptions, path string) error {
	out := cmd.OutOrStdout()
	sel, err := instrument.ParseSelection(o.at)
	if err != nil {
		return usageErrorf("race: --at: %v", err)
	}
	delay := instrument.Delay{Nanoseconds: uint32(o.delay.Nanoseconds()), Fraction: o.fraction, Placement: instrument.Placement(o.placement)}
	if o.delay > time.Millisecond || o.delay <= 0 {
		return usageErrorf("race: --delay %v: want 1ns to 1ms (nanosleep's range)", o.delay)
	}
	if err := delay.Check(); err != nil {
		return usageErrorf("race: %v", err)
	}
	if o.trials < 1 {
		return usageErrorf("race: --trials takes 1 or more")
	}
	only, err := parsePoints(o.points)
	if err != nil {
		return err
	}
	src, c, err := openCase(cmd, path, o.process, o.launch)
	if err != nil {
		return err
	}
	defer src.Close()
	text, from, err := kernelPTX("race", src, c, o.ptxFile)
	if err != nil {
		return err
	}
	m, err := ptx.Parse(text)
	if err != nil {
		return usageErrorf("race: the PTX (%s): %v", from, err)
	}
	fn := m.Function(c.Kernel.GetName())
	if fn == nil {
		return usageErrorf("race: the PTX (%s) has no kernel %s", from, c.Kernel.GetName())
	}
	points := instrument.Points(fn, sel)
	fmt.Fprintf(out, "launch %d: %s\n  PTX from %s; %s picked by --at %s\n", c.Seq, c.Name, from, info.Count(len(points), "point"), o.at)
	if o.list {
		writePoints(out, points, nil)
		return nil
	}
	if len(points) == 0 {
		return usageErrorf("race: --at %s picks no instruction of %s", o.at, c.Name)
	}
	for _, p := range only {
		if p >= len(points) {
			return usageErrorf("race: --points: no point %d (the kernel has %d; --list shows them)", p, len(points))
		}
	}
	if err := cuda.Init(); err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("race: no usable GPU: %v", err)}
	}
	replayer := &race.ReplayRunner{Case: c, PTX: text, Kernel: c.Kernel.GetName(), Selection: sel, Delay: delay,
		Options: replay.Options{Device: o.device}}
	// A delay that makes the kernel hang (a spin-wait on another CTA) is a finding too, and a
	// hung kernel cannot be stopped from this process: say what hung, then end.
	runner := &race.Guarded{Inner: replayer, Min: 10 * time.Second, Factor: 50,
		Hung: func(ps []int, seed uint64, waited time.Duration) {
			fmt.Fprintf(out, "  HANG: with seed %d, delays at %s made the kernel run past %v (its first replay's 50x): it may wait on another thread or CTA\n",
				seed, info.Count(len(ps), "point"), waited.Round(time.Millisecond))
			writePoints(out, points, ps)
			fmt.Fprintf(cmd.ErrOrStderr(), "gpurr: race: a trial hung; ending the process to stop the kernel\n")
			os.Exit(exitFound)
		}}
	if only != nil {
		return reproduceRace(out, runner, only, o.seed, points)
	}
	res, err := race.Hunt(runner, len(points), race.Options{Trials: o.trials, Seed: o.seed})
	if err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("race: %v", err)}
	}
	switch {
	case res.Nondeterministic:
		fmt.Fprintf(out, "  nondeterministic without any delay: region(s) %s differ between two replays (float atomics, or a race that needs no help)\n", joinInts(res.Varying))
		return exitWith(exitFound)
	case !res.Found:
		fmt.Fprintf(out, "  no trial of %d changed the result (seeds %d to %d, %v at %.0f%% of %ss): no witness, which does not prove there is no race\n",
			res.Trials, o.seed, o.seed+uint64(res.Trials)-1, o.delay, 100*o.fraction, o.placement)
		return nil
	}
	fmt.Fprintf(out, "  RACE: with seed %d, delays at these %s change region(s) %s of the result (%d replays in all):\n",
		res.Seed, info.Count(len(res.Points), "point"), joinInts(res.Baseline.Differing(res.Witness)), res.Runs)
	writePoints(out, points, res.Points)
	fmt.Fprintf(out, "  reproduce: gpurr race %s --launch %d --points %s --seed %d --at %s --delay %v --fraction %g --placement %s\n",
		shellQuote(path), c.Seq, joinInts(res.Points), res.Seed, shellQuote(o.at), o.delay, o.fraction, o.placement)
	return exitWith(exitFound)
}

// kernelPTX finds the PTX of the launch's module for verb: --ptx, else the recording's copy.
func kernelPTX(verb string, src *replay.Source, c *replay.Case, file string) ([]byte, string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, "", usageErrorf("%s: --ptx: %v", verb, plainError(err))
		}
		return b, file, nil
	}
	b, err := src.Proc.ModulePTX(c.ModuleHash)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", usageErrorf("%s: the recording has no PTX of %s's module (%.12s): only Triton kernels' is kept; give --ptx FILE (nvcc: build with -gencode arch=compute_90,code=compute_90, then cuobjdump -ptx)", verb, c.Name, c.ModuleHash)
	}
	if err != nil {
		return nil, "", usageErrorf("%s: %v", verb, err)
	}
	return b, "the recording (Triton's cache)", nil
}

func reproduceRace(w io.Writer, r race.Runner, only []int, seed uint64, points []instrument.Point) error {
	base, err := r.Run(nil, 0)
	if err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("race: %v", err)}
	}
	got, err := r.Run(only, seed)
	if err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("race: %v", err)}
	}
	writePoints(w, points, only)
	if got.Equal(base) {
		fmt.Fprintf(w, "  with seed %d these delays leave the result as it is\n", seed)
		return nil
	}
	fmt.Fprintf(w, "  RACE: with seed %d these delays change region(s) %s of the result\n", seed, joinInts(base.Differing(got)))
	return exitWith(exitFound)
}

// writePoints lists points (only those in which, when which is not nil) with source lines.
func writePoints(w io.Writer, points []instrument.Point, which []int) {
	for i, p := range points {
		if which != nil && !slices.Contains(which, i) {
			continue
		}
		where := fmt.Sprintf("PTX line %d", p.Instr.Line)
		if p.Instr.Pos.Line > 0 {
			where = p.Instr.Pos.String() + ", " + where
		}
		class := string(p.Class)
		if class == "" {
			class = "pattern"
		}
		fmt.Fprintf(w, "  %4d  %-28s %-13s %s\n", i, p.Instr.Name(), class, where)
	}
}

func parsePoints(list string) ([]int, error) {
	if list == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, usageErrorf("race: --points %q: want point numbers as --list shows them, e.g. 3,17", list)
		}
		out = append(out, n)
	}
	return out, nil
}

func joinInts(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ",")
}
