package cli

import (
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
