package cli

import (
	"cmp"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/nanscan"
	"github.com/gpurr/gpurr/recording"
)

type nanOptions struct {
	dtypes  string
	process string
	frames  int
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
launch. Exit status: 1 when it finds one, 0 when none, 2 on bad input.`,
		Example: `  gpurr record --memory hash --nan-scan f32,bf16 -o run -- python train.py
  gpurr nan run
  gpurr record --memory snapshot -o run2 -- python train.py
  gpurr nan run2 --dtype bf16`,
		Args: positional(1, 1, "one recording"),
		RunE: func(cmd *cobra.Command, args []string) error { return runNan(cmd, o, args[0]) },
	}
	f := cmd.Flags()
	f.StringVar(&o.dtypes, "dtype", "f32,bf16,f16", "floating-point dtypes to look for NaN as, comma-separated (f32, f64, f16, bf16); default for a --nan-scan recording: the types it counted")
	completeValues(cmd, "dtype", "f32", "f64", "f16", "bf16")
	f.StringVar(&o.process, "process", "", "process of a multi-process recording: its directory name, pid or rank")
	f.IntVar(&o.frames, "frames", 6, "Python frames of the callstack to show, innermost first")
	addStepRangeFlag(cmd)
	return cmd
}

func runNan(cmd *cobra.Command, o nanOptions, path string) error {
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
	found, st, err := nanscan.Scan(proc, types, explicit)
	if err != nil {
		return usageErrorf("nan: %v", err)
	}
	for _, line := range st.Warnings {
		warnf(cmd, "%s", line)
	}
	w := cmd.OutOrStdout()
	looked := "with snapshots" // which launches the scan looked at
	if st.Source == nanscan.GPUCounts {
		looked = "counted on the GPU"
	}
	if found == nil {
		var names []string
		for _, t := range types {
			names = append(names, t.Name)
		}
		fmt.Fprintf(w, "%s: no NaN or Inf (as %s) after %s", proc.Name, strings.Join(names, ","), scanned(st.Launches, looked))
		if st.Source == nanscan.Snapshots {
			fmt.Fprintf(w, " (%s read)", info.Count(st.Chunks, "distinct chunk"))
		}
		fmt.Fprintln(w)
		notScanned(w, st, "")
		unclear(w, st, explicit, "")
		return nil
	}
	l := found.Launch
	kernel := "(kernel not in the recording)"
	if found.Kernel != nil {
		kernel = cmp.Or(found.Kernel.GetDemangled(), recording.Demangle(found.Kernel.GetName()))
	}
	fmt.Fprintf(w, "%s: NaN or Inf first after launch %d (%s)\n", proc.Name, l.GetSeq(), scannedBefore(st.Launches-1, looked))
	fmt.Fprintf(w, "  kernel   %s\n", kernel)
	step, steps, err := recording.StepOf(proc, l.GetSeq())
	if err != nil {
		return usageErrorf("nan: %v", err)
	}
	if n := steps.Steps(); n > 0 && step >= 0 {
		fmt.Fprintf(w, "  step     %d of %d (%s ended before it)\n", step, n, steps.Unit())
	} else if none := steps.NoneMatched(); none != "" {
		warnf(cmd, "%s: %s", proc.Dir, none)
	}
	inRange, err := recording.RangePath(proc, l.GetRangeId())
	if err != nil {
		return usageErrorf("nan: %v", err)
	}
	if inRange != "" {
		fmt.Fprintf(w, "  range    %s\n", inRange)
	}
	writeOrigin(w, "at", l, found.Callstack, found.Forward, o.frames)
	for _, r := range found.Regions {
		where := ""
		if r.Region != nil {
			where = fmt.Sprintf(" (%s, parameter offset %s)", info.FormatBytes(r.Region.GetSize()), info.JoinOffsets(r.Region.GetParamOffsets()))
		}
		var parts []string
		for _, c := range r.Counts {
			p := fmt.Sprintf("as %s %d NaN, %d Inf", c.Type, c.NaN, c.Inf)
			if c.First >= 0 {
				p += fmt.Sprintf(" (first at byte 0x%x)", c.First)
			}
			parts = append(parts, p)
		}
		fmt.Fprintf(w, "  region %d%s: %s\n", r.Index, where, strings.Join(parts, "; "))
		if r.Before {
			fmt.Fprintf(w, "    already there before this launch: it came from outside a kernel (a copy from the host, a memset, memory no kernel wrote)\n")
		}
	}
	for _, d := range found.Disagree {
		fmt.Fprintf(w, "  !! %s: the recording contradicts itself (please report it)\n", d)
	}
	if found.Source == nanscan.GPUCounts {
		fmt.Fprintf(w, "  counted on the GPU while recording; the region may have held them before the launch (a copy from the host lands unseen until a kernel reaches it).\n")
		fmt.Fprintf(w, "  To see the values: record again with --memory snapshot --snapshot-launches %d, then gpurr nan or gpurr rewind\n", l.GetSeq())
	}
	notScanned(w, st, "; an earlier one may hold NaN")
	unclear(w, st, explicit, " before it")
	return exitWith(exitFound)
}

// unclear says how many launches hold NaN bit patterns in regions whose bytes fit no type
// asked: their type is unknown, and nan does not guess it.
// scanned names the n launches the scan looked at (which: "with snapshots"), for "after ...".
func scanned(n int, which string) string {
	switch n {
	case 0:
		return "any launch: the recording has no launch " + which
	case 1:
		return "the one launch " + which
	}
	return fmt.Sprintf("any of the %d launches %s", n, which)
}

// scannedBefore says that the n launches looked at before the first NaN held none.
func scannedBefore(n int, which string) string {
	switch n {
	case 0:
		return "no launch " + which + " came before it"
	case 1:
		return "the one launch " + which + " before it holds none"
	}
	return fmt.Sprintf("the %d launches %s before it hold none", n, which)
}

func unclear(w io.Writer, st nanscan.Stats, explicit bool, where string) {
	if st.Source != nanscan.Snapshots || explicit || st.Unclear == 0 {
		return
	}
	fmt.Fprintf(w, "  (%s%s hold NaN bit patterns in regions whose element type is unclear from their bytes (integers, packed data?): --dtype T counts every NaN pattern as T)\n",
		info.Count(st.Unclear, "launch"), where)
}

// notScanned says which launches, and which region states of the others, nan could not look
// at.
func notScanned(w io.Writer, st nanscan.Stats, consequence string) {
	if st.Unknown > 0 {
		fmt.Fprintf(w, "  (not scanned: %s carried from a lost state (write sets), with neither counts nor bytes%s)\n",
			info.Count(st.Unknown, "region state"), consequence)
	}
	if st.NotScanned == 0 {
		return
	}
	if st.Source == nanscan.GPUCounts {
		fmt.Fprintf(w, "  (%d launches' memory states hold no NaN counts: lost, or the GPU had no memory for the counters (see gpurr info)%s)\n", st.NotScanned, consequence)
		return
	}
	fmt.Fprintf(w, "  (%d launches had hashes only, no snapshot, and were not scanned (--snapshot-kernels/--snapshot-launches)%s)\n", st.NotScanned, consequence)
}
