// Package bisect finds where two runs of a program part ways, or where a run first holds NaN
// or Inf, from the GPU's side, for about the cost of running the program four times (twice
// for --nan): two runs with step digests (gpurr record --memory digest) find the first
// training step whose state differs, and two reruns that hash every launch of that step alone
// (--memory hash --hash-steps) find the launch, which gpurr diff's report names with its
// line, its rank and why it differs. When the reruns part ways earlier than the step the
// digests named (nondeterminism strikes where it will), the narrowing moves there.
//
// The runs are made by a Recorder (gpurr record, in the CLI); what their recordings say is
// read by a Narrower (gpurr diff's and gpurr nan's reports): the package decides what to run
// and what it means, and is tested with recordings written without a GPU.
package bisect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/recording"
)

// Run is one recording bisect made (or was given).
type Run struct {
	Name    string   `json:"name"`    // digest-a, narrow-b1, ...
	Dir     string   `json:"dir"`     // its recording
	Purpose string   `json:"purpose"` // what it is for, in words
	Command []string `json:"command"`
	Flags   []string `json:"flags"` // gpurr record's
	Seconds float64  `json:"seconds"`
	Exit    int      `json:"exit"` // the program's exit status (128+N: signal N)
	Given   bool     `json:"given,omitempty"`
}

// Recorder records one run: gpurr record -o r.Dir r.Flags -- r.Command, filling in r.Seconds
// and r.Exit. An error is a run that could not be made (not a program that failed).
type Recorder func(ctx context.Context, r *Run) error

// Narrower reads what bisect's last runs found.
type Narrower interface {
	// Diff compares two recordings as gpurr diff does; parted says whether a launch differs.
	Diff(a, b string) (report Report, parted bool, err error)
	// NaN finds the first NaN or Inf of a recording as gpurr nan does.
	NaN(dir string) (report Report, found bool, err error)
	// Pair pairs the processes of two recordings as gpurr diff does, with its warnings.
	Pair(a, b *recording.Set) (pairs [][2]*recording.Process, warnings []string)
}

// Report is a verb's report, written as text and as JSON by its owner.
type Report interface{}

// Options is what to bisect.
type Options struct {
	Out string // the folder every run's recording goes into (it exists)
	// Commands are the commands of side A and side B: the same when bisect runs one command,
	// each recording's own when it starts from two recordings (Given).
	Commands [2][]string
	Given    [2]string // two digest recordings to start from; "" to make them
	Flags    []string  // gpurr record flags for every run (--step-every, --step-range, --callstack, ...)
	NaN      bool      // find the first NaN or Inf instead
	// DigestEvery is --digest-every of the digest runs: a divergence is then placed within
	// that many steps, all of which the reruns hash.
	DigestEvery uint32
	Rounds      int // narrowings at most (3 when 0)
	Record      Recorder
	Narrow      Narrower
	Progress    func(line string) // a line per step of the work, for the user
}

// Result is what bisect did and found.
type Result struct {
	Runs []*Run `json:"runs"`
	// Digests: what the digest runs' (or the reruns') digests said.
	Digests *DigestFinding `json:"digests,omitempty"`
	// Window is the steps the last reruns hashed, inclusive; nil when none was made.
	Window *[2]uint32 `json:"window,omitempty"`
	Notes  []string   `json:"notes"` // what changed the plan: reruns that parted earlier, ...
	Report Report     `json:"report,omitempty"`
	// Outcome: agree (the runs agree at every digest), part-ways, nan (a NaN or Inf found),
	// finite (none found), not-reproduced (the reruns agreed).
	Outcome string `json:"outcome"`
}

// DigestFinding is the first step whose digests differ (or hold NaN), over every pair of processes.
type DigestFinding struct {
	Steps    int          `json:"steps_compared"` // steps digested on both sides (one side with --nan), most of any pair
	Step     *uint32      `json:"step,omitempty"` // the first step that differs; nil when none does
	Agreed   int          `json:"last_agreed"`    // the last step before it whose digests agreed, -1 none
	Pairs    []PairDigest `json:"pairs"`
	Warnings []string     `json:"warnings,omitempty"`
}

// PairDigest is one pair of processes' digests.
type PairDigest struct {
	A       string                 `json:"a"`
	B       string                 `json:"b,omitempty"`
	Rank    *int32                 `json:"rank,omitempty"`
	Compare *diff.DigestComparison `json:"compare,omitempty"`
	NaN     *diff.StepDigest       `json:"first_non_finite,omitempty"` // --nan: its first digest with NaN or Inf
	lines   *diff.DigestRun
}

// Bisect does the work; ctx's end stops it between runs (the run under way is the Recorder's).
func Bisect(ctx context.Context, o Options) (*Result, error) {
	if o.Rounds == 0 {
		o.Rounds = 3
	}
	b := &bisector{o: o, res: &Result{}}
	if o.NaN {
		return b.res, b.nan(ctx)
	}
	return b.res, b.diverge(ctx)
}

type bisector struct {
	o   Options
	res *Result
}

func (b *bisector) say(format string, args ...any) {
	if b.o.Progress != nil {
		b.o.Progress(fmt.Sprintf(format, args...))
	}
}

// record makes run name with flags (the digest runs', or the reruns') on side 0 (A) or 1 (B).
func (b *bisector) record(ctx context.Context, name, purpose string, side int, flags []string) (*Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &Run{Name: name, Dir: filepath.Join(b.o.Out, name), Purpose: purpose, Command: b.o.Commands[side],
		Flags: append(slices.Clone(flags), b.o.Flags...)}
	b.res.Runs = append(b.res.Runs, r)
	b.say("run %d: %s: %s", len(b.res.Runs), name, purpose)
	t0 := time.Now()
	if err := b.o.Record(ctx, r); err != nil {
		return r, fmt.Errorf("%s: %w", name, err)
	}
	r.Seconds = time.Since(t0).Seconds()
	b.say("run %d: %s done in %.1f s, exit %d (%s)", len(b.res.Runs), name, r.Seconds, r.Exit, r.Dir)
	return r, nil
}

// ErrProgram is a run whose program failed: bisect stops, keeping what it made.
var ErrProgram = errors.New("the program failed")

func programFailed(r *Run) error {
	return fmt.Errorf("%w: run %s exited %d (its recording: %s); bisect needs runs that complete", ErrProgram, r.Name, r.Exit, r.Dir)
}

func (b *bisector) digestFlags() []string {
	f := []string{"--memory", recording.MemoryDigest}
	if b.o.NaN {
		// A NaN the optimizer never reaches (a loss whose gradient is finite, a metric) is
		// still where the run first holds one.
		f = append(f, "--digest-all")
	}
	if b.o.DigestEvery > 1 {
		f = append(f, "--digest-every", strconv.FormatUint(uint64(b.o.DigestEvery), 10))
	}
	return f
}

// digestRuns are the two runs with digests: made, or given.
func (b *bisector) digestRuns(ctx context.Context, names [2]string, purpose string) ([2]*Run, error) {
	var runs [2]*Run
	for side := range 2 {
		if g := b.o.Given[side]; g != "" {
			runs[side] = &Run{Name: names[side], Dir: g, Purpose: "given", Command: b.o.Commands[side], Given: true}
			b.res.Runs = append(b.res.Runs, runs[side])
			continue
		}
		r, err := b.record(ctx, names[side], purpose, side, b.digestFlags())
		if err != nil {
			return runs, err
		}
		if r.Exit != 0 {
			return runs, programFailed(r)
		}
		runs[side] = r
	}
	return runs, nil
}

func (b *bisector) diverge(ctx context.Context) error {
	runs, err := b.digestRuns(ctx, [2]string{"digest-a", "digest-b"}, "step digests, to find the first step whose state differs")
	if err != nil {
		return err
	}
	f, err := b.compareDigests(runs[0].Dir, runs[1].Dir)
	if err != nil {
		return err
	}
	b.res.Digests = f
	if f.Step == nil {
		b.res.Outcome = "agree"
		return nil
	}
	lo, hi := uint32(f.Agreed+1), *f.Step
	for round := 1; ; round++ {
		b.res.Window = &[2]uint32{lo, hi}
		flags := []string{"--memory", recording.MemoryHash, "--hash-steps", stepsText(lo, hi)}
		purpose := "hashing every launch of " + stepsWords(lo, hi) + ", step digests elsewhere"
		var narrow [2]*Run
		for side := range 2 {
			r, err := b.record(ctx, fmt.Sprintf("narrow-%c%d", 'a'+side, round), purpose, side, flags)
			if err != nil {
				return err
			}
			if r.Exit != 0 {
				return programFailed(r)
			}
			narrow[side] = r
		}
		// The reruns' own digests say whether they parted before the window.
		rf, err := b.compareDigests(narrow[0].Dir, narrow[1].Dir)
		if err != nil {
			return err
		}
		if rf.Step != nil && (*rf.Step < lo || *rf.Step > hi) {
			when := "earlier"
			if *rf.Step > hi {
				when = "only later"
			}
			if round == b.o.Rounds {
				b.note("the reruns parted %s, in step %d, outside the steps they hashed; %d narrowings made, bisect stops", when, *rf.Step, round)
				b.res.Outcome = "not-reproduced"
				return nil
			}
			b.note("the reruns parted %s, in step %d: narrowing there", when, *rf.Step)
			b.res.Digests = rf
			lo, hi = uint32(rf.Agreed+1), *rf.Step
			continue
		}
		report, parted, err := b.o.Narrow.Diff(narrow[0].Dir, narrow[1].Dir)
		if err != nil {
			return err
		}
		b.res.Report = report
		if parted {
			b.res.Outcome = "part-ways"
			return nil
		}
		if rf.Step == nil && round < b.o.Rounds {
			b.note("the reruns agree in %s: the runs did not part ways again; running them again", stepsWords(lo, hi))
			continue
		}
		b.note("the reruns' launches agree in %s though their digests %s", stepsWords(lo, hi), digestWords(rf))
		b.res.Outcome = "not-reproduced"
		return nil
	}
}

func digestWords(f *DigestFinding) string {
	if f.Step == nil {
		return "agree too"
	}
	return fmt.Sprintf("part ways in step %d: what differs was written outside a launch (a copy from the host)", *f.Step)
}

func (b *bisector) note(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	b.res.Notes = append(b.res.Notes, n)
	b.say("%s", n)
}

func stepsText(lo, hi uint32) string {
	if lo == hi {
		return strconv.FormatUint(uint64(lo), 10)
	}
	return fmt.Sprintf("%d-%d", lo, hi)
}

func stepsWords(lo, hi uint32) string {
	if lo == hi {
		return fmt.Sprintf("step %d", lo)
	}
	return fmt.Sprintf("steps %d-%d", lo, hi)
}

func (b *bisector) nan(ctx context.Context) error {
	var run *Run
	if g := b.o.Given[0]; g != "" {
		run = &Run{Name: "digest", Dir: g, Purpose: "given", Command: b.o.Commands[0], Given: true}
		b.res.Runs = append(b.res.Runs, run)
	} else {
		r, err := b.record(ctx, "digest", "step digests counting NaN and Inf, to find the first step that holds one", 0, b.digestFlags())
		if err != nil {
			return err
		}
		if r.Exit != 0 {
			b.note("run digest exited %d: reading what it recorded", r.Exit)
		}
		run = r
	}
	set, err := recording.Open(run.Dir)
	if err != nil {
		return err
	}
	// The rerun counts NaN as the types the digests did: bit patterns of another type in data
	// of this one (f32 data read as bf16 holds NaN patterns) would name the wrong launch.
	types := []string{"f32"}
	f := &DigestFinding{Agreed: -1}
	b.res.Digests = f
	var first *diff.StepDigest
	var firstRun *diff.DigestRun
	for _, p := range set.Processes {
		d, err := diff.ScanDigests(p)
		if err != nil {
			return err
		}
		f.Steps = max(f.Steps, len(d.Digests))
		if len(d.NanTypes) > 0 {
			types = d.NanTypes[:1]
		}
		pd := PairDigest{A: p.Name, Rank: p.Info.Rank, NaN: d.FirstNonFinite(), lines: d}
		f.Pairs = append(f.Pairs, pd)
		if pd.NaN != nil && (first == nil || pd.NaN.Step < first.Step) {
			first, firstRun = pd.NaN, d
		}
	}
	if first == nil {
		b.res.Outcome = "finite"
		if f.Steps == 0 {
			return noDigests(set)
		}
		return nil
	}
	f.Step = &first.Step
	// The NaN came in the step that ended at this digest, or in the steps since the digest
	// before it (--digest-every).
	lo, hi := first.Step, first.Step
	if e := uint32(max(b.o.DigestEvery, 1)); lo+1 >= e {
		lo = lo + 1 - e
	}
	f.Agreed = int(lo) - 1
	round := 0
	narrow := func(lo, hi uint32) (bool, error) {
		round++
		b.res.Window = &[2]uint32{lo, hi}
		flags := []string{"--memory", recording.MemoryHash, "--hash-steps", stepsText(lo, hi), "--nan-scan", strings.Join(types, ",")}
		r, err := b.record(ctx, fmt.Sprintf("narrow-%d", round), "counting NaN and Inf after every launch of "+stepsWords(lo, hi), 0, flags)
		if err != nil {
			return false, err
		}
		report, found, err := b.o.Narrow.NaN(r.Dir)
		if err != nil {
			return false, err
		}
		b.res.Report = report
		return found, nil
	}
	found, err := narrow(lo, hi)
	if err == nil && !found && lo > 0 {
		b.note("no launch of %s made NaN or Inf this time: counting from step 0", stepsWords(lo, hi))
		found, err = narrow(0, hi)
	}
	if err == nil && !found {
		// Memory no launch of the program wrote may hold NaN bit patterns from the start
		// (XLA's autotuning leaves them in its scratch memory): the NaN the program makes
		// shows where the count rises.
		if rise := firstRun.NonFiniteRise(first.Step); rise != nil {
			b.note("no launch of %s made the %d NaN or Inf its digest holds: memory the program's launches did not write held them (a library's scratch may: XLA's autotuning leaves NaN patterns); narrowing the first step where they rose, step %d (%d to %d)",
				stepsWords(0, hi), first.NonFinite(), rise.Digest.Step, rise.Prev, rise.Digest.NonFinite())
			f.Step = &rise.Digest.Step
			lo, hi = rise.Digest.Step, rise.Digest.Step
			if e := uint32(max(b.o.DigestEvery, 1)); lo+1 >= e {
				lo = lo + 1 - e
			}
			f.Agreed = int(lo) - 1
			found, err = narrow(lo, hi)
		}
	}
	if err != nil {
		return err
	}
	if found {
		b.res.Outcome = "nan"
		return nil
	}
	b.res.Outcome = "not-reproduced"
	return nil
}

// compareDigests compares two recordings' digests, pair of processes by pair.
func (b *bisector) compareDigests(dirA, dirB string) (*DigestFinding, error) {
	setA, err := recording.Open(dirA)
	if err != nil {
		return nil, err
	}
	setB, err := recording.Open(dirB)
	if err != nil {
		return nil, err
	}
	pairs, warnings := b.o.Narrow.Pair(setA, setB)
	f := &DigestFinding{Agreed: -1, Warnings: warnings}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("no processes of %s pair with one of %s", dirA, dirB)
	}
	digested := false
	for _, pp := range pairs {
		a, err := diff.ScanDigests(pp[0])
		if err != nil {
			return nil, err
		}
		bb, err := diff.ScanDigests(pp[1])
		if err != nil {
			return nil, err
		}
		digested = digested || len(a.Digests) > 0 || len(bb.Digests) > 0
		c := diff.CompareDigests(a, bb)
		f.Steps = max(f.Steps, c.Compared)
		pd := PairDigest{A: pp[0].Name, B: pp[1].Name, Rank: pp[0].Info.Rank, Compare: c, lines: a}
		if c.First != nil {
			if err := diff.FirstChunks(pp[0], pp[1], c.First); err != nil {
				return nil, err
			}
			if f.Step == nil || c.First.Step < *f.Step {
				f.Step, f.Agreed = &c.First.Step, c.Agreed
			}
		}
		f.Pairs = append(f.Pairs, pd)
	}
	if !digested {
		return nil, noDigests(setA)
	}
	if f.Step == nil {
		f.Agreed = f.Steps - 1
	}
	return f, nil
}

// noDigests is the error of a recording without step digests.
func noDigests(set *recording.Set) error {
	return fmt.Errorf("%s holds no step digest: the program went through no torch.optim optimizer step (record with --step-every N, steps of N launches, or --step-range REGEX, steps of NVTX ranges)%s", set.Dir, xlaStepHint(set))
}

// DivergentRanks names the ranks (or processes) whose digests part ways at step, in order.
func (f *DigestFinding) DivergentRanks(step uint32) []string {
	var out []string
	for _, p := range f.Pairs {
		if p.Compare != nil && p.Compare.First != nil && p.Compare.First.Step == step {
			out = append(out, pairName(p))
		}
	}
	return out
}

func pairName(p PairDigest) string {
	if p.Rank != nil {
		return fmt.Sprintf("rank %d", *p.Rank)
	}
	return cmp.Or(p.A, "the process")
}

// Wall is the time the runs took in all.
func (r *Result) Wall() float64 {
	var s float64
	for _, run := range r.Runs {
		s += run.Seconds
	}
	return s
}

// Made are the runs bisect made (not given), as "name (dir)".
func (r *Result) Made() string {
	var out []string
	for _, run := range r.Runs {
		if !run.Given {
			out = append(out, fmt.Sprintf("%s (%s)", run.Name, run.Dir))
		}
	}
	return strings.Join(out, ", ")
}
