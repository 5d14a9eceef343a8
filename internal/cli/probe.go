package cli

import (
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/instrument"
	"github.com/gpurr/gpurr/internal/probe"
	"github.com/gpurr/gpurr/internal/ptx"
	"github.com/gpurr/gpurr/internal/replay"
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
		return runProbeAll(cmd, src, kernels)
	}
	if !o.replay {
		if live, err := liveProbe(src, o); live != nil || err != nil {
			if err != nil {
				return err
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
	s, err := replay.NewSession(c, replay.Options{Module: []byte(m.String()), ModuleName: "the probed PTX", Device: o.device})
	if err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("probe: %v", err)}
	}
	defer s.Close()
	cfg := c.Recorded()
	n := int(cfg.Grid.X) * int(cfg.Grid.Y) * int(cfg.Grid.Z)
	raw, err := s.Probe(cfg, probe.Fill(n))
	if err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("probe: %v", err)}
	}
	return writeProbe(cmd, o, w, probed{
		header: fmt.Sprintf("launch %d: %s, grid %dx%dx%d, block %dx%dx%d, on %s (%s)", c.Seq, c.Name,
			cfg.Grid.X, cfg.Grid.Y, cfg.Grid.Z, cfg.Block.X, cfg.Block.Y, cfg.Block.Z, s.Device.Name, s.Device.Arch()),
		title: fmt.Sprintf("launch %d: %s", c.Seq, c.Name), raw: raw, grid: cfg.Grid, count: o.count, counted: counted,
	})
}

// probed is a launch's probe buffer and what its report says of it.
type probed struct {
	header, title string // the report's first line; the timeline's name
	raw           []byte
	grid          cuda.Dim3
	count         string // what was counted, "" for nothing
	counted       int    // instructions of the kernel counted
}

// liveProbe is the launch's live probe records (gpurr record --probe) when it has some and
// probe should read them rather than replay; nil when it has none. It is an error when the
// launch ran without probes and has no snapshot to replay, or when no launch is named and the
// process has no snapshotted one to pick but some probed live.
func liveProbe(src *replay.Source, o probeOptions) (*probed, error) {
	d, name := src.Data, src.Proc.Name
	if o.launch == 0 {
		if live := d.ProbedLaunches(); len(live) > 0 && len(src.Replayable()) == 0 {
			return nil, usageErrorf("probe: %s has no snapshotted launch to replay; launches probed live when recorded: %s: say --launch SEQ",
				name, seqList(live, 8))
		}
		return nil, nil
	}
	r := d.ProbeResult(o.launch)
	switch {
	case r == nil:
		return nil, nil
	case r.GetSkipped() != "":
		if _, err := src.Case(o.launch); err != nil {
			return nil, usageErrorf("probe: launch %d ran without probes when recorded (%s), and cannot be replayed: %v", o.launch, r.GetSkipped(), err)
		}
		return nil, nil
	case o.ptxFile != "" || o.count != "":
		return nil, usageErrorf("probe: launch %d was probed live when recorded; --ptx and --count are for a replay: add --replay", o.launch)
	}
	l := src.Links.Launch(o.launch)
	if l == nil {
		return nil, usageErrorf("probe: %s holds launch %d's probe records but not the launch (its record was lost)", name, o.launch)
	}
	kernel := fmt.Sprintf("kernel %d", l.GetKernelId())
	if k := src.Links.Kernel(l.GetKernelId()); k != nil {
		kernel = src.Links.KernelName(k)
	}
	device := fmt.Sprintf("device %d", l.GetDevice())
	for _, dev := range d.Devices {
		if dev.GetOrdinal() == l.GetDevice() {
			device = fmt.Sprintf("%s (sm_%d%d)", dev.GetName(), dev.GetCcMajor(), dev.GetCcMinor())
		}
	}
	g, b := l.GetGrid(), l.GetBlock()
	p := &probed{
		header: fmt.Sprintf("launch %d: %s, grid %dx%dx%d, block %dx%dx%d, probed live on %s when recorded", o.launch, kernel,
			g.GetX(), g.GetY(), g.GetZ(), b.GetX(), b.GetY(), b.GetZ(), device),
		title: fmt.Sprintf("launch %d: %s (probed live)", o.launch, kernel), raw: r.GetCtas(),
		grid: cuda.Dim3{X: g.GetX(), Y: g.GetY(), Z: g.GetZ()},
	}
	for _, k := range d.ProbeKernels {
		if k.GetKernelId() == l.GetKernelId() {
			p.count, p.counted = k.GetCount(), int(k.GetCounted())
		}
	}
	return p, nil
}

// reportProbe writes the report of a launch probed live.
func reportProbe(cmd *cobra.Command, o probeOptions, path string, p *probed) error {
	w, err := probeOutput(cmd, o, path)
	if err != nil {
		return err
	}
	if w != nil {
		defer w.Abort()
	}
	return writeProbe(cmd, o, w, *p)
}

// probeOutput creates the -o file, nil when there is none.
func probeOutput(cmd *cobra.Command, o probeOptions, path string) (*output, error) {
	if o.out == "" {
		return nil, nil
	}
	return createOutput("probe", o.out, cmd.OutOrStdout(), o.force, path)
}

// writeProbe prints the summary of a probe buffer, and writes its timeline to w when not nil.
func writeProbe(cmd *cobra.Command, o probeOptions, w *output, p probed) error {
	ctas, derr := probe.Decode(p.raw)
	out := cmd.OutOrStdout()
	if o.out == "-" {
		out = cmd.ErrOrStderr() // stdout is the timeline's JSON
	}
	termsafe.Fprintln(out, p.header)
	if derr != nil {
		warnf(cmd, "%v", derr)
	}
	sum := probe.Summarize(ctas, o.top)
	writeProbeSummary(out, sum, p.grid)
	if p.count != "" {
		writeProbeCounts(out, sum, p.count, p.counted)
	}
	if w == nil {
		return nil
	}
	if err := probe.WriteChrome(w, ctas, p.title); err != nil {
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

// writeProbeCounts says what --count counted: in all, per CTA, and the CTA that ran the most.
func writeProbeCounts(w io.Writer, s probe.Summary, what string, sites int) {
	termsafe.Fprintf(w, "  count of %s (%s in the kernel): %d run in all; per CTA median %d, max %d (CTA %d)\n",
		what, info.Count(sites, "instruction"), s.Counted, s.CountMedian, s.CountMax.Count, s.CountMax.Index)
}

func writeProbeSummary(w io.Writer, s probe.Summary, grid cuda.Dim3) {
	us := func(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/1e3) }
	termsafe.Fprintf(w, "  %s, span %s; CTA duration median %s, p99 %s, max %s\n", info.Count(s.CTAs, "CTA"), us(s.Span), us(s.Median), us(s.P99), us(s.Max))
	termsafe.Fprintf(w, "  tail: %.0f%% of the span after the median CTA ended\n", 100*s.StragglerFraction)
	termsafe.Fprintf(w, "  SMs: %d used, %.1f waves; imbalance %.2f (busiest SM %d: %s, %s busy)\n",
		len(s.SMs), s.Waves, s.Imbalance, s.Busiest.SM, info.Count(s.Busiest.CTAs, "CTA"), us(s.Busiest.Busy))
	if len(s.Slowest) == 0 {
		return
	}
	termsafe.Fprintf(w, "  slowest CTAs:\n  %8s  %-16s  %4s  %s\n", "cta", "(x,y,z)", "SM", "duration")
	for _, c := range s.Slowest {
		// A grid recorded with a zero or missing dimension (a damaged record) places no CTA.
		at := "?"
		if grid.X > 0 && grid.Y > 0 && grid.Z > 0 {
			x, y, z := c.XYZ(grid.X, grid.Y)
			at = fmt.Sprintf("(%d,%d,%d)", x, y, z)
		}
		termsafe.Fprintf(w, "  %8d  %-16s  %4d  %s\n", c.Index, at, c.SM, us(c.Duration()))
	}
}
