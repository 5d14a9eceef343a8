package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/nanscan"
)

type nanOptions struct {
	format  string
	dtypes  string
	process string
	frames  int
	// includeLibrary looks at communication libraries' own memory too.
	includeLibrary bool
	// includeCompile looks at the launches of XLA's compilation and autotuning too.
	includeCompile bool
}

func newNanCmd() *cobra.Command {
	var o nanOptions
	cmd := &cobra.Command{
		Use:   "nan REC [--dtype f32,bf16,f16]",
		Short: "Find the first kernel launch after which device memory holds NaN or Inf",
		Long: `nan reports the first launch after which one of its regions holds NaN or
Inf as one of the dtypes asked for, with counts per dtype (the same bytes
may be a NaN as one type and a number as another), the kernel and the
Python callstack.

A recording made with --nan-scan holds NaN and Inf counts the GPU took
after every launch; nan uses them when they cover the dtypes asked for (by
default, the ones counted). Otherwise it decodes the snapshots of a
recording made with --memory snapshot, in launch order, and also says
where in the region the first one is and whether it was there before the
launch. It says whether the launch made the NaN (its regions were finite
before it) or passed it on (a region held one before it, and which launch
wrote it). --format json writes one JSON document with all of it. Exit
status: 1 when it finds one, 0 when none, 2 on bad input.`,
		Example: `  gpurr record --memory hash --nan-scan f32,bf16 -o run -- python train.py
  gpurr nan run
  gpurr record --memory snapshot -o run2 -- python train.py
  gpurr nan run2 --dtype bf16`,
		Args: positional(1, 1, "one recording"),
		RunE: func(cmd *cobra.Command, args []string) error { return runNan(cmd, o, args[0]) },
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "text", "output format: text or json")
	completeValues(cmd, "format", "text", "json")
	dtypeListVar(cmd, &o.dtypes, "f32,bf16,f16", "floating-point types to look for NaN as, comma-separated (f32, f64, f16, bf16); default for a --nan-scan recording: the types it counted")
	f.StringVar(&o.process, "process", "", "process of a multi-process recording: its directory name, pid or rank")
	f.IntVar(&o.frames, "frames", 6, "Python frames of the callstack to show, innermost first")
	f.BoolVar(&o.includeLibrary, "include-library", false, "look at communication libraries' own memory too (NCCL's flags and FIFOs, whose bits may read as NaN), which is left out")
	f.BoolVar(&o.includeCompile, "include-compile", false, "look at the launches XLA made while it compiled and autotuned too (launches.compile: candidates' scratch results may hold NaN), which are left out")
	addStepRangeFlag(cmd)
	return cmd
}

func runNan(cmd *cobra.Command, o nanOptions, path string) error {
	if err := checkFormat("nan", o.format, "text", "json"); err != nil {
		return err
	}
	if o.frames < 0 {
		return usageErrorf("nan: --frames takes a count of 0 or more")
	}
	set, err := openRecording(cmd, path)
	if err != nil {
		return err
	}
	proc, err := pickProcess("nan", set, o.process)
	if err != nil {
		return err
	}
	if counted := proc.Info.GetMemory().GetNanScan(); len(counted) > 0 && !cmd.Flags().Changed("dtype") {
		o.dtypes = strings.Join(counted, ",")
	}
	types, err := dtype.ParseFloatList(o.dtypes)
	if err != nil {
		return usageErrorf("nan: --dtype: %v", err)
	}
	explicit := cmd.Flags().Changed("dtype")
	found, st, err := nanscan.Scan(proc, types, nanscan.Options{Explicit: explicit, IncludeLibrary: o.includeLibrary, IncludeCompile: o.includeCompile})
	if err != nil {
		return usageErrorf("nan: %v", err)
	}
	report, err := nanscan.NewReport(proc, types, explicit, found, st, o.frames)
	if err != nil {
		return usageErrorf("nan: %v", err)
	}
	for _, line := range report.Warnings {
		warnf(cmd, "%s", line)
	}
	w := cmd.OutOrStdout()
	if o.format == "json" {
		report.Warnings = givenWarnings(cmd)
		err = report.WriteJSON(w)
	} else {
		err = report.WriteText(w)
	}
	if err != nil {
		return err
	}
	if found != nil {
		return exitWith(exitFound)
	}
	return nil
}
