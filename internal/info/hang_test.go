package info

import (
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
)

// TestHang: info names the launch that hung by the line that made it, and the other streams'
// unfinished launches by theirs, from the recording's callstacks, as the agent did on stderr.
func TestHang(t *testing.T) {
	r := summarizeVariant(t, testrec.Hang)
	h := r.Processes[0].Hang
	if h == nil || h.Launch != testrec.HangLaunch || !h.Killed || h.TimeoutS != 5 || len(h.Report) != 2 {
		t.Fatalf("hang %+v, want launch %d reported with one other stream, killed after 5s", h, testrec.HangLaunch)
	}
	for i, want := range []string{"has not finished on the GPU after 5s; launched at " + testrec.HangLine + "; 1 more unfinished launch",
		"stream 21), made 5.5s before; launched at " + testrec.HangGemmLine} {
		if !strings.Contains(h.Report[i], want) {
			t.Errorf("report line %d %q lacks %q", i, h.Report[i], want)
		}
	}
	var text strings.Builder
	if err := r.WriteTable(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "  !! HANG at +") || !strings.Contains(text.String(), "gpurr ended the program (--hang-kill):\n       "+h.Report[0]+"\n       "+h.Report[1]+"\n") {
		t.Errorf("info's text does not show the hang:\n%s", text.String())
	}
	// The log's entries of the hang are shown once, as the hang.
	if errs := r.Processes[0].Errors; len(errs) != 0 {
		t.Errorf("last errors %+v repeat the hang", errs[0])
	}
	if r.Processes[1].Hang != nil {
		t.Errorf("the whole rank hung: %+v", r.Processes[1].Hang)
	}
}
