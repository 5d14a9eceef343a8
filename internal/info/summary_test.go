package info

import (
	"encoding/json"
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
