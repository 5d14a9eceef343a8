package demo

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/nanscan"
	"github.com/gpurr/gpurr/recording"
)

// The script is what the CLI says of it: run b's lr one ulp above run a's, and the NaN at
// TrainNaNStep.
func TestTrainScript(t *testing.T) {
	s := string(TrainScript)
	for _, want := range []string{
		fmt.Sprintf("NAN_STEP = %d\n", TrainNaNStep), "lr = LR if run == \"a\" else next_float32(LR)",
		"torch.log(pred).mean()  # MARK: nan", "foreach=True",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("train.py lacks %q", want)
		}
	}
	// gpurr demo -o DIR writes it before anything else made DIR.
	dir := filepath.Join(t.TempDir(), "out")
	path, err := WriteTrainScript(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, TrainScript) || path != filepath.Join(dir, TrainScriptName) {
		t.Errorf("WriteTrainScript wrote %s: %d bytes, %v", path, len(got), err)
	}
}

func zipOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := z.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// extractZip writes the archive's files under dir, and nothing outside it.
func TestExtractZip(t *testing.T) {
	fsys := fstest.MapFS{"train.zip": {Data: zipOf(t, map[string]string{
		"a/recording.json": "{}", "b/vm-1/events.gpurr": "events", "../outside": "no",
	})}}
	root := t.TempDir()
	dir := filepath.Join(root, "story")
	if err := extractZip(fsys, "train.zip", dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a/recording.json": "{}", "b/vm-1/events.gpurr": "events"} {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "outside")); err == nil {
		t.Error("an entry named ../outside was written outside the folder")
	}
	if err := extractZip(fsys, "train.zip", dir); err == nil {
		t.Error("extracting over the recordings succeeded")
	}
	if err := extractZip(fstest.MapFS{"train.zip": {Data: []byte("not a zip")}}, "train.zip", t.TempDir()); err == nil {
		t.Error("a damaged archive extracted")
	}
}

// TestTrainBundled checks the training story's recordings, when this build has them (made on
// a GPU by bundled/regen.sh): each run is one process recorded in hash mode with NaN counted
// as f32; launches have Python lines, backward launches their forward line, and run a holds a
// NaN from step TrainNaNStep on.
func TestTrainBundled(t *testing.T) {
	if !HasTrain() {
		if err := ExtractTrain(t.TempDir()); !errors.Is(err, ErrNoBundled) {
			t.Fatalf("ExtractTrain without recordings = %v", err)
		}
		t.Skip("no bundled training story in this build: internal/demo/bundled/regen.sh records it on a GPU machine")
	}
	dir := t.TempDir()
	if err := ExtractTrain(dir); err != nil {
		t.Fatal(err)
	}
	for _, run := range TrainRuns {
		set, err := recording.Open(filepath.Join(dir, run))
		if err != nil {
			t.Fatal(err)
		}
		if len(set.Processes) != 1 {
			t.Fatalf("run %s: %d processes, want 1", run, len(set.Processes))
		}
		d, err := set.Processes[0].Load()
		if err != nil {
			t.Fatal(err)
		}
		if m := d.Process.GetMemory(); m.GetMode() != recording.MemoryHash || strings.Join(m.GetNanScan(), ",") != "f32" {
			t.Errorf("run %s: memory %q, NaN counted as %v; want hash mode, f32", run, m.GetMode(), m.GetNanScan())
		}
		inScript := map[uint64]bool{}
		for _, cs := range d.Callstacks {
			for _, f := range cs.GetFrames() {
				if strings.HasSuffix(f.GetFile(), "/"+TrainScriptName) {
					inScript[cs.GetId()] = true
				}
			}
		}
		lines, backward, linked := 0, 0, 0
		for _, l := range d.Launches {
			if inScript[l.GetCallstackId()] {
				lines++
			}
			if ag := l.GetAutograd(); ag.GetBackwardNode() != "" {
				backward++
				if ag.GetForwardCallstackId() != 0 {
					linked++
				}
			}
		}
		if lines == 0 || backward == 0 || linked == 0 {
			t.Errorf("run %s: of %d launches, %d at a line of train.py, %d in backward, %d of them linked to their forward line",
				run, len(d.Launches), lines, backward, linked)
		}
		if run != TrainRuns[0] {
			continue
		}
		types, err := dtype.ParseList("f32")
		if err != nil {
			t.Fatal(err)
		}
		found, _, err := nanscan.Scan(set.Processes[0], types, nanscan.Options{})
		if err != nil || found == nil {
			t.Errorf("run a holds no NaN (%v)", err)
		}
	}
}
