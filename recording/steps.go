package recording

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// InOptimizerStep reports whether a launch with callstack c was made inside a PyTorch
// optimizer's step(): under a Python frame in a file under torch/optim that is a step method
// (co_qualname AdamW.step on Python 3.11+, step on 3.10) or the wrapper Optimizer installs
// around every subclass's step (profile_hook_step), so optimizers defined elsewhere that
// subclass torch.optim.Optimizer count too.
func InOptimizerStep(c *pb.Callstack) bool {
	for _, f := range c.GetFrames() {
		if f.GetKind() != pb.Frame_PYTHON || !strings.Contains(f.GetFile(), "/torch/optim/") {
			continue
		}
		fn := f.GetFunction()
		if fn == "step" || strings.HasSuffix(fn, ".step") || strings.Contains(fn, "profile_hook_step") {
			return true
		}
	}
	return false
}

// StepCounter numbers a training loop's steps along a process's launch calls, taken in seq
// order: a step ends where a run of calls made inside an optimizer's step() (InOptimizerStep)
// is followed by a call made outside one. The calls of a step's own optimizer step belong to
// it; a program that never calls one is all step 0.
type StepCounter struct {
	in    bool // the last call was made inside an optimizer step
	ended int
}

// Next takes the next call, made inside an optimizer step or not, and returns its step: how
// many steps ended before it.
func (s *StepCounter) Next(inOptimizerStep bool) int {
	switch {
	case inOptimizerStep:
		s.in = true
	case s.in:
		s.in, s.ended = false, s.ended+1
	}
	return s.ended
}

// Steps is how many optimizer steps the calls so far went through: those that ended, and the
// one under way.
func (s *StepCounter) Steps() int {
	if s.in {
		return s.ended + 1
	}
	return s.ended
}

// Stepper numbers a process's launch calls by training step, the one rule every report
// shares: a call's step is how many steps ended before it was made. Steps are the
// torch.optim optimizer steps (StepCounter), or, with a step range, the NVTX ranges whose
// message matches it, of any thread: a call made inside the k-th such range, counting from
// 0, is step k when the ranges before it ended before it. A reader gives it each batch
// (Add), then the batch's calls in seq order (EachCall).
type Stepper struct {
	re    *regexp.Regexp // nil: optimizer steps, or every
	every uint64         // steps are runs of this many calls (Process.step_every); 0: not
	last  uint64         // every: the highest seq numbered

	inStep map[uint64]bool // callstacks made inside an optimizer step, by id
	steps  StepCounter

	open    map[uint64]bool // matching ranges not ended yet, by id
	ends    []uint64        // end_ns of the matching ranges that ended, sorted
	matched int             // matching ranges seen
}

// NewStepper numbers steps by the NVTX ranges whose message matches stepRange, or by
// optimizer steps when it is "".
func NewStepper(stepRange string) (*Stepper, error) {
	s := &Stepper{inStep: map[uint64]bool{}, open: map[uint64]bool{}}
	if stepRange != "" {
		re, err := CompileStepRange(stepRange)
		if err != nil {
			return nil, fmt.Errorf("step range %q: %v", stepRange, err)
		}
		s.re = re
	}
	return s, nil
}

// ProcessStepper numbers p's launch calls: by the NVTX ranges p.StepRange matches when it is
// set, else by runs of p.StepEvery calls (gpurr record --step-every) when that is, else by
// optimizer steps.
func ProcessStepper(p *Process) (*Stepper, error) {
	s, err := NewStepper(p.StepRange)
	if err == nil && p.StepRange == "" {
		s.every = uint64(p.StepEvery)
	}
	return s, err
}

// CompileStepRange compiles a step range's regular expression; its error is one line, such
// as "missing closing ): `(`", for the caller to say where the expression came from.
func CompileStepRange(stepRange string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(stepRange)
	if err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	return re, nil
}

// Add takes a batch's callstacks, ranges and range ends, before its calls.
func (s *Stepper) Add(b *pb.Batch) {
	if s.re == nil {
		for _, c := range b.GetCallstacks() {
			s.inStep[c.GetId()] = InOptimizerStep(c)
		}
		return
	}
	for _, r := range b.GetRanges() {
		if !s.re.MatchString(r.GetMessage()) {
			continue
		}
		s.matched++
		if r.GetEndNs() != 0 {
			s.ended(r.GetEndNs())
		} else {
			s.open[r.GetId()] = true
		}
	}
	for _, e := range b.GetRangeEnds() {
		if s.open[e.GetId()] {
			delete(s.open, e.GetId())
			s.ended(e.GetEndNs())
		}
	}
}

func (s *Stepper) ended(ns uint64) {
	i, _ := slices.BinarySearch(s.ends, ns)
	s.ends = slices.Insert(s.ends, i, ns)
}

func (s *Stepper) call(seq, callstack, hostNs uint64) int {
	if s.every > 0 {
		s.last = max(s.last, seq)
		return int((max(seq, 1) - 1) / s.every)
	}
	if s.re == nil {
		return s.steps.Next(s.inStep[callstack])
	}
	// A range that ended before the call was made was written before it (the agent's ring
	// is in time order), so its end is known by now.
	n, _ := slices.BinarySearch(s.ends, hostNs)
	return n
}

// Launch returns the step of a launch.
func (s *Stepper) Launch(l *pb.Launch) int {
	return s.call(l.GetSeq(), l.GetCallstackId(), l.GetHostNs())
}

// GraphLaunch returns the step of a graph launch.
func (s *Stepper) GraphLaunch(g *pb.GraphLaunch) int {
	return s.call(g.GetSeq(), g.GetCallstackId(), g.GetHostNs())
}

// Steps is how many steps the calls so far went through: optimizer steps that ended and the
// one under way, or the matching ranges read so far.
func (s *Stepper) Steps() int {
	if s.every > 0 {
		return int((s.last + s.every - 1) / s.every)
	}
	if s.re == nil {
		return s.steps.Steps()
	}
	return s.matched
}

// Range is the step range's regular expression, "" for optimizer steps.
func (s *Stepper) Range() string {
	if s.re == nil {
		return ""
	}
	return s.re.String()
}

// Unit says what a step is, for reports: "optimizer steps", or "ranges matching REGEX".
func (s *Stepper) Unit() string {
	if s.every > 0 {
		return fmt.Sprintf("runs of %d launch calls", s.every)
	}
	if s.re == nil {
		return "optimizer steps"
	}
	return fmt.Sprintf("ranges matching %q", s.re.String())
}

// NoneMatched is the warning a report gives when steps are numbered by a step range that
// matched no NVTX range: every launch is step 0. It is "" otherwise.
func (s *Stepper) NoneMatched() string {
	if s.re == nil || s.matched > 0 {
		return ""
	}
	return fmt.Sprintf("no NVTX range matches the step range %q: every launch is step 0", s.re.String())
}

// EachCall calls launch and graph for a batch's launches and graph launches, merged in seq
// order (the order the program made the calls; each list is in it already).
func EachCall(b *pb.Batch, launch func(*pb.Launch), graph func(*pb.GraphLaunch)) {
	ls, gs := b.GetLaunches(), b.GetGraphLaunches()
	for len(ls) > 0 || len(gs) > 0 {
		if len(gs) == 0 || len(ls) > 0 && ls[0].GetSeq() < gs[0].GetSeq() {
			launch(ls[0])
			ls = ls[1:]
		} else {
			graph(gs[0])
			gs = gs[1:]
		}
	}
}

// StepOf reads p's launch calls in order and returns the step of launch seq (Stepper, with
// p's StepRange) and the Stepper that numbered the whole recording (its Steps, its Unit);
// step is -1 when seq is not a launch of p.
func StepOf(p *Process, seq uint64) (step int, steps *Stepper, err error) {
	if steps, err = ProcessStepper(p); err != nil {
		return -1, nil, err
	}
	step = -1
	count := func(n int, s uint64) {
		if s == seq {
			step = n
		}
	}
	_, err = p.Scan(func(b *pb.Batch) error {
		steps.Add(b)
		EachCall(b, func(l *pb.Launch) { count(steps.Launch(l), l.GetSeq()) },
			func(g *pb.GraphLaunch) { count(steps.GraphLaunch(g), g.GetSeq()) })
		return nil
	})
	return step, steps, err
}
