// Package race hunts data races in one recorded kernel launch (gpurr race): it replays the
// launch on its recorded inputs with delays injected before chosen instructions
// (internal/instrument), and a delay that changes the result is a race witness. The witness is
// then reduced, by delta debugging with the same seed, to a minimal set of delay points that
// still changes the result, which names the racing instructions and their source lines.
//
// The hunt is written against Runner, which runs the launch with delays at some points and
// returns a fingerprint of its output; the GPU runner replays through internal/replay, and the
// tests use a model of a racy kernel.
package race

import (
	"fmt"
	"slices"
	"time"
)

// Output fingerprints a run's result: one value per region (replay.RegionResult.Output).
type Output []uint64

// Equal reports whether two runs left the same bytes.
func (o Output) Equal(p Output) bool { return slices.Equal(o, p) }

// Differing lists the regions whose bytes differ between two runs.
func (o Output) Differing(p Output) []int {
	var out []int
	for i := range o {
		if i >= len(p) || o[i] != p[i] {
			out = append(out, i)
		}
	}
	return out
}

// Runner runs the launch once: with delays before the points given (indexes into the hunt's
// point list; none is the uninstrumented kernel), chosen by seed.
type Runner interface {
	Run(points []int, seed uint64) (Output, error)
}

// Options shape a hunt.
type Options struct {
	Baselines int // uninstrumented runs first, to find a kernel that is nondeterministic already (at least 2)
	// Steps are the trials, each with every point delayed, in stages; SetStep, when set, is
	// called before a stage's first trial, to give the runner the stage's delay.
	Steps   []Step
	SetStep func(Step) error
	// Budget, when more than 0, is how long the trials may take: once it is spent, no further
	// trial starts (the reduction of a witness still runs). Clock reads the time (time.Now
	// when nil).
	Budget   time.Duration
	Clock    func() time.Time
	Seed     uint64 // the first trial's seed; trial k (counted over all steps) uses Seed+k
	Progress func(done, total int)
}

// StepRun is a step of a hunt and how many of its trials ran.
type StepRun struct {
	Step
	Ran int
}

// Result is what a hunt found.
type Result struct {
	Baseline Output
	// Nondeterministic is set when uninstrumented runs disagree already (float atomics, a race
	// that needs no delay): Varying lists the regions that changed, and no trial ran.
	Nondeterministic bool
	Varying          []int
	Trials           int       // trials run
	Steps            []StepRun // the steps begun, in order; with Found, the last holds the witness
	OutOfBudget      bool      // the budget ran out before every step's trials had run
	Found            bool      // a trial changed the result
	Seed             uint64    // the witnessing trial's seed
	Points           []int     // the minimal set of points whose delays still change the result
	Witness          Output    // the output with those points delayed
	Runs             int       // runs in all, reduction included
}

// Planned is how many trials steps hold in all.
func Planned(steps []Step) int {
	n := 0
	for _, s := range steps {
		n += s.Trials
	}
	return n
}

// Hunt runs the baselines, then the steps' trials until one changes the result or the budget
// is spent, then reduces the witness.
func Hunt(r Runner, points int, o Options) (*Result, error) {
	if o.Baselines < 2 {
		o.Baselines = 2
	}
	clock := o.Clock
	if clock == nil {
		clock = time.Now
	}
	res := &Result{}
	total := o.Baselines + Planned(o.Steps)
	run := func(ps []int, seed uint64) (Output, error) {
		res.Runs++
		if o.Progress != nil {
			o.Progress(res.Runs, total)
		}
		return r.Run(ps, seed)
	}
	for i := range o.Baselines {
		out, err := run(nil, 0)
		if err != nil {
			return nil, fmt.Errorf("uninstrumented run %d: %w", i+1, err)
		}
		if i == 0 {
			res.Baseline = out
		} else if !out.Equal(res.Baseline) {
			res.Nondeterministic, res.Varying = true, res.Baseline.Differing(out)
			return res, nil
		}
	}
	if points == 0 {
		return res, nil
	}
	all := make([]int, points)
	for i := range all {
		all[i] = i
	}
	deadline := clock().Add(o.Budget)
	for _, step := range o.Steps {
		if step.Trials == 0 {
			continue
		}
		if o.Budget > 0 && !clock().Before(deadline) {
			res.OutOfBudget = true
			break
		}
		if o.SetStep != nil {
			if err := o.SetStep(step); err != nil {
				return nil, fmt.Errorf("step %v: %w", step, err)
			}
		}
		res.Steps = append(res.Steps, StepRun{Step: step})
		sr := &res.Steps[len(res.Steps)-1]
		for range step.Trials {
			if o.Budget > 0 && sr.Ran > 0 && !clock().Before(deadline) {
				res.OutOfBudget = true
				return res, nil
			}
			seed := o.Seed + uint64(res.Trials)
			out, err := run(all, seed)
			if err != nil {
				return nil, fmt.Errorf("trial with seed %d: %w", seed, err)
			}
			res.Trials++
			sr.Ran++
			if !out.Equal(res.Baseline) {
				if err := reduce(res, all, seed, out, run); err != nil {
					return nil, err
				}
				return res, nil
			}
		}
	}
	return res, nil
}

// reduce records the witness of seed and shrinks its points.
func reduce(res *Result, all []int, seed uint64, out Output, run func([]int, uint64) (Output, error)) error {
	res.Found, res.Seed, res.Witness = true, seed, out
	differs := func(ps []int) (bool, error) {
		out, err := run(ps, seed)
		if err != nil {
			return false, err
		}
		if !out.Equal(res.Baseline) {
			res.Witness = out
			return true, nil
		}
		return false, nil
	}
	var err error
	if res.Points, err = minimize(all, differs); err != nil {
		return fmt.Errorf("reducing the witness of seed %d: %w", seed, err)
	}
	return nil
}

// minimize is delta debugging (ddmin): a smallest subset of set, as far as removing any one
// chunk of it goes, for which differs still holds. set itself must hold.
func minimize(set []int, differs func([]int) (bool, error)) ([]int, error) {
	n := 2
	for len(set) >= 2 {
		chunks := split(set, n)
		reduced := false
		for _, c := range chunks { // a chunk alone
			ok, err := differs(c)
			if err != nil {
				return nil, err
			}
			if ok {
				set, n, reduced = c, 2, true
				break
			}
		}
		if !reduced && n > 2 {
			for i := range chunks { // the set without a chunk
				rest := without(chunks, i)
				ok, err := differs(rest)
				if err != nil {
					return nil, err
				}
				if ok {
					set, n, reduced = rest, max(n-1, 2), true
					break
				}
			}
		}
		if !reduced {
			if n >= len(set) {
				break
			}
			n = min(2*n, len(set))
		}
	}
	return set, nil
}

func split(set []int, n int) [][]int {
	var out [][]int
	for i := range n {
		lo, hi := i*len(set)/n, (i+1)*len(set)/n
		if lo < hi {
			out = append(out, set[lo:hi])
		}
	}
	return out
}

func without(chunks [][]int, skip int) []int {
	var out []int
	for i, c := range chunks {
		if i != skip {
			out = append(out, c...)
		}
	}
	return out
}

// Guarded runs an inner Runner with a deadline per run: a delay can make a kernel hang (one
// that spins waiting on another CTA), and a hung kernel never returns to the process. After
// the first run, each may take max(Min, Factor times the first); past it, Hung is called with
// the points and seed of the run that hangs (it ends the process: a kernel cannot be stopped
// from the process that launched it).
type Guarded struct {
	Inner  Runner
	Min    time.Duration
	Factor float64
	Hung   func(points []int, seed uint64, waited time.Duration)
	first  time.Duration
}

// Run runs the inner runner under the deadline.
func (g *Guarded) Run(points []int, seed uint64) (Output, error) {
	limit := time.Duration(0)
	if g.first > 0 {
		limit = max(g.Min, time.Duration(g.Factor*float64(g.first)))
		timer := time.AfterFunc(limit, func() { g.Hung(points, seed, limit) })
		defer timer.Stop()
	}
	start := time.Now()
	out, err := g.Inner.Run(points, seed)
	if g.first == 0 {
		g.first = max(time.Since(start), time.Millisecond)
	}
	return out, err
}
