package cli

import (
	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/manifest"
	"github.com/gpurr/gpurr/recording"
)

type verifyOptions struct {
	format    string
	manifest  string
	all       bool
	reference string
	window    int
	unmatched int
	frames    int
	// includeLibrary compares communication libraries' own memory too.
	includeLibrary bool
}

func newVerifyCmd() *cobra.Command {
	var o verifyOptions
	cmd := &cobra.Command{
		Use:   "verify REC --manifest M.json [--continue]",
		Short: "Check a run against the manifest of a known-good run",
		Long: `verify aligns the launches of a recording with those of a manifest (gpurr
manifest), as diff aligns two runs, and reports the first launch after which
a region's hash differs from the manifest's: the launch, the kernel, the
Python line, the region and the first differing chunk. When the recording
has a snapshot of that launch, it shows the expected and actual bytes around
the first differing byte; the expected bytes come from the recording the
manifest was made from (its path is in the manifest; --reference when it
moved). --continue lists every launch that differs.

The recording needs memory capture (gpurr record --memory hash, or
snapshot). A process of it that cannot be read (an empty events file: the
program was killed before its first write; or a damaged frame) is listed as
not verified, and the others are verified. Exit status: 0 when it matches
the manifest, 1 when a launch differs, 2 on bad input, a process that
cannot be read included. --format json writes one JSON document with all of
it (docs/manifest.md).`,
		Example: `  gpurr manifest good -o good.json
  gpurr verify run2 --manifest good.json
  gpurr verify run2 --manifest good.json --continue --reference /data/good`,
		Args: positional(1, 1, "one recording"),
		RunE: func(cmd *cobra.Command, args []string) error { return runVerify(cmd, o, args[0]) },
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "text", "output format: text or json")
	completeValues(cmd, "format", "text", "json")
	f.StringVar(&o.manifest, "manifest", "", "the manifest to check against (gpurr manifest REC -o FILE)")
	f.BoolVar(&o.all, "continue", false, "list every launch that differs, not only the first")
	f.StringVar(&o.reference, "reference", "", "the recording the manifest was made from, for expected bytes (default: the path in the manifest)")
	f.IntVar(&o.window, "window", 32, "bytes of each side to show from the 16-byte line of the first differing byte")
	f.IntVar(&o.unmatched, "unmatched", 5, "launches present on one side only to list by name (all are counted)")
	f.IntVar(&o.frames, "frames", 6, "Python frames of each callstack to show, innermost first")
	f.BoolVar(&o.includeLibrary, "include-library", false, "compare communication libraries' own memory too (NCCL's channels and buffers), which differs from run to run by design and is left out")
	return cmd
}

func runVerify(cmd *cobra.Command, o verifyOptions, path string) error {
	out := cmd.OutOrStdout()
	if o.manifest == "" {
		return usageErrorf("verify: --manifest FILE is required (gpurr manifest GOOD_REC -o FILE writes one)")
	}
	if err := checkFormat("verify", o.format, "text", "json"); err != nil {
		return err
	}
	if o.window < 0 || o.unmatched < 0 || o.frames < 0 {
		return usageErrorf("verify: --window, --unmatched and --frames take a count of 0 or more")
	}
	// --reference is read only when a launch differs: said now, not at the end of a long
	// verification that found a difference.
	if cmd.Flags().Changed("reference") {
		if o.reference == "" {
			return usageErrorf("verify: --reference is empty: name the recording the manifest was made from (or leave the flag out for the path in the manifest)")
		}
		if _, err := recording.Open(o.reference); err != nil {
			return usageErrorf("verify: --reference: %v", err)
		}
	}
	set, err := openToCheck(cmd, path)
	if err != nil {
		return err
	}
	f, err := manifestInput.open("verify", o.manifest)
	if err != nil {
		return err
	}
	m, err := manifest.Read(f, manifest.ReadOptions{IncludeLibrary: o.includeLibrary})
	if err != nil {
		return usageErrorf("verify: %v", err)
	}
	defer m.Close()
	var mprocs []diff.Proc
	for _, e := range m.Processes {
		mprocs = append(mprocs, diff.Proc{Name: e.Process.Name, Rank: e.Process.Rank, Argv: e.Process.Argv})
	}
	procs := diff.Procs(set)
	pairs, warnings := diff.PairProcesses(path, procs, "the manifest", mprocs)
	for _, w := range warnings {
		warnf(cmd, "%s", w)
	}
	if len(pairs) == 0 {
		return usageErrorf("verify: %v", &diff.NoPairsError{WhereA: set.Dir, A: procs, WhereB: "the manifest", B: mprocs})
	}
	report := &manifest.Report{Recording: path, Manifest: o.manifest}
	text := o.format == "text"
	// Each process's text is written as it is verified, its mismatches as they are found; JSON
	// once all are.
	write := func(p *manifest.ProcessReport) error {
		report.Processes = append(report.Processes, p)
		if text {
			return p.WriteText(out)
		}
		return nil
	}
	// A process that cannot be read, from its first frame (recording.Set.Damaged) or further
	// on, does not hide the others, as in diff: they are verified, and the command ends with
	// an error naming it. Which of the manifest's processes it was cannot be known.
	unread := unreadable(set.Damaged, nil)
	for _, e := range unread {
		if err := write(&manifest.ProcessReport{Process: e.Name, Outcome: "not-verified", Error: e.Err.Error()}); err != nil {
			return err
		}
	}
	differ, verified := false, 0
	for _, ij := range pairs {
		p, e := set.Processes[ij[0]], m.Processes[ij[1]]
		pr := &manifest.ProcessReport{Process: p.Name, Expected: e.Process.Name, All: o.all}
		run, err := diff.ScanWith(p, diff.ScanOptions{Launches: len(e.Run.Launches), IncludeLibrary: o.includeLibrary})
		if err != nil {
			if len(pairs) == 1 && len(unread) == 0 {
				return usageErrorf("verify: %s: %v", p.Name, err)
			}
			pr.Outcome, pr.Error = "not-verified", err.Error()
			if err := write(pr); err != nil {
				return err
			}
			unread = append(unread, &recording.ProcessError{Name: p.Name, Err: err})
			continue
		}
		if run.Mode == "" {
			return usageErrorf("verify: %v", &manifest.NoMemoryError{Dir: p.Dir})
		}
		if !run.Complete {
			warnf(cmd, "%s is incomplete; verifying what it holds", p.Dir)
		}
		if !e.Process.Complete {
			warnf(cmd, "the manifest's process %s was made from an incomplete recording", e.Process.Name)
		}
		// A torn state matters only where a launch differs: read the recording again for them
		// then alone.
		if diff.Align(run, e.Run).Differ > 0 {
			if err := run.MarkTorn(); err != nil {
				return usageErrorf("verify: %s: %v", p.Name, err)
			}
		}
		res, err := m.Verify(run, e, manifest.Options{All: o.all, Reference: o.reference, Window: o.window, IncludeLibrary: o.includeLibrary}, func(mm *manifest.Mismatch) error {
			first := len(pr.Mismatches) == 0
			frames := o.frames
			if !first {
				frames = min(frames, 1)
			}
			r := manifest.NewMismatchReport(mm, run.KernelNameOf(mm.Actual.Launch.GetKernelId()), frames)
			pr.Mismatches = append(pr.Mismatches, r)
			if text {
				return r.WriteText(out, pr.Label(), first)
			}
			return nil
		})
		if err != nil {
			return usageErrorf("verify: %v", err)
		}
		if res.Compared == 0 {
			return usageErrorf("verify: %s: no launch matched with the manifest has hashes on both sides (%d matched)", pr.Label(), res.Matched)
		}
		verified++
		pr.Matched, pr.Compared, pr.NotCompared, pr.Differ = res.Matched, res.Compared, res.Unknown, res.Differ
		if len(run.Library) > 0 {
			pr.Library = run.Library
		}
		pr.Outcome = "matches"
		first := uint64(0)
		if res.First != nil {
			differ = true
			pr.Outcome = "differs"
			first = run.Launches[res.First.A].Seq
		}
		pr.WriteSets = diff.NewWriteSetNote(res, diff.CarrySide{Name: "the recording", Run: run, First: first}, diff.CarrySide{Name: "the manifest", Run: e.Run})
		pr.OnlyRecording, pr.OnlyManifest = diff.NewUnmatched(run, res.OnlyA, o.unmatched), diff.NewUnmatched(e.Run, res.OnlyB, o.unmatched)
		if err := write(pr); err != nil {
			return err
		}
	}
	if !text {
		report.Warnings = givenWarnings(cmd)
		if err := report.WriteJSON(out); err != nil {
			return err
		}
	}
	if len(unread) > 0 {
		rest := "the others are verified above"
		if verified == 0 {
			rest = "no other process was verified"
		}
		return usageErrorf("verify: %s could not be read (%s); %s", info.Count(len(unread), "process"), unreadNames(unread), rest)
	}
	if differ {
		return exitWith(exitFound)
	}
	return nil
}
