package cli

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/agentcfg"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/trace"
)

type traceOptions struct {
	out      string
	format   string
	kernels  string
	launches string
	window   string
	force    bool
}

func newTraceCmd() *cobra.Command {
	var o traceOptions
	cmd := &cobra.Command{
		Use:   "trace REC... -o FILE.json|FILE.perfetto-trace",
		Short: "Write recordings as a timeline for Perfetto UI or chrome://tracing",
		Long: `trace writes one timeline of the recordings given: each recorded process (each
rank) is a process; its kernels are slices on a track per GPU and stream, on
the GPU clock; its launch calls are on the host threads that made them, with
an arrow to the kernels they ran. Kernels run by CUDA graph replays carry the
Python line that captured them (python_line) and the one that replayed them
(replayed_at). gpurr's own memory-capture kernels have a track of their own.
Recordings of several hosts share one time axis, through each process's
wall-clock start.

The file's name picks the format: .json is Chrome trace-event JSON,
.perfetto-trace (or .pftrace, .pb) Perfetto's protobuf format, smaller and made for
large traces; --format chrome|perfetto overrides it. Open either at
https://ui.perfetto.dev. docs/trace.md describes the tracks and arguments.`,
		Example: `  gpurr trace run -o run.json
  gpurr trace job/rank0 job/rank1 -o job.perfetto-trace
  gpurr trace run -o gemm.json --kernels gemm --time 2s:2.5s`,
		Args: positional(1, -1, "one or more recordings"),
		RunE: func(cmd *cobra.Command, args []string) error { return runTrace(cmd, o, args) },
	}
	f := cmd.Flags()
	outputVar(f, &o.out, "output", "o", "", "file to write (- for stdout, with --format)")
	f.BoolVar(&o.force, "force", false, "replace the -o file when it exists")
	f.StringVar(&o.format, "format", "", "chrome or perfetto (default: from the file's name)")
	completeValues(cmd, "format", "chrome", "perfetto")
	f.StringVar(&o.kernels, "kernels", "", "only kernels whose mangled or demangled name matches, and their launch calls (Go regular expression)")
	f.StringVar(&o.launches, "launches", "", "only these launch calls and the kernels they ran, e.g. 1-100,250,900- or 1-:10 (every 10th; numbers as gpurr info shows them)")
	f.StringVar(&o.window, "time", "", "only events overlapping A:B, times from the timeline's start, e.g. 2s:2.5s, 1.5:, :300ms (plain numbers are seconds)")
	return cmd
}

func runTrace(cmd *cobra.Command, o traceOptions, paths []string) error {
	format, err := traceFormat(o)
	if err != nil {
		return err
	}
	var opts trace.Options
	if o.kernels != "" {
		if opts.Kernels, err = regexp.Compile(o.kernels); err != nil {
			return usageErrorf("trace: --kernels: %v", err)
		}
	}
	if cmd.Flags().Changed("launches") && strings.TrimSpace(o.launches) == "" {
		return usageErrorf("trace: --launches is empty: give launch numbers such as 1-100,250 (or leave the flag out for all)")
	}
	if o.launches != "" {
		ranges, err := agentcfg.ParseRanges(o.launches)
		if err != nil {
			return usageErrorf("trace: --launches: %v", err)
		}
		opts.Launches = func(seq uint64) bool { return agentcfg.Selects(ranges, seq) }
	}
	if cmd.Flags().Changed("time") && strings.TrimSpace(o.window) == "" {
		return usageErrorf("trace: --time is empty: give a window such as 2s:2.5s, 1.5: or :300ms (or leave the flag out for all)")
	}
	if opts.From, opts.To, err = parseWindow(o.window); err != nil {
		return usageErrorf("trace: --time %q: %v", o.window, err)
	}
	procs, err := openProcesses(cmd, paths)
	if err != nil {
		return err
	}

	w, err := createOutput("trace", o.out, cmd.OutOrStdout(), o.force, paths...)
	if err != nil {
		return err
	}
	defer w.Abort()
	st, err := trace.Write(w, format, procs, opts)
	if err != nil {
		return usageErrorf("trace: %v", err)
	}
	for _, short := range st.Shortfalls {
		warnf(cmd, "%s", short)
	}
	var filters []string
	if o.kernels != "" {
		filters = append(filters, "--kernels "+o.kernels)
	}
	if o.launches != "" {
		filters = append(filters, "--launches "+o.launches)
	}
	if len(filters) > 0 && st.Selected == 0 {
		return usageErrorf("trace: no launch call or kernel in the recordings matches %s (gpurr info names the kernels and counts the launches)", strings.Join(filters, " and "))
	}
	if o.window != "" && st.Calls+st.Kernels+st.OwnKernels == 0 {
		return usageErrorf("trace: no event falls in --time %s: the timeline runs from 0 to %v", o.window, st.End.Round(time.Millisecond))
	}
	if err := w.Commit(); err != nil {
		return err
	}
	if o.out == "-" {
		return nil
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "wrote %s (%s, %s): %s, %s, %d kernels linked to their call of %d",
		o.out, format, info.FormatBytes(uint64(w.Written)), info.Count(st.Processes, "process"), info.Count(st.Calls, "launch call"), st.Flows, st.Kernels)
	if st.GraphKernels > 0 {
		fmt.Fprintf(out, "; %d kernels run by graph replays, %d of them with their capture-time launch", st.GraphKernels, st.Attributed)
	}
	if st.Copies+st.HostCalls > 0 {
		fmt.Fprintf(out, "; %d copies and memsets, %d copy, memset and synchronization calls", st.Copies, st.HostCalls)
	}
	if st.OwnKernels > 0 {
		fmt.Fprintf(out, "; %d memory-capture kernels of gpurr's own", st.OwnKernels)
	}
	if st.Probed > 0 {
		fmt.Fprintf(out, "; %s of %s on SM tracks", info.Count(st.ProbeCTAs, "CTA"), info.Count(st.Probed, "probed launch"))
	}
	fmt.Fprintln(out)
	if st.Unlinked > 0 {
		fmt.Fprintf(out, "  %d kernels have no launch call in the recording (dropped or filtered while recording): shown without arrows\n", st.Unlinked)
	}
	if st.Skipped > 0 {
		fmt.Fprintf(out, "  %d kernel records had no usable start and end time and were left out\n", st.Skipped)
	}
	if st.Untimed > 0 {
		fmt.Fprintf(out, "  GPU timing was sampled: %d of %d eager launch calls timed (%.0f%%), the others have no kernel slice (gpurr info says which steps and scales the GPU time)\n",
			st.Sampled-st.Untimed, st.Sampled, 100*float64(st.Sampled-st.Untimed)/float64(st.Sampled))
	}
	return nil
}

// traceFormat is the format -o and --format ask for.
func traceFormat(o traceOptions) (trace.Format, error) {
	if o.out == "" {
		return 0, usageErrorf("trace: -o FILE is required (.json for Chrome JSON, .perfetto-trace for Perfetto)")
	}
	byName, named := trace.FormatOf(o.out)
	if o.format == "" {
		switch {
		case o.out == "-":
			return 0, usageErrorf("trace: -o - (standard output) has no name to tell the format by: give --format chrome or --format perfetto")
		case !named:
			return 0, usageErrorf("trace: cannot tell the format of %q from its name: end it in .json or .perfetto-trace, or give --format chrome|perfetto", o.out)
		}
		return byName, nil
	}
	f, err := trace.ParseFormat(o.format)
	if err != nil {
		return 0, usageErrorf("trace: --format: %v", err)
	}
	if named && f != byName {
		return 0, usageErrorf("trace: -o %s names a %s file, but --format is %s", o.out, byName, f)
	}
	return f, nil
}

// parseWindow reads --time A:B; either side may be empty.
func parseWindow(s string) (from, to time.Duration, err error) {
	if s == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("want A:B, e.g. 2s:2.5s")
	}
	if strings.TrimSpace(a) == "" && strings.TrimSpace(b) == "" {
		return 0, 0, fmt.Errorf("names no window: give its start, its end or both, e.g. 2s:, :300ms or 2s:2.5s (or leave the flag out for all)")
	}
	if from, err = parseOffset(a); err != nil {
		return 0, 0, err
	}
	if to, err = parseOffset(b); err != nil {
		return 0, 0, err
	}
	if b != "" && to <= from {
		return 0, 0, fmt.Errorf("the window ends before it starts")
	}
	return from, to, nil
}

func parseOffset(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err == nil {
		if d < 0 {
			return 0, fmt.Errorf("%q is before the start", s)
		}
		return d, nil
	}
	secs, ferr := strconv.ParseFloat(s, 64)
	switch {
	case errors.Is(ferr, strconv.ErrRange) && secs < 0, ferr == nil && secs < 0:
		return 0, fmt.Errorf("%q is before the start", s)
	case errors.Is(ferr, strconv.ErrRange), ferr == nil && secs*float64(time.Second) >= math.MaxInt64:
		return 0, fmt.Errorf("%q is past any timeline: times go up to %.0fs (292 years)", s, math.MaxInt64/float64(time.Second))
	case ferr != nil || math.IsNaN(secs):
		return 0, fmt.Errorf("%q is not a time (like 1.5s, 200ms, or seconds)", s)
	}
	return time.Duration(secs * float64(time.Second)), nil
}
