package recording

import (
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

// StepOf reads p's launch calls in order and returns the step of launch seq (StepCounter) and
// how many optimizer steps the whole recording went through; step is -1 when seq is not a
// launch of p.
func StepOf(p *Process, seq uint64) (step, steps int, err error) {
	inStep := map[uint64]bool{}
	var c StepCounter
	step = -1
	count := func(callstack, s uint64) {
		n := c.Next(inStep[callstack])
		if s == seq {
			step = n
		}
	}
	_, err = p.Scan(func(b *pb.Batch) error {
		for _, cs := range b.Callstacks {
			inStep[cs.GetId()] = InOptimizerStep(cs)
		}
		EachCall(b, func(l *pb.Launch) { count(l.GetCallstackId(), l.GetSeq()) },
			func(g *pb.GraphLaunch) { count(g.GetCallstackId(), g.GetSeq()) })
		return nil
	})
	return step, c.Steps(), err
}
