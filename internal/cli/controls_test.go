package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// A crafted recording's strings (host, argv, kernel name, NVTX message, Python line, log) reach
// the terminal escaped, in every text output and in error lines: no ESC, BEL or CR, and no
// line of the recording's making.
func TestControlsEscaped(t *testing.T) {
	rec := testrec.OpenBatches(t, testrec.HostileBatches()...).Processes[0].Dir
	for _, args := range [][]string{
		{"info", rec},
		{"query", rec, "SELECT l.seq, k.name, l.range, l.python_line FROM launches l JOIN kernels k USING (process, kernel_id)"},
		{"query", rec, "SELECT message FROM log"},
		{"query", rec, "SELECT * FROM \"no\x1b]0;owned\x07\r\ngpurr: FORGED\""}, // an error naming what it was given
	} {
		var stdout, stderr bytes.Buffer
		run(args, &stdout, &stderr)
		for name, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
			if strings.ContainsAny(out, "\x1b\x07\r") || strings.Contains(out, "\ngpurr: FORGED") {
				t.Errorf("gpurr %s: controls reach %s:\n%q", args[0], name, out)
			}
		}
		if !strings.Contains(stdout.String()+stderr.String(), `\x1b]0;owned\a\r\ngpurr: FORGED`) {
			t.Errorf("gpurr %s: the hostile text is not shown escaped:\n%s%s", args[0], stdout.String(), stderr.String())
		}
	}
}

// record's summary names the processes it recorded, whose names are their host names.
func TestRecordSummaryEscapesControls(t *testing.T) {
	dir := t.TempDir()
	w, err := recording.Create(dir, "box"+testrec.Hostile+"-1", testrec.HostileBatches()[0])
	if err != nil {
		t.Fatal(err)
	}
	w.Close() // no End record: the process is incomplete, and the summary says which
	var out bytes.Buffer
	summarizeRecording(&out, dir)
	if s := out.String(); strings.ContainsAny(s, "\x1b\x07\r") || strings.Contains(s, "\ngpurr: FORGED") || !strings.Contains(s, `box\x1b]0;owned\a`) {
		t.Errorf("record's summary:\n%q", s)
	}
}
