package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// memoryManifest writes testrec's memory recording (rank 0 snapshot mode
// with a lost state, rank 1 hash mode) and its manifest.
func memoryManifest(t testing.TB) (*recording.Set, []byte) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mem")
	if err := testrec.Write(dir, testrec.Memory); err != nil {
		t.Fatal(err)
	}
	set, err := recording.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := Write(&buf, set); err != nil {
		t.Fatal(err)
	}
	return set, buf.Bytes()
}

func TestWriteRead(t *testing.T) {
	set, text := memoryManifest(t)
	var again bytes.Buffer
	sum, err := Write(&again, set)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(text, again.Bytes()) {
		t.Errorf("two manifests of one recording differ")
	}
	var whole map[string]any
	if err := json.Unmarshal(text, &whole); err != nil {
		t.Fatalf("a manifest is one JSON document: %v", err)
	}

	m, err := read(bytes.NewReader(text), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Processes) != len(set.Processes) || sum.Processes != len(set.Processes) {
		t.Fatalf("%d processes read, %d written, want %d", len(m.Processes), sum.Processes, len(set.Processes))
	}
	launches, states := 0, 0
	for i, e := range m.Processes {
		run, err := diff.Scan(set.Processes[i])
		if err != nil {
			t.Fatal(err)
		}
		if e.Process.Name != set.Processes[i].Name || e.Process.Memory != run.Mode || len(e.Run.Launches) != len(run.Launches) {
			t.Fatalf("process %d: %+v, want %s %s with %d launches", i, e.Process, set.Processes[i].Name, run.Mode, len(run.Launches))
		}
		// The manifest reduces to what the recording reduces to.
		for k, want := range run.Launches {
			got := e.Run.Launches[k]
			if got.Seq != want.Seq || e.Run.Identity(got) != run.Identity(want) || got.Stream != want.Stream || got.HasState != want.HasState || got.State != want.State {
				t.Errorf("%s launch %d: manifest %+v, recording %+v", e.Process.Name, want.Seq, got, want)
			}
			if got.HasState {
				states++
			}
		}
		launches += len(run.Launches)
		res := diff.Align(run, e.Run)
		if res.First != nil || res.Compared == 0 {
			t.Errorf("%s: the recording does not match its own manifest: %+v", e.Process.Name, res)
		}
	}
	if sum.Launches != launches || sum.States != states || sum.Snapshots == 0 || sum.Snapshots >= sum.States {
		t.Errorf("summary %+v, want %d launches, %d states, some but not all snapshots", sum, launches, states)
	}

	// Each launch line reads again from its span.
	r, err := NewReader(bytes.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := r.NextProcess(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		for {
			l, span, err := r.NextLaunch()
			if err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			again, err := ReadLaunchAt(bytes.NewReader(text), span)
			if err != nil || again.Seq != l.Seq || again.ID() != l.ID() || (again.After == nil) != (l.After == nil) {
				t.Fatalf("launch %d read again at %+v: %+v, %v", l.Seq, span, again, err)
			}
		}
	}
}

func TestReadErrors(t *testing.T) {
	_, text := memoryManifest(t)
	s := string(text)
	firstLaunch := s[strings.Index(s, `{"seq":1,`):]
	firstLaunch = strings.TrimSuffix(firstLaunch[:strings.Index(firstLaunch, "\n")], ",")
	id := strings.Index(firstLaunch, `"identity":"`) + len(`"identity":"`)
	otherKernel := firstLaunch[:id] + "ffffffffffffffff" + firstLaunch[id+16:]
	for _, c := range []struct{ name, text, want string }{
		{"empty", "", "not a gpurr manifest"},
		{"an array", "[1,2]", "not a gpurr manifest"},
		{"other format", `{"format":"x","version":1,"processes":[]}`, `not a gpurr manifest (format "x"`},
		{"newer", strings.Replace(s, `"version":1`, `"version":2`, 1), "version 2; this gpurr reads version 1"},
		{"other hash", strings.Replace(s, `"hash":"gpurr-h128"`, `"hash":"sha1"`, 1), `hash "sha1"`},
		{"no processes", `{"format":"gpurr-manifest","version":1,"hash":"gpurr-h128"}`, "holds no processes"},
		{"other JSON", `{"a":1}`, `not a gpurr manifest (no "format": "gpurr-manifest"`},
		{"zero processes", `{"format":"gpurr-manifest","version":1,"hash":"gpurr-h128","processes":[]}`, "holds no processes"},
		{"cut short", s[:len(s)/2], "cut short?"},
		{"trailing", s + "{}", "more after the manifest's end"},
		{"bad hash", strings.Replace(s, `"hash":"`, `"hash":"zz`, 2), `hash "zz`},
		{"seq backwards", strings.Replace(s, firstLaunch, firstLaunch+",\n"+firstLaunch, 1), "launch 1 after launch 1 (want ascending seq)"},
		{"stream skipped", strings.Replace(s, `{"seq":1,"stream":0`, `{"seq":1,"stream":3`, 1), "stream 3 before stream 0"},
		{"unknown kernel", strings.Replace(s, firstLaunch, otherKernel, 1), "kernel ffffffffffffffff is not in the process's kernels"},
		{"stream type", strings.Replace(s, `"stream":0`, `"stream":"0"`, 1), `"stream" is string, want int`},
		{"launches not last", strings.Replace(s, "\n]}", "\n],\"x\":1}", 1), `"x" after its launches`},
		{"no memory", strings.Replace(s, `"memory":"snapshot"`, `"memory":""`, 1), `memory "", want hash or snapshot`},
	} {
		_, err := read(strings.NewReader(c.text), ReadOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line with %q", c.name, err, c.want)
		}
	}
	// Fields added within version 1 are skipped.
	extra := strings.Replace(s, `"version":1,`, `"version":1,"made_by":{"gpurr":"1.9"},`, 1)
	extra = strings.Replace(extra, `"complete":`, `"note":[1,2],"complete":`, -1)
	if _, err := read(strings.NewReader(extra), ReadOptions{}); err != nil {
		t.Errorf("unknown fields: %v", err)
	}
}

// FuzzRead: any bytes given as a manifest yield a manifest or a one-line
// error, and every launch read reads again the same from its span.
func FuzzRead(f *testing.F) {
	_, text := memoryManifest(f)
	f.Add(text)
	f.Add([]byte(`{"format":"gpurr-manifest","version":1,"hash":"gpurr-h128","processes":[{"process":"p","memory":"hash","chunk_bytes":1,"kernels":[{"identity":"0000000000000001"}],"launches":[{"seq":1,"stream":0,"identity":"0000000000000001","after":{"regions":[{"hash":"00000000000000000000000000000000","chunks":[]}]}}]}]}`))
	f.Add([]byte(`{"format":"gpurr-manifest","version":1,"hash":"gpurr-h128","processes":[{"process":"p","memory":"hash","chunk_bytes":1,"write_sets":"learned","kernels":[{"identity":"0000000000000001"}],"launches":[{"seq":1,"stream":0,"identity":"0000000000000001","after":{"regions":[{"size":8,"unknown":true,"chunks":[]}]}}]}]}`))
	f.Add([]byte(`{"format":"gpurr-manifest","version":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := read(bytes.NewReader(b), ReadOptions{})
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		for _, e := range m.Processes {
			for i, l := range e.Run.Launches {
				again, err := ReadLaunchAt(bytes.NewReader(b), e.span(i))
				if err != nil || again.Seq != l.Seq || again.ID() != e.Run.Identity(l) || (again.After != nil) != l.HasState {
					t.Fatalf("launch %d reads again as %+v, %v", l.Seq, again, err)
				}
			}
		}
	})
}

func TestOpenNames(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(p, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(p, ReadOptions{})
	if err == nil || !strings.HasPrefix(err.Error(), p+": manifest:") {
		t.Errorf("Open of a bad file: %v, want the path first", err)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "none.json"), ReadOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open of a missing file: %v", err)
	}
}
