package bisect_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/bisect"
	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// fakeRecorder "runs" a testrec.Trained program as testrec.TrainedRun reads its command and
// flags.
type fakeRecorder struct {
	runs  int
	early map[int]bool // runs (from 1) in which the planted launch strikes a step earlier
	fail  int          // a run (from 1) whose program exits 1
}

func (f *fakeRecorder) record(_ context.Context, r *bisect.Run) error {
	f.runs++
	o := testrec.TrainedRun(r.Command, r.Flags, f.runs, f.early)
	if err := os.MkdirAll(r.Dir, 0o700); err != nil {
		return err
	}
	if f.runs == f.fail {
		r.Exit = 1
	}
	return testrec.WriteTrained(r.Dir, o)
}

// fakeNarrower is gpurr diff and nan reduced to what bisect asks: which launch differs first,
// which holds NaN first.
type fakeNarrower struct{}

type launchReport struct {
	Seq    uint64
	Kernel string
}

func (launchReport) WriteText(w interface{ Write([]byte) (int, error) }) error { return nil }

func (fakeNarrower) Diff(a, b string) (bisect.Report, bool, error) {
	sa, err := recording.Open(a)
	if err != nil {
		return nil, false, err
	}
	sb, err := recording.Open(b)
	if err != nil {
		return nil, false, err
	}
	ra, err := diff.Scan(sa.Processes[0])
	if err != nil {
		return nil, false, err
	}
	rb, err := diff.Scan(sb.Processes[0])
	if err != nil {
		return nil, false, err
	}
	res := diff.Align(ra, rb)
	if res.First == nil {
		return nil, false, nil
	}
	l := ra.Launches[res.First.A]
	return launchReport{l.Seq, ra.KernelName(l)}, true, nil
}

func (fakeNarrower) NaN(dir string) (bisect.Report, bool, error) {
	set, err := recording.Open(dir)
	if err != nil {
		return nil, false, err
	}
	d, err := set.Processes[0].Load()
	if err != nil {
		return nil, false, err
	}
	for _, st := range d.Memory {
		for _, rs := range st.GetRegions() {
			if len(rs.GetNanCount()) > 0 && rs.GetNanCount()[0] > 0 {
				return launchReport{Seq: st.GetLaunchSeq()}, true, nil
			}
		}
	}
	return nil, false, nil
}

func (fakeNarrower) Pair(a, b *recording.Set) ([][2]*recording.Process, []string) {
	var out [][2]*recording.Process
	for i := range min(len(a.Processes), len(b.Processes)) {
		out = append(out, [2]*recording.Process{a.Processes[i], b.Processes[i]})
	}
	return out, nil
}

func run(t *testing.T, o bisect.Options, rec *fakeRecorder) *bisect.Result {
	t.Helper()
	o.Out = t.TempDir()
	o.Record, o.Narrow = rec.record, fakeNarrower{}
	if o.Commands[1] == nil {
		o.Commands[1] = o.Commands[0]
	}
	res, err := bisect.Bisect(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + text.String())
	return res
}

func names(res *bisect.Result) []string {
	var out []string
	for _, r := range res.Runs {
		out = append(out, r.Name)
	}
	return out
}

// Launch 1 of step 3 of a 4-launch step is seq 3*4+1+1 = 14.
const plantedSeq = 14

// TestBisectDiverge: the digests part ways in the step of the nondeterministic launch; the two
// reruns hash that step alone and their diff names that launch.
func TestBisectDiverge(t *testing.T) {
	rec := &fakeRecorder{}
	res := run(t, bisect.Options{Commands: [2][]string{{"train", "diverge", "3", "1"}}}, rec)
	if res.Outcome != "part-ways" || *res.Digests.Step != 3 || res.Digests.Agreed != 2 {
		t.Fatalf("outcome %s, digests %+v: want part-ways in step 3 after steps 0-2 agreed", res.Outcome, res.Digests)
	}
	if got := names(res); !slices.Equal(got, []string{"digest-a", "digest-b", "narrow-a1", "narrow-b1"}) {
		t.Fatalf("runs %v", got)
	}
	if *res.Window != [2]uint32{3, 3} {
		t.Fatalf("window %v, want step 3", *res.Window)
	}
	if r, ok := res.Report.(launchReport); !ok || r.Seq != plantedSeq {
		t.Fatalf("report %+v, want launch %d", res.Report, plantedSeq)
	}
}

// TestBisectEarlier: when the reruns part ways a step before the one the digests named, bisect
// narrows there and says so.
func TestBisectEarlier(t *testing.T) {
	rec := &fakeRecorder{early: map[int]bool{3: true, 4: true, 5: true, 6: true}}
	res := run(t, bisect.Options{Commands: [2][]string{{"train", "diverge", "3", "1"}}}, rec)
	if res.Outcome != "part-ways" || *res.Window != [2]uint32{2, 2} || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "earlier, in step 2") {
		t.Fatalf("outcome %s, window %v, notes %q: want the narrowing moved to step 2", res.Outcome, *res.Window, res.Notes)
	}
	if r := res.Report.(launchReport); r.Seq != plantedSeq-4 {
		t.Fatalf("report %+v, want launch %d", r, plantedSeq-4)
	}
}

// TestBisectAgree: runs that never part ways end after the digest runs, agreeing.
func TestBisectAgree(t *testing.T) {
	res := run(t, bisect.Options{Commands: [2][]string{{"train"}}}, &fakeRecorder{})
	if res.Outcome != "agree" || len(res.Runs) != 2 || res.Digests.Steps != 5 {
		t.Fatalf("outcome %s, runs %v, %d steps: want agree after 2 runs, 5 steps", res.Outcome, names(res), res.Digests.Steps)
	}
}

// TestBisectGiven: two recordings given, made with other learning rates: each side's reruns run
// its own command, and the first step differs.
func TestBisectGiven(t *testing.T) {
	dir := t.TempDir()
	cmds := [2][]string{{"train", "lr", "0.001"}, {"train", "lr", "0.0010000002"}}
	rec := &fakeRecorder{}
	var given [2]string
	for side := range 2 {
		given[side] = fmt.Sprintf("%s/given-%d", dir, side)
		if err := rec.record(context.Background(), &bisect.Run{Dir: given[side], Command: cmds[side]}); err != nil {
			t.Fatal(err)
		}
	}
	res := run(t, bisect.Options{Commands: cmds, Given: given}, rec)
	if res.Outcome != "part-ways" || *res.Digests.Step != 0 {
		t.Fatalf("outcome %s, step %v: want part-ways in step 0", res.Outcome, res.Digests.Step)
	}
	if got := names(res); !slices.Equal(got, []string{"digest-a", "digest-b", "narrow-a1", "narrow-b1"}) || !res.Runs[0].Given {
		t.Fatalf("runs %v", got)
	}
	if r := res.Report.(launchReport); r.Seq != 1 {
		t.Fatalf("report %+v, want launch 1 (the first that uses lr)", r)
	}
}

// TestBisectNaN: one digest run finds the first digest with NaN, one rerun counting NaN in that
// step names the launch.
func TestBisectNaN(t *testing.T) {
	res := run(t, bisect.Options{Commands: [2][]string{{"train", "nan", "3", "2"}}, NaN: true}, &fakeRecorder{})
	if res.Outcome != "nan" || *res.Digests.Step != 3 || !slices.Equal(names(res), []string{"digest", "narrow-1"}) {
		t.Fatalf("outcome %s, step %v, runs %v", res.Outcome, res.Digests.Step, names(res))
	}
	if r := res.Report.(launchReport); r.Seq != 3*4+2+1 {
		t.Fatalf("report %+v, want launch %d", r, 3*4+2+1)
	}
}

// TestBisectNaNOutsideOptimizer: a NaN in a loss the optimizer never reaches (its gradient
// is finite) is found: bisect --nan's digests hash every live allocation.
func TestBisectNaNOutsideOptimizer(t *testing.T) {
	res := run(t, bisect.Options{Commands: [2][]string{{"train", "nan", "3", "2", "lossnan"}}, NaN: true}, &fakeRecorder{})
	if res.Outcome != "nan" || *res.Digests.Step != 3 {
		t.Fatalf("outcome %s, step %v, runs %v", res.Outcome, res.Digests.Step, names(res))
	}
	if r := res.Report.(launchReport); r.Seq != 3*4+2+1 {
		t.Fatalf("report %+v, want launch %d", r, 3*4+2+1)
	}
}

// TestBisectNaNOverStaleMemory: memory no launch writes holds NaN from the start (XLA's
// autotuning scratch), so the first digest holding NaN is step 0's and no launch of step 0
// made them; bisect narrows the first step where the count rose, and names the launch there.
func TestBisectNaNOverStaleMemory(t *testing.T) {
	res := run(t, bisect.Options{Commands: [2][]string{{"train", "nan", "3", "2", "stalenan"}}, NaN: true}, &fakeRecorder{})
	if res.Outcome != "nan" || *res.Digests.Step != 3 || !slices.Equal(names(res), []string{"digest", "narrow-1", "narrow-2"}) {
		t.Fatalf("outcome %s, step %v, runs %v, notes %q", res.Outcome, res.Digests.Step, names(res), res.Notes)
	}
	if r := res.Report.(launchReport); r.Seq != 3*4+2+1 {
		t.Fatalf("report %+v, want launch %d", r, 3*4+2+1)
	}
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "narrowing the first step where they rose, step 3 (4096 to 4098)") {
		t.Fatalf("notes %q", res.Notes)
	}
}

// TestBisectProgramFails: a run whose program fails ends bisect with ErrProgram, naming it.
func TestBisectProgramFails(t *testing.T) {
	o := bisect.Options{Out: t.TempDir(), Commands: [2][]string{{"train"}, {"train"}}}
	rec := &fakeRecorder{fail: 2}
	o.Record, o.Narrow = rec.record, fakeNarrower{}
	res, err := bisect.Bisect(context.Background(), o)
	if !errors.Is(err, bisect.ErrProgram) || !strings.Contains(err.Error(), "digest-b exited 1") || len(res.Runs) != 2 {
		t.Fatalf("err %v, runs %v", err, names(res))
	}
}
