package cli

import (
	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/info"
)

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
	f.BoolVar(&o.includeCompile, "include-compile", false, "align the launches XLA made while it compiled and autotuned too (launches.compile), which differ from run to run and are left out")
	countVar(f, &o.replay, "replay", 0, 0, "replay the launch where the runs part ways this many times on a GPU from A's snapshots before it, to tell a nondeterministic kernel from inputs that differ")
	addStepRangeFlag(cmd)
	return cmd
}

func runDiff(cmd *cobra.Command, o diffOptions, pathA, pathB string) error {
	if err := checkFormat("diff", o.format, "text", "json"); err != nil {
		return err
	}
	text := o.format == "text"
	report, err := compareRecordings(cmd, o, pathA, pathB, text)
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
