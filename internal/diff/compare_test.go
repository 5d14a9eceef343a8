package diff

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
)

// Compare pairs the processes of two recordings, gives each pair to Compared as soon as it is
// compared and its warnings to Warn; an error of Compared ends it, as it is.
func TestCompareCallbacks(t *testing.T) {
	set := testrec.Open(t, testrec.Good)
	var warnings, compared []string
	o := CompareOptions{Warn: func(w string) { warnings = append(warnings, w) },
		Compared: func(p *PairReport) error { compared = append(compared, p.Label()); return nil }}
	report, err := Compare("A", set, "B", set, o)
	if err != nil || len(report.Pairs) != len(set.Processes) || report.Parted != 0 || len(compared) != len(set.Processes) {
		t.Fatalf("report %+v, compared %q: %v", report, compared, err)
	}
	if !slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, "was recorded without memory capture") }) {
		t.Errorf("warnings %q lack the one of a run without memory capture", warnings)
	}
	stop := errors.New("the disk is full")
	compared = nil
	o.Compared = func(p *PairReport) error { compared = append(compared, p.Label()); return stop }
	if _, err := Compare("A", set, "B", set, o); err != stop || len(compared) != 1 {
		t.Errorf("Compared failing: %v after %q; want its error after the first pair", err, compared)
	}
}
