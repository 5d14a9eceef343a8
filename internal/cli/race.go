package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/instrument"
	"github.com/gpurr/gpurr/internal/ptx"
	"github.com/gpurr/gpurr/internal/race"
	"github.com/gpurr/gpurr/internal/replay"
	"github.com/gpurr/gpurr/internal/termsafe"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
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
	all       bool
	kernels   string
	plainRuns int
	list      bool
	process   string
	device    int
	budget    time.Duration
	format    string
	// fixed says which of --delay, --fraction and --placement were given: those the
	// escalating schedule keeps as given (with --delay, there is no escalation).
	fixed map[string]bool
}

func newRaceCmd() *cobra.Command {
	var o raceOptions
	cmd := &cobra.Command{
		Use:   "race REC --launch SEQ|--all|--kernels REGEX [--at CLASSES] [--delay 2us] [--trials N] [--budget 10s] [--list]",
		Short: "Hunt a data race in a recorded launch: replay it with delays injected, find and shrink a witness",
		Long: `race replays a snapshotted launch on its recorded inputs, first as it is,
--plain-runs times (a kernel that is nondeterministic already, such as one
summing floats with atomics, is reported as such), then with delays injected
before the instructions --at names, in the threads a seed picks. The delays
climb, step by step, from 2us to the launch's GPU time as recorded (100us
where the recording has none), with a growing share of warps, then of
threads, then of CTAs, --trials trials a step, within --budget (10s a
launch), as the first line of the hunt says; --delay fixes one delay, and
--fraction and --placement fix theirs. A trial whose
result differs is a race witness; race shrinks it, with the same seed, to a
minimal set of delay points that still changes the result, names those
instructions with their source lines, and says which bytes they change. It also says whether the plain replay
of the PTX, as gpurr parses and prints it, equals the recording (--trials 0
checks only that).

--all hunts in every snapshotted launch, --kernels REGEX in those whose kernel
matches, and prints one line per launch: no race, RACE with its points and
seed, nondeterministic, no PTX, or why it cannot run.

It needs the kernel's PTX: stored beside the module for Triton kernels
(recorded while Triton's cache was reachable), or given with --ptx FILE (for
nvcc code, build with -gencode arch=compute_90,code=compute_90 and extract
it with cuobjdump -ptx). --list shows the points without a GPU.

Exit status: 0 no witness, 1 a witness, a nondeterministic kernel or a hang,
2 bad input (no PTX, a PTX this GPU cannot run or without nanosleep, a launch
without snapshots; with --all, no launch that could be hunted), 3 no usable
GPU here.`,
		Example: `  gpurr race run --launch 42 --list
  gpurr race run --launch 42 --at barrier,shared-store,global-store --trials 50
  gpurr race run --launch 42 --points 3,17 --seed 1042     # reproduce a witness
  gpurr race run --kernels '^_attn' --placement cta        # every launch of matching kernels
  gpurr race run --launch 42 --ptx k.ptx --trials 0         # does gpurr's printed PTX replay exactly?`,
		Args: positional(1, 1, "one recording"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.fixed = map[string]bool{}
			for _, name := range []string{"delay", "fraction", "placement"} {
				o.fixed[name] = cmd.Flags().Changed(name)
			}
			return runRace(cmd, o, args[0])
		},
	}
	f := cmd.Flags()
	launchVar(f, &o.launch, "launch", "launch sequence number (default: the only snapshotted launch)")
	f.StringVar(&o.at, "at", "barrier,shared-load,shared-store,global-load,global-store,atomic", "where to delay: instruction classes ("+classNames()+") or op:REGEX, comma-separated")
	durationVar(f, &o.delay, "delay", 2*time.Microsecond, "how long a chosen thread sleeps at a point (1ns to 1ms); left out, the hunt climbs from 2us to the launch's recorded GPU time, and --points takes the default")
	f.Float64Var(&o.fraction, "fraction", 0.25, "share of the placement's units (threads, warps, CTAs) that sleep at each point; left out, the hunt grows it from 0.25 to 0.5 with the delay; --delay and --points take the default")
	f.StringVar(&o.placement, "placement", "warp", "who shares a decision: thread, warp, cta, or cluster (one CTA of each); left out, the hunt tries warp, thread and cta in turn; --delay and --points take the default")
	countVar(f, &o.trials, "trials", 20, 0, "seeded trials of each delay, each with every point delayed (0: the plain replays only)")
	durationVar(f, &o.budget, "budget", 10*time.Second, "how long the trials may take, per launch: no trial starts after it")
	f.StringVar(&o.format, "format", "text", "output format of a hunt in one launch: text or json")
	completeValues(cmd, "format", "text", "json")
	countVar(f, &o.plainRuns, "plain-runs", 3, 2, "replays without delays first, to catch a kernel that is nondeterministic already")
	f.BoolVar(&o.all, "all", false, "hunt in every snapshotted launch, one line each")
	f.StringVar(&o.kernels, "kernels", "", "hunt in every snapshotted launch whose kernel name matches this regular expression")
	f.Uint64Var(&o.seed, "seed", 1, "the first trial's seed (trial k uses seed+k)")
	f.StringVar(&o.points, "points", "", "with --seed: run once with delays at these points only (a witness race printed), e.g. 3,17")
	f.StringVar(&o.ptxFile, "ptx", "", "the module's PTX, where the recording has none")
	f.BoolVar(&o.list, "list", false, "list the points --at picks, with their source lines, and stop (no GPU needed)")
	f.StringVar(&o.process, "process", "", "process of a multi-process recording: its directory name, pid or rank")
	unsetIntVar(f, &o.device, "device", "GPU to run on (default: the recorded one)")
	completeValues(cmd, "placement", "thread", "warp", "cta", "cluster")
	completeValues(cmd, "at", append(classNameList(), "op:")...)
	return cmd
}

func runRace(cmd *cobra.Command, o raceOptions, path string) error {
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
	if o.budget <= 0 {
		return usageErrorf("race: --budget %v: want a time more than 0, such as 30s", o.budget)
	}
	if err := checkFormat("race", o.format, "text", "json"); err != nil {
		return err
	}
	only, err := parsePoints(o.points)
	if err != nil {
		return err
	}
	var kernels *regexp.Regexp
	if o.kernels != "" {
		if kernels, err = regexp.Compile(o.kernels); err != nil {
			return usageErrorf("race: --kernels %q: %v", o.kernels, err)
		}
	}
	if o.all || kernels != nil {
		switch {
		case o.launch != 0:
			return usageErrorf("race: --launch picks one launch; --all and --kernels pick many: give one or the other")
		case o.list || only != nil:
			return usageErrorf("race: --list and --points work on one launch: give --launch SEQ instead of --all/--kernels")
		case o.format == "json":
			return usageErrorf("race: --format json reports a hunt in one launch: give --launch SEQ instead of --all/--kernels")
		}
		return runRaceMany(cmd, o, sel, delay, kernels, path)
	}
	src, c, err := openCase(cmd, path, o.process, o.launch)
	if err != nil {
		return err
	}
	defer src.Close()
	t, err := prepareRace(src, c, o, sel)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	var rep *raceReport // --format json's, written at the end instead of the text
	if o.format == "json" {
		if o.list || only != nil {
			return usageErrorf("race: --format json reports a hunt: --list and --points print text")
		}
		rep, out = t.report(o), io.Discard
		defer func() {
			if rep.Outcome != "" {
				writeJSON(cmd.OutOrStdout(), rep)
			}
		}()
	}
	termsafe.Fprintf(out, "launch %d: %s\n  PTX from %s; %s picked by --at %s\n", c.Seq, c.Name, t.from, info.Count(len(t.points), "point"), o.at)
	if o.list {
		writePoints(out, t.points, nil)
		return nil
	}
	for _, p := range only {
		if p >= len(t.points) {
			return usageErrorf("race: --points: no point %d (the kernel has %d; --list shows them)", p, len(t.points))
		}
	}
	if only == nil && o.trials > 0 {
		termsafe.Fprintf(out, "  %s\n", t.plan.text(o))
	}
	if err := cuda.Init(); err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("race: no usable GPU: %v", err)}
	}
	replayer, runner := t.runners(cmd, o, sel, delay, out, rep)
	defer replayer.Close()
	if only != nil {
		return reproduceRace(out, runner, only, o.seed, t.points)
	}
	var rate huntRate
	res, err := race.Hunt(runner, len(t.points), t.options(o, replayer, rate.note))
	if err != nil {
		return huntError(err)
	}
	rate.end = time.Now()
	writeRecordingMatch(out, replayer)
	rep.add(res, replayer)
	switch {
	case res.Nondeterministic:
		termsafe.Fprintf(out, "  nondeterministic without any delay: region(s) %s differ between two of %d plain replays (float atomics, or a race that needs no help)\n",
			joinInts(res.Varying), replayer.PlainRuns)
		for _, v := range replayer.Varying {
			termsafe.Fprintf(out, "    %s\n", spreadText(v, "between plain replays"))
		}
		return exitWith(exitFound)
	case res.Trials == 0:
		termsafe.Fprintf(out, "  plain replays agree; no trial run (--trials 0)\n")
		return nil
	case !res.Found:
		termsafe.Fprintf(out, "  no trial of %d changed the result (seeds %d to %d, %s): no witness, which does not prove there is no race\n",
			res.Trials, o.seed, o.seed+uint64(res.Trials)-1, delaysText(res.Steps))
		writeSteps(out, res, o.budget)
		rate.write(out, res.Runs)
		return nil
	}
	witness := res.Steps[len(res.Steps)-1].Delay
	termsafe.Fprintf(out, "  RACE: with seed %d and %s, delays at these %s change region(s) %s of the result (%d replays in all):\n",
		res.Seed, race.Step{Delay: witness}, info.Count(len(res.Points), "point"), joinInts(res.Baseline.Differing(res.Witness)), res.Runs)
	writePoints(out, t.points, res.Points)
	changed := writeWitnessBytes(out, runner, replayer, res)
	sides := writeSides(out, t, replayer, res)
	reproduce := fmt.Sprintf("gpurr race %s --launch %d --points %s --seed %d --at %s %s",
		shellQuote(path), c.Seq, joinInts(res.Points), res.Seed, shellQuote(o.at), delayFlags(witness))
	termsafe.Fprintf(out, "  reproduce: %s\n", reproduce)
	rep.addWitness(t.points, res, changed, reproduce, sides)
	writeSteps(out, res, o.budget)
	rate.write(out, res.Runs)
	return exitWith(exitFound)
}

// raceReport is race's --format json: the launch, the hunt's plan, the trials each step ran,
// and what they found.
type raceReport struct {
	Launch    uint64 `json:"launch"`
	Kernel    string `json:"kernel"`
	PTX       string `json:"ptx"` // where the PTX came from
	Points    int    `json:"points"`
	GPUTimeNs int64  `json:"gpu_time_ns"` // the launch's, as recorded; 0 where the recording has none
	// LongestNs is the longest delay the schedule climbs to; 0 when --delay fixes the delay.
	LongestNs int64 `json:"longest_delay_ns"`
	BudgetNs  int64 `json:"budget_ns"`
	// Outcome is no_witness, race, nondeterministic, plain_only (--trials 0) or hang.
	Outcome string `json:"outcome"`
	// Steps are the planned steps, in order, each with the trials it ran.
	Steps       []raceStep    `json:"steps"`
	Trials      int           `json:"trials"`
	OutOfBudget bool          `json:"out_of_budget"`
	Runs        int           `json:"runs"` // replays in all: plain, trials and the reduction
	Unlike      []int         `json:"regions_unlike_recording"`
	Varying     []race.Spread `json:"varying,omitempty"` // nondeterministic: where plain replays differ
	Witness     *raceWitness  `json:"witness,omitempty"`
	Hang        *raceHang     `json:"hang,omitempty"`
}

type raceStep struct {
	DelayNs   uint32  `json:"delay_ns"`
	Fraction  float64 `json:"fraction"`
	Placement string  `json:"placement"`
	Planned   int     `json:"planned"`
	Ran       int     `json:"ran"`
}

type racePoint struct {
	Index       int    `json:"index"`
	Instruction string `json:"instruction"`
	Class       string `json:"class"`
	Source      string `json:"source,omitempty"` // file:line:column, where the PTX has .loc lines
	PTXLine     int    `json:"ptx_line"`
}

type raceWitness struct {
	Seed      uint64        `json:"seed"`
	Step      raceStep      `json:"step"` // the delay it was found with
	Points    []racePoint   `json:"points"`
	Regions   []int         `json:"regions"` // the regions it changes
	Changed   []race.Spread `json:"changed"` // their bytes, as a run again left them
	Reproduce string        `json:"reproduce"`
	// OtherSide is what the access log of the witness shows: the accesses that race with
	// the delayed ones.
	OtherSide *raceSides `json:"other_side,omitempty"`
}

type raceHang struct {
	Seed     uint64      `json:"seed"`
	Step     raceStep    `json:"step"`
	Points   []racePoint `json:"points"`
	WaitedNs int64       `json:"waited_ns"`
}

// report is the start of t's --format json: the launch and the plan.
func (t *raceTarget) report(o raceOptions) *raceReport {
	r := &raceReport{Launch: t.c.Seq, Kernel: t.c.Name, PTX: t.from, Points: len(t.points), GPUTimeNs: t.plan.gpuTime.Nanoseconds(),
		LongestNs: t.plan.longest.Nanoseconds(), BudgetNs: o.budget.Nanoseconds(), Steps: []raceStep{}}
	for _, s := range t.plan.steps {
		r.Steps = append(r.Steps, stepReport(race.StepRun{Step: s}))
	}
	return r
}

func stepReport(s race.StepRun) raceStep {
	return raceStep{DelayNs: s.Delay.Nanoseconds, Fraction: s.Delay.Fraction, Placement: string(s.Delay.Placement), Planned: s.Trials, Ran: s.Ran}
}

func pointReports(points []instrument.Point, which []int) []racePoint {
	out := []racePoint{}
	for _, i := range which {
		p := points[i]
		rp := racePoint{Index: i, Instruction: p.Instr.Name(), Class: string(p.Class), PTXLine: p.Instr.Line}
		if p.Instr.Pos.Line > 0 {
			rp.Source = p.Instr.Pos.String()
		}
		out = append(out, rp)
	}
	return out
}

// add puts a hunt's result into r (nil: text): the trials each step ran, and the outcome
// short of a witness's details.
func (r *raceReport) add(res *race.Result, replayer *race.ReplayRunner) {
	if r == nil {
		return
	}
	for i, s := range res.Steps { // the steps begun are the first of those planned
		r.Steps[i].Ran = s.Ran
	}
	r.Trials, r.OutOfBudget, r.Runs, r.Unlike = res.Trials, res.OutOfBudget, res.Runs, append([]int{}, replayer.Unlike...)
	switch {
	case res.Nondeterministic:
		r.Outcome, r.Varying = "nondeterministic", replayer.Varying
	case res.Trials == 0:
		r.Outcome = "plain_only"
	case res.Found:
		r.Outcome = "race"
	default:
		r.Outcome = "no_witness"
	}
}

// addWitness puts the witness of res into r (nil: text).
func (r *raceReport) addWitness(points []instrument.Point, res *race.Result, changed []race.Spread, reproduce string, sides *raceSides) {
	if r == nil {
		return
	}
	r.Witness = &raceWitness{Seed: res.Seed, Step: stepReport(res.Steps[len(res.Steps)-1]), Points: pointReports(points, res.Points),
		Regions: res.Baseline.Differing(res.Witness), Changed: changed, Reproduce: reproduce, OtherSide: sides}
	if r.Witness.Changed == nil {
		r.Witness.Changed = []race.Spread{}
	}
}

// writeJSON writes v indented, as the verbs' --format json do.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// delayFlags are the flags that give a hunt delay d.
func delayFlags(d instrument.Delay) string {
	return fmt.Sprintf("--delay %v --fraction %g --placement %s", time.Duration(d.Nanoseconds), d.Fraction, d.Placement)
}

// delaysText says in a few words which delays a hunt's steps had: the one step's, or the range.
func delaysText(steps []race.StepRun) string {
	switch len(steps) {
	case 0:
		return "no delay"
	case 1:
		return steps[0].String()
	}
	lo, hi := steps[0].Delay.Nanoseconds, steps[0].Delay.Nanoseconds
	for _, s := range steps {
		lo, hi = min(lo, s.Delay.Nanoseconds), max(hi, s.Delay.Nanoseconds)
	}
	return fmt.Sprintf("delays from %v to %v in %d steps", time.Duration(lo), time.Duration(hi), len(steps))
}

// writeSteps says, for an escalating hunt, how many trials each step ran, a line per
// placement, and whether the budget ran out.
func writeSteps(w io.Writer, res *race.Result, budget time.Duration) {
	if len(res.Steps) > 1 {
		var line []string
		for i, s := range res.Steps {
			line = append(line, fmt.Sprintf("%d at %v (%.0f%%)", s.Ran, time.Duration(s.Delay.Nanoseconds), 100*s.Delay.Fraction))
			if i == len(res.Steps)-1 || res.Steps[i+1].Delay.Placement != s.Delay.Placement {
				termsafe.Fprintf(w, "  trials with %ss: %s\n", s.Delay.Placement, strings.Join(line, ", "))
				line = nil
			}
		}
	}
	if res.OutOfBudget {
		termsafe.Fprintf(w, "  the budget of %v ran out after %s: --budget gives more\n", budget, info.Count(res.Trials, "trial"))
	}
}

// huntRate times a hunt's replays apart from its first, which also maps the regions, copies
// the inputs and JITs the plain kernel: the rate after it is what each further trial costs.
type huntRate struct{ start, second, end time.Time }

// note is the hunt's Progress: it is called before each run.
func (h *huntRate) note(done, _ int) {
	switch done {
	case 1:
		h.start = time.Now()
	case 2:
		h.second = time.Now()
	}
}

func (h *huntRate) write(w io.Writer, runs int) {
	if runs < 2 {
		return
	}
	rest := h.end.Sub(h.second)
	termsafe.Fprintf(w, "  %d replays in %v, the first (with the session's setup) %v: %.1f per second after it\n",
		runs, h.end.Sub(h.start).Round(time.Millisecond), h.second.Sub(h.start).Round(time.Millisecond), float64(runs-1)/rest.Seconds())
}

// writeWitnessBytes runs the witness once more and says which bytes its delays changed. The
// run may come out as the plain one (a delay's effect is a matter of timing): then it says so.
func writeWitnessBytes(w io.Writer, runner race.Runner, replayer *race.ReplayRunner, res *race.Result) []race.Spread {
	if _, err := runner.Run(res.Points, res.Seed); err != nil {
		termsafe.Fprintf(w, "  (the witness's bytes: running it again failed: %v)\n", err)
		return nil
	}
	spreads, err := replayer.Spreads()
	switch {
	case err != nil:
		termsafe.Fprintf(w, "  (the witness's bytes: %v)\n", err)
	case len(spreads) == 0:
		termsafe.Fprintf(w, "  (run again, the witness left the result as the plain replay did)\n")
	}
	for _, v := range spreads {
		termsafe.Fprintf(w, "    %s\n", spreadText(v, "from the plain replay"))
	}
	return spreads
}

// raceTarget is one launch ready to hunt: its kernel's PTX, parsed, and the points --at picks.
type raceTarget struct {
	c      *replay.Case
	text   []byte
	from   string // where the PTX came from, for messages
	points []instrument.Point
	plan   huntPlan
}

// prepareRace finds and checks the PTX of c's kernel and picks its points; every error is one
// line with exit 2 (the launch cannot be hunted), and needs no GPU.
func prepareRace(src *replay.Source, c *replay.Case, o raceOptions, sel instrument.Selection) (*raceTarget, error) {
	text, from, err := kernelPTX("race", src, c, o.ptxFile)
	if err != nil {
		return nil, err
	}
	m, err := ptx.Parse(text)
	if err != nil {
		return nil, usageErrorf("race: the PTX (%s): %v", from, err)
	}
	fn := m.Function(c.Kernel.GetName())
	if fn == nil {
		return nil, usageErrorf("race: the PTX (%s) has no kernel %s", from, c.Kernel.GetName())
	}
	if err := instrument.CheckTarget(m, instrument.Placement(o.placement)); err != nil {
		return nil, usageErrorf("race: the PTX (%s): %v", from, err)
	}
	t := &raceTarget{c: c, text: text, from: from, points: instrument.Points(fn, sel)}
	if len(t.points) == 0 && !o.list {
		return nil, usageErrorf("race: --at %s picks no instruction of %s", o.at, c.Name)
	}
	t.plan = planHunt(src, c, o, len(t.points))
	return t, nil
}

const (
	// replayOverhead is what a trial costs besides the kernel and restoring its regions:
	// 8,684 trials a second on a small kernel on an H100 (bench/README.md) is 115 µs a trial.
	replayOverhead = 100 * time.Microsecond
	// restoreRate is how fast a trial restores the regions from their copies on the GPU,
	// in bytes a second: a device copy reads and writes each byte.
	restoreRate = 1.5e12
)

// huntPlan is the steps of a hunt in one launch: the one --delay fixes, or those
// race.Schedule climbs up to the launch's recorded GPU time.
type huntPlan struct {
	steps   []race.Step
	gpuTime time.Duration // the launch's recorded GPU time, 0 where the recording has none
	longest time.Duration // the longest delay, 0 with --delay
}

func planHunt(src *replay.Source, c *replay.Case, o raceOptions, points int) huntPlan {
	if o.fixed["delay"] {
		d := instrument.Delay{Nanoseconds: uint32(o.delay.Nanoseconds()), Fraction: o.fraction, Placement: instrument.Placement(o.placement)}
		return huntPlan{steps: []race.Step{{Delay: d, Trials: o.trials}}}
	}
	p := race.Plan{Kernel: launchGPUTime(src, c), Budget: o.budget, Overhead: replayOverhead, Points: points, Trials: o.trials}
	for _, r := range c.Regions {
		p.Overhead += time.Duration(float64(r.Size) / restoreRate * float64(time.Second))
	}
	if o.fixed["placement"] {
		p.Placement = instrument.Placement(o.placement)
	}
	if o.fixed["fraction"] {
		p.Fraction = o.fraction
	}
	return huntPlan{steps: race.Schedule(p), gpuTime: p.Kernel, longest: p.Longest()}
}

// launchGPUTime is how long launch c ran on the GPU, as the recording timed it; 0 where it
// has no timing of it (recorded with GPU timing off, or the record lost).
func launchGPUTime(src *replay.Source, c *replay.Case) time.Duration {
	var d time.Duration
	_ = src.Data.JoinKernels(src.Links, func(a *pb.KernelActivity, l *pb.Launch, replay *pb.GraphLaunch) error {
		if l == c.Launch && replay == nil && a.GetEndNs() > a.GetStartNs() {
			d = max(d, time.Duration(a.GetEndNs()-a.GetStartNs()))
		}
		return nil
	})
	return d
}

// text is the line that says the plan, before the hunt.
func (h huntPlan) text(o raceOptions) string {
	trials := race.Planned(h.steps)
	if h.longest == 0 {
		return fmt.Sprintf("hunting with %v (--delay), budget %v: %s", h.steps[0], o.budget, info.Count(trials, "trial"))
	}
	why := fmt.Sprintf("the launch ran %v on the GPU", h.gpuTime)
	if h.gpuTime == 0 {
		why = fmt.Sprintf("the recording has no GPU time of this launch, so up to %v; --delay sets one", race.UntimedLongest)
	}
	var places []string
	for _, s := range h.steps {
		if p := string(s.Delay.Placement); !slices.Contains(places, p) {
			places = append(places, p)
		}
	}
	return fmt.Sprintf("hunting up to %v delays (%s), budget %v: %s (%s), %s at most",
		h.longest, why, o.budget, info.Count(len(h.steps), "step"), strings.Join(places, ", "), info.Count(trials, "trial"))
}

// options are the hunt's: its steps, each set on replayer before its trials, and its budget.
func (t *raceTarget) options(o raceOptions, replayer *race.ReplayRunner, progress func(done, total int)) race.Options {
	return race.Options{Baselines: o.plainRuns, Steps: t.plan.steps, Budget: o.budget, Seed: o.seed, Progress: progress,
		SetStep: func(s race.Step) error { replayer.Delay = s.Delay; return nil }}
}

// runners builds the replay runner of t and the hang guard around it. A delay that makes the
// kernel hang (a spin-wait on another CTA) is a finding too, and a hung kernel cannot be
// stopped from this process: the guard says what hung, then ends the process.
func (t *raceTarget) runners(cmd *cobra.Command, o raceOptions, sel instrument.Selection, delay instrument.Delay, out io.Writer, rep *raceReport) (*race.ReplayRunner, race.Runner) {
	replayer := &race.ReplayRunner{Case: t.c, PTX: t.text, Kernel: t.c.Kernel.GetName(), Selection: sel, Delay: delay,
		Options: replay.Options{Device: o.device}}
	guard := &race.Guarded{Inner: replayer, Min: 10 * time.Second, Factor: 50,
		Hung: func(ps []int, seed uint64, waited time.Duration) {
			termsafe.Fprintf(out, "  HANG: launch %d (%s): with seed %d and %s, delays at %s made the kernel run past %v (its first replay's 50x): it may wait on another thread or CTA (a shorter --delay tells a slow kernel from one that waits)\n",
				t.c.Seq, t.c.Name, seed, race.Step{Delay: replayer.Delay}, info.Count(len(ps), "point"), waited.Round(time.Millisecond))
			writePoints(out, t.points, ps)
			if rep != nil {
				rep.Outcome, rep.Hang = "hang", &raceHang{Seed: seed, Step: stepReport(race.StepRun{Step: race.Step{Delay: replayer.Delay}}),
					Points: pointReports(t.points, ps), WaitedNs: waited.Nanoseconds()}
				writeJSON(cmd.OutOrStdout(), rep)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "gpurr: race: a trial hung; ending the process to stop the kernel\n")
			os.Exit(exitFound)
		}}
	return replayer, guard
}

// huntError gives a hunt's error its exit status: a launch whose kernel cannot be loaded or
// whose regions cannot be recreated cannot be hunted (2); a failure later is gpurr's (3).
func huntError(err error) error {
	if errors.Is(err, race.ErrCannotRun) {
		return usageErrorf("race: %v", err)
	}
	return &exitError{code: exitFailure, err: fmt.Errorf("race: %v", err)}
}

// writeRecordingMatch says whether the plain replays of gpurr's printed PTX reproduce the
// recorded result: when they do, the parse, print and JIT changed nothing the kernel computes.
func writeRecordingMatch(w io.Writer, r *race.ReplayRunner) {
	if r.PlainRuns == 0 {
		return
	}
	if len(r.Unlike) == 0 {
		termsafe.Fprintf(w, "  plain replay of the PTX as gpurr prints it: identical to the recording\n")
		return
	}
	termsafe.Fprintf(w, "  plain replay of the PTX as gpurr prints it: region(s) %s differ from the recording (trials compare with the plain replay, not the recording)\n",
		joinInts(r.Unlike))
}

// runRaceMany hunts in every snapshotted launch (--all) or those whose kernel matches
// --kernels, one line each. A launch that cannot be hunted (no PTX, a PTX that does not load)
// gets a line saying why; exit 1 when any line is a finding, 2 when no launch could be hunted.
func runRaceMany(cmd *cobra.Command, o raceOptions, sel instrument.Selection, delay instrument.Delay, kernels *regexp.Regexp, path string) error {
	out := cmd.OutOrStdout()
	src, err := openReplaySource(cmd, path, o.process)
	if err != nil {
		return err
	}
	defer src.Close()
	var seqs []uint64
	for _, seq := range src.Replayable() {
		if kernels == nil || kernels.MatchString(launchKernelName(src, seq)) {
			seqs = append(seqs, seq)
		}
	}
	if len(seqs) == 0 {
		what := "launch with snapshots before and after it" + modeHint(src)
		if kernels != nil {
			what = fmt.Sprintf("snapshotted launch whose kernel matches --kernels %q", o.kernels)
		}
		return usageErrorf("race: %s has no %s", src.Proc.Name, what)
	}
	progress := raceProgress(cmd, len(seqs))
	hunted, found, gpuReady := 0, false, false
	for i, seq := range seqs {
		progress(i, seq)
		verdict, ran, finding, err := raceOne(cmd, o, sel, delay, src, seq, &gpuReady)
		if err != nil {
			return err
		}
		if ran {
			hunted++
		}
		found = found || finding
		termsafe.Fprintf(out, "launch %d  %s: %s\n", seq, launchKernelName(src, seq), verdict)
	}
	progress(len(seqs), 0)
	termsafe.Fprintf(out, "%s hunted of %d (%s, budget %v each, --at %s)\n",
		info.Count(hunted, "launch"), len(seqs), manyPlanText(o), o.budget, o.at)
	switch {
	case found:
		return exitWith(exitFound)
	case hunted == 0:
		return usageErrorf("race: none of the %s could be hunted (each line says why)", info.Count(len(seqs), "launch"))
	}
	return nil
}

// raceOne hunts in one launch of --all/--kernels and says its verdict in a few words: ran is
// false when the launch could not be hunted (the verdict says why), finding when it holds a
// race or a nondeterministic kernel. An error is one
// that ends the whole run (no GPU).
func raceOne(cmd *cobra.Command, o raceOptions, sel instrument.Selection, delay instrument.Delay, src *replay.Source, seq uint64, gpuReady *bool) (verdict string, ran, finding bool, err error) {
	c, err := src.Case(seq)
	if err != nil {
		return "cannot run: " + err.Error(), false, false, nil
	}
	t, err := prepareRace(src, c, o, sel)
	if err != nil {
		if np := (*replay.NoPTXError)(nil); errors.As(err, &np) {
			return "no PTX (give --ptx FILE; Triton's is kept when recorded)", false, false, nil
		}
		return "cannot run: " + strings.TrimPrefix(err.Error(), "race: "), false, false, nil
	}
	if !*gpuReady {
		if err := cuda.Init(); err != nil {
			return "", false, false, &exitError{code: exitFailure, err: fmt.Errorf("race: no usable GPU: %v", err)}
		}
		*gpuReady = true
	}
	replayer, runner := t.runners(cmd, o, sel, delay, cmd.OutOrStdout(), nil)
	defer replayer.Close()
	res, err := race.Hunt(runner, len(t.points), t.options(o, replayer, nil))
	switch {
	case errors.Is(err, race.ErrCannotRun):
		return err.Error(), false, false, nil
	case err != nil:
		return "", false, false, huntError(fmt.Errorf("launch %d: %w", seq, err))
	case res.Nondeterministic:
		var where []string
		for _, v := range replayer.Varying {
			where = append(where, spreadText(v, "between plain replays"))
		}
		return fmt.Sprintf("nondeterministic without any delay: %s", strings.Join(where, "; ")), true, true, nil
	case res.Found:
		var where []string
		for _, p := range res.Points {
			where = append(where, pointText(t.points[p]))
		}
		witness := res.Steps[len(res.Steps)-1].Delay
		return fmt.Sprintf("RACE at %s (seed %d, %s; reproduce with --launch %d --points %s --seed %d %s): %s",
			info.Count(len(res.Points), "point"), res.Seed, race.Step{Delay: witness}, seq, joinInts(res.Points), res.Seed, delayFlags(witness),
			strings.Join(where, "; ")), true, true, nil
	}
	verdict = fmt.Sprintf("no race in %s at %s (%s)", info.Count(res.Trials, "trial"), info.Count(len(t.points), "point"), delaysText(res.Steps))
	if res.OutOfBudget {
		verdict += fmt.Sprintf("; the budget of %v ran out", o.budget)
	}
	return verdict, true, false, nil
}

// manyPlanText says the delays of --all and --kernels in a few words.
func manyPlanText(o raceOptions) string {
	if o.fixed["delay"] {
		return fmt.Sprintf("%d trials each, %v at %.0f%% of %ss", o.trials, o.delay, 100*o.fraction, o.placement)
	}
	return fmt.Sprintf("up to %d trials a delay, delays up to each launch's GPU time", o.trials)
}

// launchKernelName is the demangled name of launch seq's kernel, "" when the recording lacks it.
func launchKernelName(src *replay.Source, seq uint64) string {
	l := src.Links.Launch(seq)
	if l == nil {
		return ""
	}
	k := src.Links.Kernel(l.KernelId)
	if k == nil {
		return ""
	}
	return src.Links.KernelName(k)
}

// raceProgress shows, on a terminal, which launch of how many --all is at: a hunt takes
// seconds per launch. It returns a function to call before each launch and once at the end.
func raceProgress(cmd *cobra.Command, total int) func(done int, seq uint64) {
	if total < 2 || !term.IsTerminal(int(os.Stderr.Fd())) {
		return func(int, uint64) {}
	}
	bar := progressbar.NewOptions(total, progressbar.OptionSetWriter(cmd.ErrOrStderr()), progressbar.OptionShowCount(),
		progressbar.OptionClearOnFinish())
	return func(done int, seq uint64) {
		bar.Describe(fmt.Sprintf("race: launch %d", seq))
		bar.Set(done)
	}
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
		termsafe.Fprintf(w, "  with seed %d these delays leave the result as it is\n", seed)
		return nil
	}
	termsafe.Fprintf(w, "  RACE: with seed %d these delays change region(s) %s of the result\n", seed, joinInts(base.Differing(got)))
	return exitWith(exitFound)
}

// writePoints lists points (only those in which, when which is not nil) with source lines.
func writePoints(w io.Writer, points []instrument.Point, which []int) {
	for i, p := range points {
		if which != nil && !slices.Contains(which, i) {
			continue
		}
		class := string(p.Class)
		if class == "" {
			class = "pattern"
		}
		termsafe.Fprintf(w, "  %4d  %-28s %-13s %s\n", i, p.Instr.Name(), class, pointWhere(p))
	}
}

// spreadText says which bytes of a region two runs left different; how names the two.
func spreadText(v race.Spread, how string) string {
	return fmt.Sprintf("region %d: %s of %d differ %s, the first at byte %d", v.Region, info.Count(int(v.Bytes), "byte"), v.Size, how, v.First)
}

// pointWhere is a point's source line, when the PTX has .loc lines, and its PTX line.
func pointWhere(p instrument.Point) string {
	where := fmt.Sprintf("PTX line %d", p.Instr.Line)
	if p.Instr.Pos.Line > 0 {
		where = p.Instr.Pos.String() + ", " + where
	}
	return where
}

// pointText is a point in a few words: its instruction and where it is.
func pointText(p instrument.Point) string { return p.Instr.Name() + " " + pointWhere(p) }

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

// raceSides is race --format json's other side of a witness: the access log's conflicts.
type raceSides struct {
	Noted     int            `json:"noted"`     // accesses the log noted
	Kept      int            `json:"kept"`      // of them, those it held (the rest overflowed it)
	Watched   [2]uint64      `json:"watched"`   // the global bytes watched, [from, to)
	Conflicts []raceConflict `json:"conflicts"` // most pairs first
	Error     string         `json:"error,omitempty"`
}

type raceConflict struct {
	Store       raceAccess `json:"store"`
	Other       raceAccess `json:"other"`
	Space       string     `json:"space"` // "shared" or "global"
	Pairs       int        `json:"pairs"`
	Address     uint64     `json:"address"` // of an example pair, and its threads
	StoreCTA    uint32     `json:"store_cta"`
	StoreThread uint32     `json:"store_thread"`
	OtherCTA    uint32     `json:"other_cta"`
	OtherThread uint32     `json:"other_thread"`
}

// raceAccess is one instruction of a conflict.
type raceAccess struct {
	Instruction string `json:"instruction"`
	Source      string `json:"source,omitempty"` // file:line:column, where the PTX has .loc lines
	PTXLine     int    `json:"ptx_line"`
	Delayed     bool   `json:"delayed"` // one of the witness's points
}

// maxConflictLines is how many conflicts the text report lists.
const maxConflictLines = 5

// writeSides replays the witness with the access log and says which accesses race on the
// bytes it changed: the delayed side and the other.
func writeSides(w io.Writer, t *raceTarget, replayer *race.ReplayRunner, res *race.Result) *raceSides {
	s, err := replayer.Sides(res.Points, res.Seed)
	if err != nil {
		termsafe.Fprintf(w, "  (the other side: the access log's replay failed: %v)\n", err)
		return &raceSides{Conflicts: []raceConflict{}, Error: err.Error()}
	}
	return reportSides(w, t, res, s)
}

// reportSides says what the access log s of the witness res shows, and returns it for JSON.
func reportSides(w io.Writer, t *raceTarget, res *race.Result, s *race.Sides) *raceSides {
	out := &raceSides{Conflicts: []raceConflict{}}
	out.Noted, out.Kept, out.Watched = s.Noted, s.Kept, s.Watched
	instrs := kernelInstructions(t)
	delayed := map[int]bool{}
	for _, p := range res.Points {
		delayed[t.points[p].Index] = true
	}
	access := func(i int) raceAccess {
		a := raceAccess{Instruction: fmt.Sprintf("instruction %d", i), Delayed: delayed[i]}
		if i >= 0 && i < len(instrs) {
			in := instrs[i]
			a.Instruction, a.PTXLine = in.Name(), in.Line
			if in.Pos.Line > 0 {
				a.Source = in.Pos.String()
			}
		}
		return a
	}
	// The pairs with a delayed side first: the race the witness found.
	conflicts := slices.Clone(s.Conflicts)
	slices.SortStableFunc(conflicts, func(a, b race.Conflict) int {
		da, db := delayed[a.Store] || delayed[a.Other], delayed[b.Store] || delayed[b.Other]
		switch {
		case da && !db:
			return -1
		case db && !da:
			return 1
		}
		return 0
	})
	for _, c := range conflicts {
		space := "global"
		if c.Shared {
			space = "shared"
		}
		out.Conflicts = append(out.Conflicts, raceConflict{Store: access(c.Store), Other: access(c.Other), Space: space, Pairs: c.Pairs,
			Address: c.Addr, StoreCTA: c.StoreCTA, StoreThread: c.StoreThread, OtherCTA: c.OtherCTA, OtherThread: c.OtherThread})
	}
	overflow := ""
	if s.Noted > s.Kept {
		overflow = fmt.Sprintf("; the log held %d, the rest overflowed it", s.Kept)
	}
	if len(out.Conflicts) == 0 {
		termsafe.Fprintf(w, "  the other side: the access log (%d accesses noted%s) pairs no unordered store with another thread's access (a race through atomics or fences, or accesses of one address that start at different bytes)\n",
			s.Noted, overflow)
		return out
	}
	termsafe.Fprintf(w, "  the accesses that race (access log of the witness: %d noted%s; * delayed):\n", s.Noted, overflow)
	for i, c := range out.Conflicts {
		if i == maxConflictLines {
			termsafe.Fprintf(w, "    ... %d more (--format json lists them)\n", len(out.Conflicts)-i)
			break
		}
		termsafe.Fprintf(w, "    %s  vs  %s  %s memory, %d pairs, e.g. at 0x%x: CTA %d thread %d, CTA %d thread %d\n",
			accessText(c.Store), accessText(c.Other), c.Space, c.Pairs, c.Address, c.StoreCTA, c.StoreThread, c.OtherCTA, c.OtherThread)
	}
	return out
}

func accessText(a raceAccess) string {
	s := a.Instruction
	if a.Delayed {
		s += "*"
	}
	if a.Source != "" {
		return fmt.Sprintf("%s (%s, PTX line %d)", s, a.Source, a.PTXLine)
	}
	return fmt.Sprintf("%s (PTX line %d)", s, a.PTXLine)
}

// kernelInstructions is the kernel's instructions, as instrument numbers them.
func kernelInstructions(t *raceTarget) []*ptx.Instruction {
	m, err := ptx.Parse(t.text)
	if err != nil {
		return nil
	}
	fn := m.Function(t.c.Kernel.GetName())
	if fn == nil {
		return nil
	}
	return fn.Instructions()
}
