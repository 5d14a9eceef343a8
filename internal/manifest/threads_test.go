package manifest

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// Runs of a program whose 8 threads each launch on a stream of their own, reaching their
// launches in another order in each run: a manifest keeps its streams numbered in order of
// first use and says which thread's stream each one is (stream_units), so verify pairs the
// launches thread by thread, as diff does. A manifest made before stream_units is verified
// as it was: both sides' streams by first use.
func TestThreadsManifest(t *testing.T) {
	write := func(o testrec.Threaded) (*recording.Process, [][]uint64) {
		t.Helper()
		_, seqs := testrec.ThreadedBatches(o)
		p, err := testrec.WriteThreaded(filepath.Join(t.TempDir(), "threads"), o)
		if err != nil {
			t.Fatal(err)
		}
		return p, seqs
	}
	shuffled, reversed := []int{5, 2, 7, 0, 3, 6, 1, 4}, []int{7, 6, 5, 4, 3, 2, 1, 0}
	good, _ := write(testrec.Threaded{Workers: 8, Order: shuffled})
	var buf bytes.Buffer
	if _, err := Write(&buf, &recording.Set{Dir: filepath.Dir(good.Dir), Processes: []*recording.Process{good}}); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	// Worker 5 launched first, on stream 1 by first use; it is the 6th worker created, diff's
	// stream 6.
	if !strings.Contains(text, `"stream_units":[0,6,3,8,1,4,7,2,5],"launches":[`) {
		t.Fatalf("manifest:\n%s", text)
	}
	open := func(text string) *Manifest {
		t.Helper()
		path := filepath.Join(t.TempDir(), "m.json")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		m, err := Open(path, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	verify := func(m *Manifest, p *recording.Process) (*diff.Result, []uint64) {
		t.Helper()
		run, err := diff.Scan(p)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		res, err := m.Verify(run, m.Processes[0], Options{All: true}, func(mm *Mismatch) error {
			seqs = append(seqs, mm.Actual.Launch.GetSeq())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return res, seqs
	}
	m := open(text)
	other, _ := write(testrec.Threaded{Workers: 8, Order: reversed, Late: true})
	if res, seqs := verify(m, other); res.First != nil || res.Compared != 9 || seqs != nil {
		t.Errorf("threads in another order: %+v, mismatches %v", res, seqs)
	}
	changed, seqs := write(testrec.Threaded{Workers: 8, Order: reversed, Changed: 3})
	if res, got := verify(m, changed); res.Differ != 1 || len(got) != 1 || got[0] != seqs[2][0] {
		t.Errorf("worker 2 changed: %+v, mismatches %v, want its launch %d", res, got, seqs[2][0])
	}

	// A manifest made before stream_units: streams by first use on both sides, as then.
	old := open(regexp.MustCompile(`,"stream_units":\[[0-9,]*\]`).ReplaceAllString(text, ""))
	if old.Processes[0].Process.StreamUnits != nil {
		t.Fatalf("stream_units left in the old manifest")
	}
	if res, seqs := verify(old, good); res.First != nil || res.Compared != 9 || seqs != nil {
		t.Errorf("the run itself against its old manifest: %+v, mismatches %v", res, seqs)
	}
	if res, _ := verify(old, other); res.Differ != 6 {
		t.Errorf("threads in another order against the old manifest: %+v, want the 6 launches whose threads differ by first use", res)
	}

	for _, c := range []struct{ units, want string }{
		{"[0,6,3,8,1,4,7,2,2]", "stream_units[8] is 2: want each of 0..8 once"},
		{"[0,6,3,8,1,4,7,2,9]", "stream_units[8] is 9: want each of 0..8 once"},
		{"[0,-1]", "stream_units[1] is -1"},
		{"[0,1,2,3]", "stream 4, but stream_units names 4 streams"},
	} {
		bad := strings.Replace(text, `"stream_units":[0,6,3,8,1,4,7,2,5]`, `"stream_units":`+c.units, 1)
		if _, err := read(strings.NewReader(bad), ReadOptions{}); err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("stream_units %s: %v, want one line with %q", c.units, err, c.want)
		}
	}
}
