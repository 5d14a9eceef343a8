package cli

import (
	"fmt"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/instrument"
	"github.com/gpurr/gpurr/internal/probe"
	"github.com/gpurr/gpurr/internal/ptx"
	"github.com/gpurr/gpurr/internal/termsafe"
)

type probeOptions struct {
	launch  uint64
	ptxFile string
	top     int
	process string
	device  int
	out     string
	force   bool
	count   string
	replay  bool
	all     bool
	kernels string
}

func newProbeCmd() *cobra.Command {
	var o probeOptions
	cmd := &cobra.Command{
		Use:   "probe REC (--launch SEQ [--replay] [--ptx FILE] [--top N] [--count CLASSES] [-o TIMELINE.json] | --all [--kernels REGEX])",
		Short: "Per-CTA timing of a launch, replayed with entry and exit probes or probed live while recording: the slow CTAs, the tail, the SMs",
		Long: `probe replays a snapshotted launch on its recorded inputs with its PTX
instrumented so that, per CTA, its warps note when they started and its
threads when they finished (the GPU's %globaltimer; one thread per warp, or
per group of threads leaving together, writes) and on which SM it ran. It prints the span, the
CTA durations (median, p99, max), the tail (the share of the span after the
median CTA ended), how the CTAs spread over the SMs (waves, imbalance), and
the slowest CTAs with their coordinates and SMs. --count adds, per CTA, how
many times its threads ran the instructions it names (a register per thread,
one atomic add per thread at its exit): the work each CTA did, beside its
time.

It needs the kernel's PTX, as gpurr race does: kept in the recording for
Triton kernels, or --ptx FILE.

A launch that ran with live probes (gpurr record --probe) is summed up from
its recorded records, without replaying it and without a GPU; --replay
replays it all the same. A launch of a probed kernel that ran without
probes says why, and is replayed when it has snapshots. --all sums every
launch probed live up, kernel by kernel (--kernels REGEX picks kernels).`,
		Example: `  gpurr probe run --launch 42
  gpurr probe run --launch 42 --ptx kernel.ptx --top 20
  gpurr probe run --launch 42 --count global-load,global-store
  gpurr probe run --launch 42 --replay
  gpurr probe run --all --kernels matmul`,
		Args: positional(1, 1, "one recording"),
		RunE: func(cmd *cobra.Command, args []string) error { return runProbe(cmd, o, args[0]) },
	}
	f := cmd.Flags()
	launchVar(f, &o.launch, "launch", "launch sequence number (default: the only snapshotted launch)")
	f.BoolVar(&o.replay, "replay", false, "replay the launch even when it was probed live (gpurr record --probe)")
	f.BoolVar(&o.all, "all", false, "sum up every launch probed live (gpurr record --probe), kernel by kernel: spans, tails, SM imbalance, which CTA was the slowest how often")
	f.StringVar(&o.kernels, "kernels", "", "with --all: only kernels whose name matches this regular expression")
	f.StringVar(&o.ptxFile, "ptx", "", "the module's PTX, where the recording has none")
	f.IntVar(&o.top, "top", 10, "slowest CTAs to list")
	f.StringVar(&o.process, "process", "", "process of a multi-process recording: its directory name, pid or rank")
	unsetIntVar(f, &o.device, "device", "GPU to run on (default: the recorded one)")
	outputVar(f, &o.out, "output", "o", "", "also write a timeline, a track per SM and a slice per CTA, as Chrome trace JSON for Perfetto UI")
	f.BoolVar(&o.force, "force", false, "replace the -o file when it exists")
	f.StringVar(&o.count, "count", "", "also count, per CTA, how many times its threads run these instructions: classes ("+classNames()+") or op:REGEX, comma-separated")
	completeValues(cmd, "count", append(classNameList(), "op:")...)
	return cmd
}

func runProbe(cmd *cobra.Command, o probeOptions, path string) error {
	if o.top < 0 {
		return usageErrorf("probe: --top takes 0 or more")
	}
	var kernels *regexp.Regexp
	if o.all || o.kernels != "" {
		if !o.all {
			return usageErrorf("probe: --kernels goes with --all")
		}
		if o.launch != 0 || o.replay || o.ptxFile != "" || o.count != "" || o.out != "" {
			return usageErrorf("probe: --all sums up the launches probed live: not with --launch, --replay, --ptx, --count or -o")
		}
		if o.kernels != "" {
			var err error
			if kernels, err = regexp.Compile(o.kernels); err != nil {
				return usageErrorf("probe: --kernels: %v", err)
			}
		}
	}
	src, err := openReplaySource(cmd, path, o.process)
	if err != nil {
		return err
	}
	defer src.Close()
	if o.all {
		all, err := probe.SumLive(src, kernels)
		if err != nil {
			return usageErrorf("probe: %v", err)
		}
		for _, k := range all {
			k.WriteText(cmd.OutOrStdout())
		}
		return nil
	}
	if !o.replay {
		if live, err := probe.Live(src, o.launch, o.ptxFile != "" || o.count != ""); live != nil || err != nil {
			if err != nil {
				return usageErrorf("probe: %v", err)
			}
			return reportProbe(cmd, o, path, live)
		}
	}
	seqs, err := pickLaunches("probe", src, o.launch, false, 0)
	if err != nil {
		return err
	}
	c, err := src.Case(seqs[0])
	if err != nil {
		return usageErrorf("probe: %v", err)
	}
	if r := src.Data.ProbeResult(c.Seq); r.GetSkipped() != "" && !o.replay {
		warnf(cmd, "launch %d ran without probes when recorded (%s); replaying it", c.Seq, r.GetSkipped())
	}
	text, from, err := kernelPTX("probe", src, c, o.ptxFile)
	if err != nil {
		return err
	}
	m, err := ptx.Parse(text)
	if err != nil {
		return usageErrorf("probe: the PTX (%s): %v", from, err)
	}
	var count instrument.Selection
	if o.count != "" {
		if count, err = instrument.ParseSelection(o.count); err != nil {
			return usageErrorf("probe: --count: %v", err)
		}
	}
	counted, err := instrument.InjectProbes(m, c.Kernel.GetName(), count)
	if err != nil {
		return usageErrorf("probe: %v", err)
	}
	if o.count != "" && counted == 0 {
		return usageErrorf("probe: --count %s picks no instruction of %s (gpurr race --list --at %s shows what it would)", o.count, c.Name, o.count)
	}
	w, err := probeOutput(cmd, o, path)
	if err != nil {
		return err
	}
	if w != nil {
		defer w.Abort()
	}
	if err := cuda.Init(); err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("probe: no usable GPU: %v", err)}
	}
	p, err := probe.Replay(c, []byte(m.String()), o.device)
	if err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("probe: %v", err)}
	}
	p.Count, p.Counted = o.count, counted
	return writeProbe(cmd, o, w, p)
}

// reportProbe writes the report of a launch probed live.
func reportProbe(cmd *cobra.Command, o probeOptions, path string, p *probe.Probed) error {
	w, err := probeOutput(cmd, o, path)
	if err != nil {
		return err
	}
	if w != nil {
		defer w.Abort()
	}
	return writeProbe(cmd, o, w, p)
}

// probeOutput creates the -o file, nil when there is none.
func probeOutput(cmd *cobra.Command, o probeOptions, path string) (*output, error) {
	if o.out == "" {
		return nil, nil
	}
	return createOutput("probe", o.out, cmd.OutOrStdout(), o.force, path)
}

// writeProbe prints the report of a launch's probe records, and writes its timeline to w when
// not nil.
func writeProbe(cmd *cobra.Command, o probeOptions, w *output, p *probe.Probed) error {
	ctas, derr := probe.Decode(p.Raw)
	out := cmd.OutOrStdout()
	if o.out == "-" {
		out = cmd.ErrOrStderr() // stdout is the timeline's JSON
	}
	p.WriteText(out, ctas, o.top)
	if derr != nil {
		warnf(cmd, "%v", derr)
	}
	if w == nil {
		return nil
	}
	if err := probe.WriteChrome(w, ctas, p.Title); err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("probe: write %s: %v", o.out, plainError(err))}
	}
	if err := w.Commit(); err != nil {
		return err
	}
	if o.out != "-" {
		termsafe.Fprintf(out, "  timeline: %s (a track per SM; open it at https://ui.perfetto.dev)\n", o.out)
	}
	return nil
}
