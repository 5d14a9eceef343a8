package manifest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// A recording with write sets (format 1.11): the manifest says how it carried regions, and a
// region carried from a lost state is written unknown, without hashes, rather than failing as a
// damaged record; verify compares the launch that holds it with nothing, and finds the others.
func TestWriteSetsManifest(t *testing.T) {
	open := func(v testrec.Variant) *recording.Set {
		dir := filepath.Join(t.TempDir(), string(v))
		if err := testrec.Write(dir, v); err != nil {
			t.Fatal(err)
		}
		set, err := recording.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	good, diverged := open(testrec.WriteSets), open(testrec.WriteSetsDiverged)
	var buf bytes.Buffer
	sum, err := Write(&buf, good)
	if err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	if sum.Launches != 9 || sum.States != 8 {
		t.Errorf("summary %+v", sum)
	}
	if !strings.Contains(text, `"complete":true,"write_sets":"learned","kernels":`) ||
		!strings.Contains(text, `{"seq":9,"stream":0,"identity":"`) ||
		!strings.Contains(text, `"after":{"snapshot":false,"regions":[{"size":131072,"unknown":true,"chunks":[]},{"size":65536,"hash":"`) {
		t.Errorf("manifest:\n%s", text)
	}
	path := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := Open(path, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e := m.Processes[0]
	if e.Process.WriteSets != "learned" || e.Run.WriteSets != "learned" {
		t.Errorf("write sets %q, run's %q", e.Process.WriteSets, e.Run.WriteSets)
	}
	for _, l := range e.Run.Launches {
		if l.Unknown != (l.Seq == testrec.WriteSetsUnknown) {
			t.Errorf("launch %d: unknown %v", l.Seq, l.Unknown)
		}
	}

	verify := func(set *recording.Set, all bool) (*diff.Result, []uint64) {
		run, err := diff.Scan(set.Processes[0])
		if err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		res, err := m.Verify(run, e, Options{All: all}, func(mm *Mismatch) error {
			seqs = append(seqs, mm.Actual.Launch.GetSeq())
			for _, r := range mm.Regions {
				if r.Index != 1 || r.UnknownA || r.UnknownB || r.FirstChunk != 0 {
					t.Errorf("launch %d: region %+v", mm.Actual.Launch.GetSeq(), r.RegionDiff)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return res, seqs
	}
	if res, seqs := verify(good, true); res.First != nil || res.Compared != 7 || res.Unknown != 1 || seqs != nil {
		t.Errorf("the recording against its own manifest: %+v, mismatches %v", res, seqs)
	}
	// Launches 6, 7 and 9 differ in A's region; 9 is not compared.
	if res, seqs := verify(diverged, true); res.Differ != 2 || res.Unknown != 1 || len(seqs) != 2 || seqs[0] != 6 || seqs[1] != 7 {
		t.Errorf("the diverged recording: %+v, mismatches %v", res, seqs)
	}

	bad := strings.Replace(text, `"unknown":true,"chunks":[]`, `"unknown":true,"hash":"00000000000000000000000000000000","chunks":[]`, 1)
	if _, err := read(strings.NewReader(bad), ReadOptions{}); err == nil || !strings.Contains(err.Error(), "launch 9 region 0: unknown, but with hashes") {
		t.Errorf("an unknown region with a hash: %v", err)
	}
}
