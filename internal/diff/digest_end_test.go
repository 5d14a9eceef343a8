package diff

import (
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/info"
)

// The digest the agent takes at exit, of the last step, is named one past the last launch
// call: the report says it was taken as the runs ended, not before a launch that never was.
func TestDigestAtEnd(t *testing.T) {
	run := &DigestRun{Launches: 24, lines: map[uint64]string{}, stacks: map[uint64]uint64{}}
	alloc := func(h byte) []DigestAlloc {
		return []DigestAlloc{{ID: 1, Key: AllocKey{Size: 64}, Hash: [16]byte{h}}}
	}
	last := compareStep(run, &StepDigest{Step: 5, Seq: 25, Allocs: alloc(1)}, &StepDigest{Step: 5, Seq: 25, Allocs: alloc(2)})
	mid := compareStep(run, &StepDigest{Step: 2, Seq: 13, Allocs: alloc(1)}, &StepDigest{Step: 2, Seq: 13, Allocs: alloc(2)})
	if !last.AtEnd || mid.AtEnd || len(last.Allocs) != 1 {
		t.Fatalf("at end: last %v, mid %v; differing %d", last.AtEnd, mid.AtEnd, len(last.Allocs))
	}
	var out strings.Builder
	c := &DigestComparison{Compared: 6, Agreed: 4, First: last}
	c.write(info.NewTextWriter(&out), "a vs b")
	if !strings.Contains(out.String(), "digest   as the runs ended (the last step's)") {
		t.Errorf("report:\n%s", out.String())
	}
}
