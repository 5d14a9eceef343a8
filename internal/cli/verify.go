package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/manifest"
	"github.com/gpurr/gpurr/recording"
)

type verifyOptions struct {
	manifest  string
	all       bool
	reference string
	window    int
	unmatched int
	frames    int
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
cannot be read included.`,
		Example: `  gpurr manifest good -o good.json
  gpurr verify run2 --manifest good.json
  gpurr verify run2 --manifest good.json --continue --reference /data/good`,
		Args: positional(1, 1, "one recording"),
		RunE: func(cmd *cobra.Command, args []string) error { return runVerify(cmd, o, args[0]) },
	}
	f := cmd.Flags()
	f.StringVar(&o.manifest, "manifest", "", "the manifest to check against (gpurr manifest REC -o FILE)")
	f.BoolVar(&o.all, "continue", false, "list every launch that differs, not only the first")
	f.StringVar(&o.reference, "reference", "", "the recording the manifest was made from, for expected bytes (default: the path in the manifest)")
	f.IntVar(&o.window, "window", 32, "bytes of each side to show from the 16-byte line of the first differing byte")
	f.IntVar(&o.unmatched, "unmatched", 5, "launches present on one side only to list by name (all are counted)")
	f.IntVar(&o.frames, "frames", 6, "Python frames of each callstack to show, innermost first")
	return cmd
}

func runVerify(cmd *cobra.Command, o verifyOptions, path string) error {
	out := cmd.OutOrStdout()
	if o.manifest == "" {
		return usageErrorf("verify: --manifest FILE is required (gpurr manifest GOOD_REC -o FILE writes one)")
	}
	if o.window < 0 || o.unmatched < 0 || o.frames < 0 {
		return usageErrorf("verify: --window, --unmatched and --frames take a count of 0 or more")
	}
	set, err := openToCheck(cmd, path)
	if err != nil {
		return err
	}
	m, err := manifest.Open(o.manifest)
	if err != nil {
		return usageErrorf("verify: %v", err)
	}
	defer m.Close()
	var mprocs []procName
	for _, e := range m.Processes {
		mprocs = append(mprocs, procName{e.Process.Name, e.Process.Rank, e.Process.Argv})
	}
	procs := recordingProcs(set)
	pairs, warnings := pairProcesses(path, procs, "the manifest", mprocs)
	for _, w := range warnings {
		warnf(cmd, "%s", w)
	}
	if len(pairs) == 0 {
		return noPairs("verify", set.Dir, procs, "the manifest", mprocs)
	}
	// A process that cannot be read, from its first frame (recording.Set.Damaged) or further
	// on, does not hide the others, as in diff: they are verified, and the command ends with
	// an error naming it. Which of the manifest's processes it was cannot be known.
	unread := unreadable(set.Damaged, nil)
	for _, e := range unread {
		fmt.Fprintf(out, "%s: not verified: %v\n", e.Name, e.Err)
	}
	differ, verified := false, 0
	for _, ij := range pairs {
		p, e := set.Processes[ij[0]], m.Processes[ij[1]]
		run, err := diff.ScanSized(p, len(e.Run.Launches))
		if err != nil {
			if len(pairs) == 1 && len(unread) == 0 {
				return usageErrorf("verify: %s: %v", p.Name, err)
			}
			fmt.Fprintf(out, "%s: not verified: %v\n", p.Name, err)
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
		label := p.Name
		if p.Name != e.Process.Name {
			label = fmt.Sprintf("%s (manifest: %s)", p.Name, e.Process.Name)
		}
		n := 0
		res, err := m.Verify(run, e, manifest.Options{All: o.all, Reference: o.reference, Window: o.window}, func(mm *manifest.Mismatch) error {
			n++
			reportMismatch(out, o, label, n == 1, run, mm)
			return nil
		})
		if err != nil {
			return usageErrorf("verify: %v", err)
		}
		if res.Compared == 0 {
			return usageErrorf("verify: %s: no launch matched with the manifest has hashes on both sides (%d matched)", label, res.Matched)
		}
		verified++
		first := uint64(0)
		if res.First == nil {
			fmt.Fprintf(out, "%s: matches the manifest: %d launches compared after they ran (%d matched)\n", label, res.Compared, res.Matched)
		} else {
			differ = true
			which := "this one first"
			if o.all {
				which = "all listed above"
			}
			fmt.Fprintf(out, "  %d launches matched, %d compared; %d of them differ from the manifest, %s\n", res.Matched, res.Compared, res.Differ, which)
			first = run.Launches[res.First.A].Seq
		}
		writeCarryNotes(out, res, carrySide{"the recording", run, first}, carrySide{"the manifest", e.Run, 0})
		reportUnmatched(out, o.unmatched, "the recording", "the manifest", run, e.Run, res)
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

// reportMismatch prints one launch that differs from the manifest; the
// first in full, the others (--continue) with their innermost frame.
func reportMismatch(w io.Writer, o verifyOptions, label string, first bool, run *diff.Run, mm *manifest.Mismatch) {
	l := mm.Actual.Launch
	if first {
		fmt.Fprintf(w, "%s: launch %d differs from the manifest (its launch %d): the memory after it differs\n", label, l.GetSeq(), mm.Expected.Seq)
	} else {
		fmt.Fprintf(w, "launch %d differs from the manifest (its launch %d)\n", l.GetSeq(), mm.Expected.Seq)
	}
	fmt.Fprintf(w, "  kernel   %s (stream %d)\n", run.KernelNameOf(l.GetKernelId()), mm.Stream)
	n := o.frames
	if !first {
		n = min(n, 1)
	}
	writeOrigin(w, "at", l, mm.Actual.Callstack, mm.Actual.Forward, n)
	for _, r := range mm.Regions {
		fmt.Fprintf(w, "  region %d %s\n", r.Index, regionText(r.RegionDiff, "recording", "manifest"))
		if r.RegionDiff.Note != "" {
			fmt.Fprintf(w, "    (%s)\n", r.RegionDiff.Note)
		}
		if r.Note != "" {
			fmt.Fprintf(w, "    (%s)\n", r.Note)
		}
		if b := r.Bytes; b != nil {
			fmt.Fprintf(w, "    first differing byte 0x%x\n", b.First)
			for _, side := range []struct {
				name string
				data []byte
			}{{"expected", b.Expected}, {"actual  ", b.Actual}} {
				for off := 0; off < len(side.data); off += 16 {
					name := side.name
					if off > 0 {
						name = "        "
					}
					fmt.Fprintf(w, "    %s 0x%x  %s\n", name, b.Offset+uint64(off), hexLine(side.data[off:min(off+16, len(side.data))]))
				}
			}
		}
	}
}

func hexLine(b []byte) string {
	parts := make([]string, len(b))
	for i, c := range b {
		parts[i] = fmt.Sprintf("%02x", c)
	}
	return strings.Join(parts, " ")
}
