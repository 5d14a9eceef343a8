package agent

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/gpurr/gpurr/internal/agentcfg"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Two processes of one recording can choose the same directory name: containers on one host
// with its network (docker --network host, pods with hostNetwork) share its host name, and
// number their pids from 1 in PID namespaces of their own. Each recorder here is such a
// process: same host, same pid. The second must be recorded whole in a directory of its own,
// and the first's files left as they were; before, the second failed to create its events
// file in the first's directory and went unrecorded.
func TestRecorderNameTaken(t *testing.T) {
	out := t.TempDir()
	cfg := agentcfg.Config{Callstack: agentcfg.CallstackAuto}
	first, err := newRecorder(out, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first.closeFiles)
	if err := first.w.Write(&pb.Batch{Process: first.info}); err != nil {
		t.Fatal(err)
	}
	first.logf("info", "first")
	first.writeFrame()
	before := dirFiles(t, first.w.Dir())

	second, err := newRecorder(out, cfg)
	if err != nil {
		t.Fatalf("a second process of the same host and pid: %v", err)
	}
	t.Cleanup(second.closeFiles)
	if second.w.Dir() == first.w.Dir() {
		t.Fatalf("both processes write %s", first.w.Dir())
	}
	if err := second.w.Write(&pb.Batch{Process: second.info}); err != nil {
		t.Fatal(err)
	}
	second.logf("info", "second")
	second.close("exit")
	if after := dirFiles(t, first.w.Dir()); !maps.Equal(before, after) {
		t.Errorf("the second process changed the first's directory: %q, then %q", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	first.close("exit")

	set, err := recording.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Processes) != 2 || len(set.Damaged) != 0 {
		t.Fatalf("%d processes, damaged %v; want 2", len(set.Processes), set.Damaged)
	}
	want := processDirName(first.info)
	if set.Processes[0].Name != want || set.Processes[1].Name != want+"+2" {
		t.Errorf("processes %s, %s; want %s, %s+2", set.Processes[0].Name, set.Processes[1].Name, want, want)
	}
	for i, msg := range []string{"first", "second"} {
		p := set.Processes[i]
		d, err := p.Load()
		if err != nil {
			t.Fatal(err)
		}
		if !d.Complete() || d.Truncated || len(d.Log) != 1 || d.Log[0].Message != msg {
			t.Errorf("%s: complete %v, truncated %v, log %v; want whole, with its message %q", p.Name, d.Complete(), d.Truncated, d.Log, msg)
		}
		if got := set.Process(p.Name); got != p {
			t.Errorf("--process %s finds %v", p.Name, got)
		}
	}
}

// Processes that start together (the ranks of a job) race for the name: each gets one of
// its own.
func TestRecordersRaceForName(t *testing.T) {
	out := t.TempDir()
	const n = 16
	dirs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := newRecorder(out, agentcfg.Config{Callstack: agentcfg.CallstackAuto})
			if err != nil {
				t.Error(err)
				return
			}
			dirs[i] = r.w.Dir()
			r.close("exit")
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if seen[d] {
			t.Errorf("two recorders write %s", d)
		}
		seen[d] = true
	}
	if entries, err := os.ReadDir(out); err != nil || len(entries) != n {
		t.Errorf("%d entries in the recording (%v), want %d", len(entries), err, n)
	}
}

// dirFiles reads every file under dir, by its path inside it.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
