package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
)

// newRec writes a recording with write into a new folder and returns its path.
func newRec(t *testing.T, write func(dir string) error) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rec")
	if err := write(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// variantRec writes the synthetic recording of two ranks (testrec.Variants).
func variantRec(t *testing.T, v testrec.Variant) string {
	t.Helper()
	return newRec(t, func(dir string) error { return testrec.Write(dir, v) })
}

// SQL that opens with a "--" comment is SQL, not an unknown flag, and flags after it count.
func TestQuerySQLComment(t *testing.T) {
	rec := variantRec(t, testrec.Good)
	for _, args := range [][]string{
		{"query", rec, "-- launches of every rank\nSELECT 7 AS n", "--format", "csv"},
		{"query", "--format", "csv", rec, "--no blank after the dashes\nSELECT 7 AS n"},
		{"query", "--format", "csv", rec, "--", "--x=1\nSELECT 7 AS n"},
	} {
		code, out, errs := runCLI(args...)
		if code != 0 || out != "n\n7\n" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
	if code, _, errs := runCLI("query", rec, "--bogus"); code != exitUsage || !strings.Contains(errs, "unknown flag: --bogus") {
		t.Errorf("an unknown flag: exit %d, stderr %q", code, errs)
	}
}

// Flags left unset by default (-1 inside) show no "(default -1)" in help.
func TestHelpHidesUnsetDefaults(t *testing.T) {
	for verb, flag := range map[string]string{"replay": "--smem", "tune": "--device", "race": "--device", "probe": "--device", "rewind": "--region"} {
		code, out, _ := runCLI(verb, "--help")
		if code != 0 || !strings.Contains(out, flag+" int") || strings.Contains(out, "(default -1)") {
			t.Errorf("%s --help: exit %d, %s shown with a sentinel default or not at all:\n%s", verb, code, flag, out)
		}
	}
}

// Errors reading a damaged chunk pack name the file and what is wrong with it, not a Go package.
func TestDamagedPackNamesNoPackage(t *testing.T) {
	rec := writeRun(t, "snapshot", trainRun(1.5, false))
	pack := filepath.Join(rec, "box-7", "chunks", "pack-000001.pack")
	f, err := os.OpenFile(pack, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("garbage"), 40); err != nil { // inside the first entry's header
		t.Fatal(err)
	}
	f.Close()
	for _, args := range [][]string{
		{"rewind", rec, "--launch", "1", "--after", "--region", "0", "-o", filepath.Join(t.TempDir(), "x.bin")},
		{"nan", rec},
	} {
		code, _, errs := runCLI(args...)
		if code != exitUsage || !strings.Contains(errs, pack+": entry at offset 16") || strings.Contains(errs, "chunkstore") {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming %s and no Go package", args[0], code, errs, pack)
		}
	}
}

// An unknown --process lists the processes the recording holds.
func TestUnknownProcessListsThem(t *testing.T) {
	rec := variantRec(t, testrec.Good)
	code, _, errs := runCLI("nan", rec, "--process", "nope")
	if want := `has no process "nope"; it holds gpu-box-4242, gpu-box-4243 (--process takes a name, a pid or a rank)`; code != exitUsage || !strings.Contains(errs, want) {
		t.Errorf("exit %d, stderr %q; want %q", code, errs, want)
	}
}

// A manifest made from a recording that lost a memory state warns, in one line, that it
// promises nothing for what is missing; one made from a whole recording says nothing more.
func TestManifestOfLossyRecordingWarns(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.json")
	code, _, errs := runCLI("manifest", variantRec(t, testrec.WriteSets), "-o", out)
	want := "gpurr: manifest: warning: gpu-box-4242: lost or failed while recording, so missing here: memory_states_lost 1 (gpurr info says more); verify cannot check what is missing\n"
	if code != 0 || !strings.HasSuffix(errs, want) || strings.Count(errs, "warning") != 1 {
		t.Errorf("lossy: exit %d, stderr %q; want exit 0 ending %q", code, errs, want)
	}
	code, _, errs = runCLI("manifest", variantRec(t, testrec.Autograd), "-o", out+"2")
	if code != 0 || strings.Contains(errs, "warning") {
		t.Errorf("whole: exit %d, stderr %q", code, errs)
	}
}

// When no process of one side pairs with one of the other, diff and verify name both sides'
// processes and how they pair.
func TestNoPairsNamesProcesses(t *testing.T) {
	ranks, one := variantRec(t, testrec.Good), writeRun(t, "hash", trainRun(1.5, false))
	m := filepath.Join(t.TempDir(), "m.json")
	if code, _, errs := runCLI("manifest", one, "-o", m); code != 0 {
		t.Fatalf("manifest: exit %d: %s", code, errs)
	}
	for _, c := range []struct{ args []string }{
		{[]string{"diff", ranks, one}},
		{[]string{"verify", ranks, "--manifest", m}},
	} {
		want := c.args[0] + ": no processes to compare: " + ranks + " has gpu-box-4242 (rank 0), gpu-box-4243 (rank 1); "
		code, _, errs := runCLI(c.args...)
		if code != exitUsage || !strings.Contains(errs, want) || !strings.Contains(errs, "box-7 (no rank) (processes pair by torchrun rank") {
			t.Errorf("%s: exit %d, stderr %q; want %q and box-7", c.args[0], code, errs, want)
		}
	}
}

// tune checks its output files before the search: an existing one is refused without --force,
// before any GPU work, and a run that fails later leaves it as it was.
func TestTuneChecksOutputsFirst(t *testing.T) {
	rec, dir := writeReplayable(t), t.TempDir()
	csv, chart := filepath.Join(dir, "t.csv"), filepath.Join(dir, "t.svg")
	if err := os.WriteFile(csv, []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"tune", rec, "--launch", "2", "--block", "64,128", "--csv", csv, "--chart", chart}
	code, _, errs := runCLI(args...)
	if want := "tune: --csv " + csv + " exists: --force replaces it"; code != exitUsage || !strings.Contains(errs, want) {
		t.Errorf("existing --csv: exit %d, stderr %q; want %q", code, errs, want)
	}
	code, _, errs = runCLI(append(args[:len(args)-2], "--chart", csv)...)
	if code != exitUsage || !strings.Contains(errs, "--csv and --chart are both") {
		t.Errorf("the same file twice: exit %d, stderr %q", code, errs)
	}
	runCLI(append(args, "--force")...) // no GPU here: it fails after the check
	if b, err := os.ReadFile(csv); err != nil || string(b) != "mine\n" {
		t.Errorf("a tune that failed changed --csv: %q %v", b, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("a tune that failed left %d files in %s, want only t.csv", len(entries), dir)
	}
}
