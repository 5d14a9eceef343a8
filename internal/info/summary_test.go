package info

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// Frame by frame, info sums what it would sum holding the whole recording: kernels that come a
// frame after their launch, ranges that close in later frames, graph replays, memory states
// and probes give the same summary as one batch of all the records.
func TestSummaryStreams(t *testing.T) {
	sets := map[string]*recording.Set{}
	for _, v := range []testrec.Variant{testrec.Good, testrec.Lossy, testrec.Memory, testrec.Autograd, testrec.StepRange, testrec.Probe, testrec.WriteSets} {
		sets[string(v)] = testrec.Open(t, v)
	}
	for name, o := range map[string]testrec.Big{
		"timed":    {Launches: 10_000, Activities: true},
		"snapshot": {Launches: 5_000, Snapshot: true, DifferAt: 3},
	} {
		dir := filepath.Join(t.TempDir(), name)
		if _, err := testrec.WriteBig(dir, o); err != nil {
			t.Fatal(err)
		}
		set, err := recording.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		sets[name] = set
	}
	for name, set := range sets {
		for _, p := range set.Processes {
			d, err := p.Load()
			if err != nil {
				t.Fatal(err)
			}
			whole := summarize(p.Name, d, mustStepper(t, p.StepRange))
			streamed, _, err := summarizeProcess(p, mustStepper(t, p.StepRange), nil)
			if err != nil {
				t.Fatal(err)
			}
			whole.ModulesMissing, whole.Files = streamed.ModulesMissing, streamed.Files // not checked from memory
			a, _ := json.Marshal(whole)
			b, _ := json.Marshal(streamed)
			if d.Frames < 2 {
				t.Errorf("%s %s: %d frame", name, p.Name, d.Frames)
			}
			if string(a) != string(b) {
				t.Errorf("%s %s: streamed\n%s\nwhole\n%s", name, p.Name, b, a)
			}
		}
	}
}

func mustStepper(t *testing.T, stepRange string) *recording.Stepper {
	t.Helper()
	s, err := recording.NewStepper(stepRange)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Kernels whose readable names share the head that shorten keeps (templates of one long
// name) and tie in runs and launches are listed in one order every time, that of their
// mangled names: they came in the map's order, which changes from run to run, so info's table
// and JSON differed between two runs on one recording and the top 10 could hold other kernels.
func TestTopKernelsOrderFixed(t *testing.T) {
	head := "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
	var first []byte
	for i := range 30 {
		s := newSummary("p", mustStepper(t, ""), nil)
		for k := range 12 {
			name := fmt.Sprintf("_Z6kernel%02d", k)
			s.readable[name] = fmt.Sprintf("%sop%02d>>(int, T2)", head, k)
			s.runs[name] = &KernelUse{Runs: 5, Launches: 5, GPUTimeNS: uint64(100 + k%3)}
		}
		p := &Process{}
		s.topKernels(p)
		b, err := json.Marshal([][]KernelUse{p.TopByCount, p.TopByTime})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = b
		} else if string(b) != string(first) {
			t.Fatalf("run %d listed\n%s\nrun 0\n%s", i, b, first)
		}
	}
}
