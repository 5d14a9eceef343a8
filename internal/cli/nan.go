package cli

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/dtype"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/nanscan"
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
		Long: `nan reads the snapshots of a recording made with --memory snapshot in launch
order and reports the first launch after which one of its regions holds NaN
or Inf, decoded as each dtype asked for, with counts per dtype (the same
bytes may be a NaN as one type and a number as another), the kernel and the
Python callstack. Exit status: 1 when it finds one, 0 when none, 2 on bad
input.`,
		Example: `  gpurr record --memory snapshot -o run -- python train.py
  gpurr nan run --dtype bf16`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runNan(cmd, o, args[0]) },
	}
	f := cmd.Flags()
	f.StringVar(&o.dtypes, "dtype", "f32,bf16,f16", "floating-point dtypes to decode memory as, comma-separated (f32, f64, f16, bf16)")
	f.StringVar(&o.process, "process", "", "process of a multi-process recording: its directory name, pid or rank")
	f.IntVar(&o.frames, "frames", 6, "Python frames of the callstack to show, innermost first")
	return cmd
}

func runNan(cmd *cobra.Command, o nanOptions, path string) error {
	if o.frames < 0 {
		return usageErrorf("nan: --frames takes a count of 0 or more")
	}
	types, err := dtype.ParseList(o.dtypes)
	if err != nil {
		return usageErrorf("nan: --dtype: %v", err)
	}
	set, err := recording.Open(path)
	if err != nil {
		return usageErrorf("nan: %v", err)
	}
	proc, err := pickProcess(set, o.process)
	if err != nil {
		return err
	}
	found, st, err := nanscan.Scan(proc, types)
	if err != nil {
		return usageErrorf("nan: %v", err)
	}
	w := cmd.OutOrStdout()
	if found == nil {
		fmt.Fprintf(w, "%s: no NaN or Inf (as %s) after any of the %d launches with snapshots (%d distinct chunks read)\n",
			proc.Name, o.dtypes, st.Launches, st.Chunks)
		if st.NoSnapshot > 0 {
			fmt.Fprintf(w, "  %d launches had hashes only, no snapshot: not scanned (--snapshot-kernels/--snapshot-launches)\n", st.NoSnapshot)
		}
		return nil
	}
	l := found.Launch
	kernel := "(kernel not in the recording)"
	if found.Kernel != nil {
		kernel = cmp.Or(found.Kernel.GetDemangled(), recording.Demangle(found.Kernel.GetName()))
	}
	fmt.Fprintf(w, "%s: NaN or Inf first after launch %d (the %d launches with snapshots before it hold none)\n", proc.Name, l.GetSeq(), st.Launches-1)
	fmt.Fprintf(w, "  kernel   %s\n", kernel)
	frames := pythonFrames(found.Callstack, o.frames)
	if len(frames) == 0 {
		frames = []string{"(no Python callstack recorded)"}
	}
	fmt.Fprintf(w, "  at       %s\n", frames[0])
	for _, f := range frames[1:] {
		fmt.Fprintf(w, "           %s\n", f)
	}
	for _, r := range found.Regions {
		where := ""
		if r.Region != nil {
			where = fmt.Sprintf(" (%s, parameter offset %s)", info.FormatBytes(r.Region.GetSize()), joinOffsets(r.Region.GetParamOffsets()))
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
	if st.NoSnapshot > 0 {
		fmt.Fprintf(w, "  (%d launches had hashes only and were not scanned; an earlier one may hold NaN)\n", st.NoSnapshot)
	}
	return exitWith(exitFound)
}
