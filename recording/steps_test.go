package recording_test

import (
	"slices"
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

// stepsOf numbers batches' launches with a Stepper for stepRange, batch by batch as a reader
// streams them, and returns their steps in seq order.
func stepsOf(t *testing.T, stepRange string, batches ...*pb.Batch) ([]int, *recording.Stepper) {
	t.Helper()
	s, err := recording.NewStepper(stepRange)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, b := range batches {
		s.Add(b)
		recording.EachCall(b, func(l *pb.Launch) { got = append(got, s.Launch(l)) },
			func(g *pb.GraphLaunch) { got = append(got, 100+s.GraphLaunch(g)) })
	}
	return got, s
}

func TestStepperByRange(t *testing.T) {
	// Thread 1 runs "step 0" and "step 1", each with a nested "forward" range (a pushed range
	// closed in the frame it opened in); thread 2 opens "step 2" after both, and the second
	// step's end comes in a later frame than its start. Launches are made at host times
	// 15 (in step 0), 25 (between steps), 35 (in step 1), graph launch at 45 (in step 1),
	// 60 (after step 1, in step 2 on the other thread), 90 (after all).
	b1 := &pb.Batch{
		Ranges: []*pb.Range{
			{Id: 1, Tid: 1, Message: "step 0", StartNs: 10, EndNs: 20, Pushed: true},
			{Id: 2, ParentId: 1, Tid: 1, Message: "forward", StartNs: 11, EndNs: 19, Pushed: true},
			{Id: 3, Tid: 1, Message: "step 1", StartNs: 30, Pushed: true},
			{Id: 4, ParentId: 3, Tid: 1, Message: "forward", StartNs: 31, EndNs: 40, Pushed: true},
		},
		Launches:      []*pb.Launch{{Seq: 1, HostNs: 15, RangeId: 2}, {Seq: 2, HostNs: 25}, {Seq: 3, HostNs: 35, RangeId: 4}},
		GraphLaunches: []*pb.GraphLaunch{{Seq: 4, HostNs: 45, RangeId: 3}},
	}
	b2 := &pb.Batch{
		Ranges:    []*pb.Range{{Id: 5, Tid: 2, Message: "step 2", StartNs: 55, EndNs: 80, Pushed: true}},
		RangeEnds: []*pb.RangeEnd{{Id: 3, EndNs: 50}},
		Launches:  []*pb.Launch{{Seq: 5, HostNs: 60, Tid: 1}, {Seq: 6, HostNs: 90}},
	}
	got, s := stepsOf(t, `^step \d+$`, b1, b2)
	if want := []int{0, 1, 1, 101, 2, 3}; !slices.Equal(got, want) {
		t.Errorf("steps %v, want %v", got, want)
	}
	if s.Steps() != 3 || s.Unit() != `ranges matching "^step \\d+$"` || s.NoneMatched() != "" {
		t.Errorf("%d steps of %s; none matched: %q", s.Steps(), s.Unit(), s.NoneMatched())
	}
	// Nested ranges that both match count one step each.
	got, _ = stepsOf(t, "step|forward", b1, b2)
	if want := []int{0, 2, 2, 103, 4, 5}; !slices.Equal(got, want) {
		t.Errorf("nested matching ranges: steps %v, want %v", got, want)
	}
	// A range that matches nothing: all step 0, and reports warn.
	got, s = stepsOf(t, "^train_step$", b1, b2)
	if want := []int{0, 0, 0, 100, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("no match: steps %v, want %v", got, want)
	}
	if want := `no NVTX range matches the step range "^train_step$": every launch is step 0`; s.NoneMatched() != want || s.Steps() != 0 {
		t.Errorf("no match: %d steps, warning %q", s.Steps(), s.NoneMatched())
	}
	// Without a step range, optimizer steps: none here, and no warning.
	if _, s = stepsOf(t, "", b1, b2); s.Steps() != 0 || s.NoneMatched() != "" || s.Unit() != "optimizer steps" {
		t.Errorf("optimizer steps: %d, %q, %q", s.Steps(), s.NoneMatched(), s.Unit())
	}
	if _, err := recording.NewStepper("step ("); err == nil || err.Error() != "step range \"step (\": missing closing ): `step (`" {
		t.Errorf("bad step range: %v", err)
	}
}
