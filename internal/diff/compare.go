package diff

import (
	"fmt"

	"github.com/gpurr/gpurr/recording"
)

// CompareOptions says how Compare compares two recordings.
type CompareOptions struct {
	Options             // what a divergence's report shows
	IncludeLibrary bool // compare communication libraries' own memory too (ScanOptions)
	IncludeCompile bool // align the launches of XLA's compilation and autotuning too (ScanOptions)
	Unmatched      int  // launches present in one run only to list by name (all are counted)

	// Replay, when not nil, runs the launch seq of run A's process p, where a pair parts
	// ways, again (gpurr diff --replay). Its error ends the comparison as it is.
	Replay func(p *recording.Process, seq uint64) (*Replayed, error)
	// Warn is given each warning: a process left out, a pair of different programs or a
	// process without a counterpart, a run without memory capture, or incomplete.
	Warn func(string)
	// Compared, when not nil, is given each pair as soon as it is compared (to write its
	// text then). Its error ends the comparison as it is.
	Compared func(*PairReport) error
}

// Compare compares two recordings, named pathA and pathB as given, pair of processes by pair
// (PairProcesses) and returns the report. A process that made no kernel launches (a
// launcher) is left out; when several pairs part ways at a launch, the rank that did so first
// is named and followed (Follow). Pairs that could not be read are in the report
// (Report.Unread), not an error, unless one is the only pair. No pair is a *NoPairsError.
func Compare(pathA string, a *recording.Set, pathB string, b *recording.Set, o CompareOptions) (*Report, error) {
	a, b = launching(a, o.Warn), launching(b, o.Warn)
	procsA, procsB := Procs(a), Procs(b)
	pairs, warnings := PairProcesses(pathA, procsA, pathB, procsB)
	for _, w := range warnings {
		o.Warn(w)
	}
	if len(pairs) == 0 {
		return nil, &NoPairsError{WhereA: a.Dir, A: procsA, WhereB: b.Dir, B: procsB}
	}
	report := &Report{A: pathA, B: pathB}
	runsA := map[*PairReport]*Run{} // the pairs that part ways, and their run A
	for _, ij := range pairs {
		pp := [2]*recording.Process{a.Processes[ij[0]], b.Processes[ij[1]]}
		pr, runA, err := comparePair(o, pp, len(pairs) == 1)
		if err != nil {
			return nil, err
		}
		report.Pairs = append(report.Pairs, pr)
		switch pr.Outcome {
		case "not-compared":
			report.Unread = append(report.Unread, pr.Label())
		case "part-ways":
			report.Parted++
			runsA[pr] = runA
		}
		if o.Compared != nil {
			if err := o.Compared(pr); err != nil {
				return nil, err
			}
		}
	}
	if timed := timedPairs(report); timed > 1 {
		// Ranks wait on each other's collectives: the rank that parted ways first in time is
		// where to look; the others may only have received its bad values.
		var first *PairReport
		for _, p := range report.Pairs {
			if p.Outcome == "part-ways" && (p.Divergence != nil || p.Lone != nil) && (first == nil || wallNs(p) < wallNs(first)) {
				first = p
			}
		}
		report.FirstInTime = first.RankLabel()
		for _, p := range report.Pairs {
			f, err := Follow(first, p, runsA[p])
			if err != nil {
				return nil, err
			}
			if f != nil {
				report.Followed = append(report.Followed, *f)
			}
		}
	}
	return report, nil
}

// timedPairs counts the pairs that part ways at a launch, which has a time (digests place a
// divergence in a step only).
func timedPairs(r *Report) int {
	n := 0
	for _, p := range r.Pairs {
		if p.Outcome == "part-ways" && (p.Divergence != nil || p.Lone != nil) {
			n++
		}
	}
	return n
}

// wallNs is when the pair's run A made the launch where the runs part ways.
func wallNs(p *PairReport) int64 {
	if p.Lone != nil {
		return p.Lone.WallNs
	}
	return p.Divergence.WallNs
}

// comparePair aligns a pair of processes and reports how they compare, with its run A. A
// process that cannot be read is a pair not compared, unless it is the only pair: an error.
func comparePair(o CompareOptions, pp [2]*recording.Process, only bool) (*PairReport, *Run, error) {
	pr := &PairReport{A: pp[0].Name, B: pp[1].Name, Rank: pp[0].Info.Rank, Memory: true}
	a, err := ScanWith(pp[0], ScanOptions{IncludeLibrary: o.IncludeLibrary, IncludeCompile: o.IncludeCompile})
	var b *Run
	if err == nil {
		b, err = ScanWith(pp[1], ScanOptions{Launches: len(a.Launches), IncludeLibrary: o.IncludeLibrary, IncludeCompile: o.IncludeCompile})
	}
	if err != nil {
		// A damaged process does not hide the other pairs: they are compared, and the
		// command ends with this one's error.
		if only {
			return nil, nil, err
		}
		pr.Outcome, pr.Error = "not-compared", err.Error()
		return pr, nil, nil
	}
	for i, r := range []*Run{a, b} {
		if i == 1 && r.Process.Dir == a.Process.Dir {
			break // a run compared with itself: its warnings once
		}
		if r.Mode == "" {
			pr.Memory = false // only what was launched is compared
			o.Warn(fmt.Sprintf("%s was recorded without memory capture: comparing what the runs launched, not what they computed (record both with --memory hash for that)", r.Process.Dir))
		}
		if !r.Complete {
			o.Warn(fmt.Sprintf("%s is incomplete; comparing what it holds", r.Process.Dir))
		}
		if none := r.Steps.NoneMatched(); none != "" {
			o.Warn(r.Process.Dir + ": " + none)
		}
	}
	res, err := AlignTorn(a, b)
	if err != nil {
		return nil, nil, err
	}
	if n := max(a.AlikeThreads(), b.AlikeThreads()); n > 1 {
		pr.AlikeThreads = n
	}
	pr.Matched, pr.Compared, pr.NotCompared, pr.Differ = res.Matched, res.Compared, res.Unknown, res.Differ
	pr.OnlyA, pr.OnlyB = NewUnmatched(a, res.OnlyA, o.Unmatched), NewUnmatched(b, res.OnlyB, o.Unmatched)
	pr.Outcome = "agree"
	if !pr.Memory {
		if pr.Lone, err = NewLoneLaunch(a, b, res, o.Frames); err != nil {
			return nil, nil, err
		}
		if pr.Lone != nil {
			pr.Outcome = "part-ways"
		}
		return pr, a, nil
	}
	if len(a.Library) > 0 {
		pr.Library = a.Library
	}
	pr.CompileA, pr.CompileB = a.Compile, b.Compile
	pr.TornA, pr.TornB = a.Torn[:min(len(a.Torn), MaxListed)], b.Torn[:min(len(b.Torn), MaxListed)]
	pr.TornMore = len(a.Torn) + len(b.Torn) - len(pr.TornA) - len(pr.TornB)
	if pp[0].Info.GetMemory().GetDigests() && pp[1].Info.GetMemory().GetDigests() {
		if pr.Digests, err = compareDigests(pp); err != nil {
			return nil, nil, err
		}
	}
	if res.Compared == 0 && pr.Digests != nil {
		if pr.Digests.First != nil {
			pr.Outcome = "part-ways"
		}
		if pr.Digests.Compared == 0 {
			return nil, nil, fmt.Errorf("%s and %s: no step digested on both sides (a program that went through no training step: record with --step-every N or --step-range REGEX)", pp[0].Name, pp[1].Name)
		}
		return pr, a, nil
	}
	if res.Compared == 0 {
		return nil, nil, fmt.Errorf("%s and %s: no matched launch has memory states on both sides (%d matched)", pp[0].Name, pp[1].Name, res.Matched)
	}
	firstA, firstB := uint64(0), uint64(0)
	if res.First != nil {
		pr.Outcome = "part-ways"
		if pr.Divergence, err = NewDivergence(a, b, res, o.Options); err != nil {
			return nil, nil, err
		}
		firstA, firstB = pr.Divergence.SeqA, pr.Divergence.SeqB
		if o.Replay != nil {
			if pr.Divergence.Replay, err = o.Replay(a.Process, firstA); err != nil {
				return nil, nil, err
			}
		}
	}
	pr.WriteSets = NewWriteSetNote(res, CarrySide{Name: "A", Run: a, First: firstA}, CarrySide{Name: "B", Run: b, First: firstB})
	return pr, a, nil
}

// compareDigests compares a pair of processes' step digests, with the first chunk that differs
// of each allocation of the first step that differs.
func compareDigests(pp [2]*recording.Process) (*DigestComparison, error) {
	a, err := ScanDigests(pp[0])
	if err != nil {
		return nil, err
	}
	b, err := ScanDigests(pp[1])
	if err != nil {
		return nil, err
	}
	c := CompareDigests(a, b)
	if c.First != nil {
		err = FirstChunks(pp[0], pp[1], c.First)
	}
	return c, err
}

// launching keeps the processes of set that made kernel launches: a
// launcher (torchrun's agent) that loaded CUDA but launched nothing has
// nothing to compare. Each one left out is a warning.
func launching(set *recording.Set, warn func(string)) *recording.Set {
	kept := &recording.Set{Dir: set.Dir, Damaged: set.Damaged}
	for _, p := range set.Processes {
		// A recording that cannot be read is kept: its pair says so, and the others are compared.
		has, err := p.HasLaunches()
		if err == nil && !has && len(set.Processes) > 1 {
			warn(fmt.Sprintf("leaving out %s: it made no kernel launches (a launcher, such as torchrun's)", p.Dir))
			continue
		}
		kept.Processes = append(kept.Processes, p)
	}
	return kept
}
