package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/replay"
	"github.com/gpurr/gpurr/recording"
)

// Comparing two recordings as gpurr diff does: diff compares the runs it is given, bisect
// the runs it makes.

// diffOptions are diff's flags, which bisect sets for its comparisons too.
type diffOptions struct {
	format         string
	replay         int
	includeLibrary bool // compare communication libraries' own memory too (diff.ScanOptions)
	includeCompile bool // align the launches of XLA's compilation and autotuning too (diff.ScanOptions)
	dtype          string
	elements       int
	unmatched      int
	frames         int
}

// compareRecordings compares two recordings pair of processes by pair (diff.Compare) and
// returns the report; with write, each pair's text is written as soon as it is compared, and
// the lines that follow the pairs at the end. Pairs that could not be read are in it
// (Report.Unread), not an error.
func compareRecordings(cmd *cobra.Command, o diffOptions, pathA, pathB string, write bool) (*diff.Report, error) {
	out := cmd.OutOrStdout()
	if o.elements < 0 || o.unmatched < 0 || o.frames < 0 {
		return nil, usageErrorf("diff: --elements, --unmatched and --frames take a count of 0 or more")
	}
	if o.replay > 0 {
		// Said before the recordings are read: replaying needs a GPU here.
		if err := cuda.Init(); err != nil {
			return nil, usageErrorf("diff: --replay runs the launch again on a GPU, and this machine has none usable: %v", err)
		}
	}
	co := diff.CompareOptions{Options: diff.Options{Elements: o.elements, Frames: o.frames}, IncludeLibrary: o.includeLibrary, IncludeCompile: o.includeCompile,
		Unmatched: o.unmatched, Warn: func(w string) { warnf(cmd, "%s", w) }}
	if o.dtype != "" {
		var err error
		if co.Dtype, err = dtype.Parse(o.dtype); err != nil {
			return nil, usageErrorf("diff: --dtype: %v", err)
		}
	}
	setA, err := openRecording(cmd, pathA)
	if err != nil {
		return nil, err
	}
	setB, err := openRecording(cmd, pathB)
	if err != nil {
		return nil, err
	}
	// The errors of writing and of replaying are the command's as they are; the comparison's
	// own are input errors.
	var given error
	if o.replay > 0 {
		co.Replay = func(p *recording.Process, seq uint64) (*diff.Replayed, error) {
			r, err := replayDivergence(p, seq, o.replay)
			given = err
			return r, err
		}
	}
	if write {
		co.Compared = func(pr *diff.PairReport) error {
			given = pr.WriteText(out)
			return given
		}
	}
	report, err := diff.Compare(pathA, setA, pathB, setB, co)
	switch {
	case err != nil && errors.Is(err, given):
		return nil, err
	case err != nil:
		return nil, usageErrorf("diff: %v", err)
	}
	if write {
		if err := report.WriteTrailer(out); err != nil {
			return nil, err
		}
	}
	return report, nil
}

// replayDivergence replays launch seq of run A n times from its snapshot before it
// (internal/replay.Repeat).
func replayDivergence(p *recording.Process, seq uint64, n int) (*diff.Replayed, error) {
	src, err := replay.Open(p)
	if err != nil {
		return nil, usageErrorf("diff: --replay: %v", err)
	}
	defer src.Close()
	c, err := src.Case(seq)
	if err != nil {
		return nil, usageErrorf("diff: --replay needs A's snapshots of launch %d: %v", seq, err)
	}
	r, err := replay.Repeat(c, n, replay.Options{Device: -1})
	if err != nil {
		return nil, &exitError{code: exitFailure, err: fmt.Errorf("diff: --replay: launch %d of %s: %v", seq, p.Name, err)}
	}
	return r, nil
}
