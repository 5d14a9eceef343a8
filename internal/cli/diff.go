package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/replay"
	"github.com/gpurr/gpurr/recording"
)

type diffOptions struct {
	format         string
	replay         int
	includeLibrary bool // compare communication libraries' own memory too (diff.ScanOptions)
	dtype          string
	elements       int
	unmatched      int
	frames         int
}

func newDiffCmd() *cobra.Command {
	var o diffOptions
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Find the first kernel launch where two runs' device memory parts ways",
		Long: `diff aligns the kernel launches of two recordings of the same program
(process by process: by rank, else in order; stream by stream, streams by
the thread they belong to, threads by the order they were created; by kernel) and
reports the first launch after which a region of device memory differs: the
kernel, both launches, both callstacks down to the Python line, the regions
and the first differing chunk. With snapshots on both sides and --dtype, it
decodes the first differing elements. It says why the runs part ways there:
a scalar parameter that differs, a region whose state before the launch
differs, an NCCL collective, or the same inputs (a nondeterministic kernel).
Launches present in one run only (an extra warm-up) are skipped over and
listed. --format json writes one JSON document with all of it (docs/diff.md).
--replay N runs the launch N times on a GPU from A's snapshots before it: the
replays differ among themselves (a nondeterministic kernel), all give A's
output (B's inputs differ), or agree with each other but not with A (an
input gpurr did not record, or the hardware).

Comparing what the runs computed needs memory capture on both (gpurr record
--memory hash, or snapshot); without it diff warns and compares what they
launched: the first launch one run made and the other did not.
Exit status: 0 when the runs agree, 1 when they part ways, 2 on bad input.`,
		Example: `  gpurr record --memory hash -o run1 -- python train.py
  gpurr record --memory hash -o run2 -- python train.py
  gpurr diff run1 run2
  gpurr diff --dtype bf16 snap1 snap2`,
		Args: positional(2, 2, "two recordings"),
		RunE: func(cmd *cobra.Command, args []string) error { return runDiff(cmd, o, args[0], args[1]) },
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "text", "output format: text or json")
	completeValues(cmd, "format", "text", "json")
	dtypeVar(cmd, &o.dtype, "decode differing memory as one type: f32, f16, bf16, f64, i8, u8, i16, i32, u32 or i64 (needs snapshots on both sides)")
	f.IntVar(&o.elements, "elements", 8, "differing elements to show per region (with --dtype)")
	f.IntVar(&o.unmatched, "unmatched", 5, "launches present in one run only to list by name (all are counted)")
	f.IntVar(&o.frames, "frames", 6, "Python frames of each callstack to show, innermost first")
	f.BoolVar(&o.includeLibrary, "include-library", false, "compare communication libraries' own memory too (NCCL's channels and buffers), which differs from run to run by design and is left out")
	countVar(f, &o.replay, "replay", 0, 0, "replay the launch where the runs part ways this many times on a GPU from A's snapshots before it, to tell a nondeterministic kernel from inputs that differ")
	addStepRangeFlag(cmd)
	return cmd
}

func runDiff(cmd *cobra.Command, o diffOptions, pathA, pathB string) error {
	if err := checkFormat("diff", o.format, "text", "json"); err != nil {
		return err
	}
	text := o.format == "text"
	report, err := diffRecordings(cmd, o, pathA, pathB, text)
	if err != nil {
		return err
	}
	if !text {
		report.Warnings = givenWarnings(cmd)
		if err := report.WriteJSON(cmd.OutOrStdout()); err != nil {
			return err
		}
	}
	if len(report.Unread) > 0 {
		return usageErrorf("diff: %s could not be read (%s); the others are compared above", info.Count(len(report.Unread), "pair"), fewNames(report.Unread))
	}
	if report.Parted > 0 {
		return exitWith(exitFound)
	}
	return nil
}

// diffRecordings compares two recordings pair of processes by pair and returns the report;
// with write, each pair's text is written as soon as it is compared, and the lines that
// follow the pairs at the end. Pairs that could not be read are in it (Report.Unread), not an
// error.
func diffRecordings(cmd *cobra.Command, o diffOptions, pathA, pathB string, write bool) (*diff.Report, error) {
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
	do := diff.Options{Elements: o.elements, Frames: o.frames}
	if o.dtype != "" {
		var err error
		if do.Dtype, err = dtype.Parse(o.dtype); err != nil {
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
	setA, setB = launching(cmd, setA), launching(cmd, setB)
	procsA, procsB := diff.Procs(setA), diff.Procs(setB)
	pairs, warnings := diff.PairProcesses(pathA, procsA, pathB, procsB)
	for _, w := range warnings {
		warnf(cmd, "%s", w)
	}
	if len(pairs) == 0 {
		return nil, usageErrorf("diff: %v", &diff.NoPairsError{WhereA: setA.Dir, A: procsA, WhereB: setB.Dir, B: procsB})
	}
	report := &diff.Report{A: pathA, B: pathB}
	runsA := map[*diff.PairReport]*diff.Run{} // the pairs that part ways, and their run A
	for _, ij := range pairs {
		pp := [2]*recording.Process{setA.Processes[ij[0]], setB.Processes[ij[1]]}
		pr, a, err := comparePair(cmd, o, do, pp, len(pairs) == 1)
		if err != nil {
			return nil, err
		}
		report.Pairs = append(report.Pairs, pr)
		switch pr.Outcome {
		case "not-compared":
			report.Unread = append(report.Unread, pr.Label())
		case "part-ways":
			report.Parted++
			runsA[pr] = a
		}
		if write {
			if err := pr.WriteText(out); err != nil {
				return nil, err
			}
		}
	}
	if timed := timedPairs(report); timed > 1 {
		// Ranks wait on each other's collectives: the rank that parted ways first in time is
		// where to look; the others may only have received its bad values.
		var first *diff.PairReport
		for _, p := range report.Pairs {
			if p.Outcome == "part-ways" && (p.Divergence != nil || p.Lone != nil) && (first == nil || wallNs(p) < wallNs(first)) {
				first = p
			}
		}
		report.FirstInTime = first.RankLabel()
		for _, p := range report.Pairs {
			f, err := diff.Follow(first, p, runsA[p])
			if err != nil {
				return nil, usageErrorf("diff: %v", err)
			}
			if f != nil {
				report.Followed = append(report.Followed, *f)
			}
		}
	}
	if write {
		if err := report.WriteTrailer(out); err != nil {
			return nil, err
		}
	}
	return report, nil
}

// timedPairs counts the pairs that part ways at a launch, which has a time (digests place a
// divergence in a step only).
func timedPairs(r *diff.Report) int {
	n := 0
	for _, p := range r.Pairs {
		if p.Outcome == "part-ways" && (p.Divergence != nil || p.Lone != nil) {
			n++
		}
	}
	return n
}

// wallNs is when the pair's run A made the launch where the runs part ways.
func wallNs(p *diff.PairReport) int64 {
	if p.Lone != nil {
		return p.Lone.WallNs
	}
	return p.Divergence.WallNs
}

// comparePair aligns a pair of processes and reports how they compare, with its run A. A
// process that cannot be read is a pair not compared, unless it is the only pair: an error.
func comparePair(cmd *cobra.Command, o diffOptions, do diff.Options, pp [2]*recording.Process, only bool) (*diff.PairReport, *diff.Run, error) {
	pr := &diff.PairReport{A: pp[0].Name, B: pp[1].Name, Rank: pp[0].Info.Rank, Memory: true}
	a, err := diff.ScanWith(pp[0], diff.ScanOptions{IncludeLibrary: o.includeLibrary})
	var b *diff.Run
	if err == nil {
		b, err = diff.ScanWith(pp[1], diff.ScanOptions{Launches: len(a.Launches), IncludeLibrary: o.includeLibrary})
	}
	if err != nil {
		// A damaged process does not hide the other pairs: they are compared, and the
		// command ends with this one's error.
		if only {
			return nil, nil, usageErrorf("diff: %v", err)
		}
		pr.Outcome, pr.Error = "not-compared", err.Error()
		return pr, nil, nil
	}
	for i, r := range []*diff.Run{a, b} {
		if i == 1 && r.Process.Dir == a.Process.Dir {
			break // a run compared with itself: its warnings once
		}
		if r.Mode == "" {
			pr.Memory = false // only what was launched is compared
			warnf(cmd, "%s was recorded without memory capture: comparing what the runs launched, not what they computed (record both with --memory hash for that)", r.Process.Dir)
		}
		if !r.Complete {
			warnf(cmd, "%s is incomplete; comparing what it holds", r.Process.Dir)
		}
		if none := r.Steps.NoneMatched(); none != "" {
			warnf(cmd, "%s: %s", r.Process.Dir, none)
		}
	}
	res := diff.Align(a, b)
	if n := max(a.AlikeThreads(), b.AlikeThreads()); n > 1 {
		pr.AlikeThreads = n
	}
	pr.Matched, pr.Compared, pr.NotCompared, pr.Differ = res.Matched, res.Compared, res.Unknown, res.Differ
	pr.OnlyA, pr.OnlyB = diff.NewUnmatched(a, res.OnlyA, o.unmatched), diff.NewUnmatched(b, res.OnlyB, o.unmatched)
	pr.Outcome = "agree"
	if !pr.Memory {
		if pr.Lone, err = diff.NewLoneLaunch(a, b, res, o.frames); err != nil {
			return nil, nil, usageErrorf("diff: %v", err)
		}
		if pr.Lone != nil {
			pr.Outcome = "part-ways"
		}
		return pr, a, nil
	}
	if len(a.Library) > 0 {
		pr.Library = a.Library
	}
	if pp[0].Info.GetMemory().GetDigests() && pp[1].Info.GetMemory().GetDigests() {
		if pr.Digests, err = compareDigests(pp); err != nil {
			return nil, nil, usageErrorf("diff: %v", err)
		}
	}
	if res.Compared == 0 && pr.Digests != nil {
		if pr.Digests.First != nil {
			pr.Outcome = "part-ways"
		}
		if pr.Digests.Compared == 0 {
			return nil, nil, usageErrorf("diff: %s and %s: no step digested on both sides (a program that went through no training step: record with --step-every N or --step-range REGEX)", pp[0].Name, pp[1].Name)
		}
		return pr, a, nil
	}
	if res.Compared == 0 {
		return nil, nil, usageErrorf("diff: %s and %s: no matched launch has memory states on both sides (%d matched)", pp[0].Name, pp[1].Name, res.Matched)
	}
	firstA, firstB := uint64(0), uint64(0)
	if res.First != nil {
		pr.Outcome = "part-ways"
		if pr.Divergence, err = diff.NewDivergence(a, b, res, do); err != nil {
			return nil, nil, usageErrorf("diff: %v", err)
		}
		firstA, firstB = pr.Divergence.SeqA, pr.Divergence.SeqB
		if o.replay > 0 {
			if pr.Divergence.Replay, err = replayDivergence(a.Process, firstA, o.replay); err != nil {
				return nil, nil, err
			}
		}
	}
	pr.WriteSets = diff.NewWriteSetNote(res, diff.CarrySide{Name: "A", Run: a, First: firstA}, diff.CarrySide{Name: "B", Run: b, First: firstB})
	return pr, a, nil
}

// compareDigests compares a pair of processes' step digests, with the first chunk that differs
// of each allocation of the first step that differs.
func compareDigests(pp [2]*recording.Process) (*diff.DigestComparison, error) {
	a, err := diff.ScanDigests(pp[0])
	if err != nil {
		return nil, err
	}
	b, err := diff.ScanDigests(pp[1])
	if err != nil {
		return nil, err
	}
	c := diff.CompareDigests(a, b)
	if c.First != nil {
		err = diff.FirstChunks(pp[0], pp[1], c.First)
	}
	return c, err
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

// launching keeps the processes of set that made kernel launches: a
// launcher (torchrun's agent) that loaded CUDA but launched nothing has
// nothing to compare. Each one left out is said on stderr.
func launching(cmd *cobra.Command, set *recording.Set) *recording.Set {
	kept := &recording.Set{Dir: set.Dir, Damaged: set.Damaged}
	for _, p := range set.Processes {
		// A recording that cannot be read is kept: its pair says so, and the others are compared.
		has, err := p.HasLaunches()
		if err == nil && !has && len(set.Processes) > 1 {
			warnf(cmd, "leaving out %s: it made no kernel launches (a launcher, such as torchrun's)", p.Dir)
			continue
		}
		kept.Processes = append(kept.Processes, p)
	}
	return kept
}
