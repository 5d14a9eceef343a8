package recording_test

import (
	"testing"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func TestStepCounter(t *testing.T) {
	stack := func(frames ...[2]string) *pb.Callstack {
		c := &pb.Callstack{}
		for _, f := range frames {
			c.Frames = append(c.Frames, &pb.Frame{Kind: pb.Frame_PYTHON, File: f[0], Function: f[1]})
		}
		return c
	}
	const optim = "/venv/lib/python3.12/site-packages/torch/optim/"
	forward := stack([2]string{"/home/u/model.py", "forward"}, [2]string{"/home/u/train.py", "main"})
	step := stack([2]string{optim + "adamw.py", "_multi_tensor_adamw"}, [2]string{optim + "adamw.py", "step"},
		[2]string{optim + "optimizer.py", "wrapper"}, [2]string{"/home/u/train.py", "main"})
	zeroGrad := stack([2]string{optim + "optimizer.py", "zero_grad"}, [2]string{"/home/u/train.py", "main"})
	// As Python 3.11+ names them (co_qualname), the way the agent records them.
	qualStep := stack([2]string{optim + "sgd.py", "_multi_tensor_sgd"}, [2]string{optim + "sgd.py", "SGD.step"},
		[2]string{optim + "optimizer.py", "_use_grad_for_differentiable.<locals>._use_grad"},
		[2]string{optim + "optimizer.py", "Optimizer.profile_hook_step.<locals>.wrapper"}, [2]string{"/home/u/train.py", "main"})
	qualZeroGrad := stack([2]string{optim + "optimizer.py", "Optimizer.zero_grad"}, [2]string{"/home/u/train.py", "main"})
	subclassStep := stack([2]string{"/home/u/my_optim.py", "Lion.step"},
		[2]string{optim + "optimizer.py", "Optimizer.profile_hook_step.<locals>.wrapper"}, [2]string{"/home/u/train.py", "main"})
	userStep := stack([2]string{"/home/u/my_optim.py", "step"})
	for c, want := range map[*pb.Callstack]bool{forward: false, step: true, zeroGrad: false, qualStep: true, qualZeroGrad: false,
		subclassStep: true, userStep: false, nil: false} {
		if got := recording.InOptimizerStep(c); got != want {
			t.Errorf("InOptimizerStep(%v) = %v", c.GetFrames(), got)
		}
	}
	// zero_grad, forward, backward (engine thread: no stack), the optimizer's step in three
	// launches; twice; then a forward of a third step.
	var s recording.StepCounter
	var got []int
	for range 2 {
		for _, c := range []*pb.Callstack{zeroGrad, forward, forward, nil, nil, step, step, step} {
			got = append(got, s.Next(recording.InOptimizerStep(c)))
		}
	}
	got = append(got, s.Next(recording.InOptimizerStep(forward)))
	want := []int{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2}
	if len(got) != len(want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("steps %v, want %v", got, want)
		}
	}
	if s.Steps() != 2 {
		t.Errorf("%d steps, want 2", s.Steps())
	}
	var inStep recording.StepCounter
	inStep.Next(true)
	if inStep.Steps() != 1 {
		t.Errorf("a recording that ends inside a step: %d steps, want 1", inStep.Steps())
	}
}

func TestEachCall(t *testing.T) {
	b := &pb.Batch{
		Launches:      []*pb.Launch{{Seq: 1}, {Seq: 2}, {Seq: 5}},
		GraphLaunches: []*pb.GraphLaunch{{Seq: 3}, {Seq: 4}, {Seq: 6}},
	}
	var got []uint64
	recording.EachCall(b, func(l *pb.Launch) { got = append(got, l.GetSeq()) }, func(g *pb.GraphLaunch) { got = append(got, 100+g.GetSeq()) })
	want := []uint64{1, 2, 103, 104, 5, 106}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("calls %v, want %v", got, want)
		}
	}
}
