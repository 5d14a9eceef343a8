package replay

import (
	"fmt"

	"github.com/gpurr/gpurr/internal/diff"
)

// Repeat replays launch c, run A's where two runs part ways, n times (at least once) from its
// recorded inputs, with o, and compares the outputs with each other and with the recording.
func Repeat(c *Case, n int, o Options) (*diff.Replayed, error) {
	s, err := NewSession(c, o)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	r := &diff.Replayed{Runs: max(n, 1)}
	var distinct []*Result
	for range r.Runs {
		res, err := s.Run(c.Recorded(), 1, Check{})
		if err != nil {
			return nil, err
		}
		if res.Identical() {
			r.AsA++
		}
		seen := false
		for _, d := range distinct {
			seen = seen || sameOutputs(d, res)
		}
		if !seen {
			distinct = append(distinct, res)
		}
	}
	r.Distinct = len(distinct)
	switch {
	case r.Distinct > 1:
		r.Kind = "nondeterministic"
		r.Verdict = fmt.Sprintf("%d replays from A's inputs gave %d different outputs: the kernel is nondeterministic", r.Runs, r.Distinct)
	case r.AsA == r.Runs:
		r.Kind = "inputs"
		r.Verdict = fmt.Sprintf("%d replays from A's inputs all gave A's output: the kernel is deterministic on them, so B's inputs differ", r.Runs)
	default:
		r.Kind = "unrecorded"
		r.Verdict = fmt.Sprintf("%d replays from A's inputs agree with each other but not with A's output: suspect an input gpurr did not record (memory reached through pointers in memory) or the hardware", r.Runs)
	}
	return r, nil
}
