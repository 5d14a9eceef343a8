package probe

import (
	"fmt"
	"io"
	"time"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/replay"
	"github.com/gpurr/gpurr/internal/termsafe"
)

// Probed is one launch's probe records, from a replay (Replay) or from live probes while the
// program ran (Live), and what a report says of it.
type Probed struct {
	Header  string // the report's first line: the launch, its kernel, its shape, where it ran
	Title   string // the timeline's name
	Raw     []byte // the probe buffer (Decode reads it)
	Grid    cuda.Dim3
	Count   string // what was counted (instrument.ParseSelection's text), "" for nothing
	Counted int    // instructions of the kernel counted
}

// Live is launch's records from its live probes (gpurr record --probe) when it has some and
// they are to be read rather than the launch replayed; nil when it has none. replayOnly says
// that what only a replay gives (another PTX, counts) was asked for. It is an error when the
// launch ran without probes and has no snapshot to replay, or when no launch is named (0) and
// the process has no snapshotted one to pick but some probed live.
func Live(src *replay.Source, launch uint64, replayOnly bool) (*Probed, error) {
	d, name := src.Data, src.Proc.Name
	if launch == 0 {
		if live := d.ProbedLaunches(); len(live) > 0 && len(src.Replayable()) == 0 {
			return nil, fmt.Errorf("%s has no snapshotted launch to replay; launches probed live when recorded: %s: say --launch SEQ",
				name, info.SeqList(live, 8))
		}
		return nil, nil
	}
	r := d.ProbeResult(launch)
	switch {
	case r == nil:
		return nil, nil
	case r.GetSkipped() != "":
		if _, err := src.Case(launch); err != nil {
			return nil, fmt.Errorf("launch %d ran without probes when recorded (%s), and cannot be replayed: %v", launch, r.GetSkipped(), err)
		}
		return nil, nil
	case replayOnly:
		return nil, fmt.Errorf("launch %d was probed live when recorded; --ptx and --count are for a replay: add --replay", launch)
	}
	l := src.Links.Launch(launch)
	if l == nil {
		return nil, fmt.Errorf("%s holds launch %d's probe records but not the launch (its record was lost)", name, launch)
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
	p := &Probed{
		Header: fmt.Sprintf("launch %d: %s, grid %dx%dx%d, block %dx%dx%d, probed live on %s when recorded", launch, kernel,
			g.GetX(), g.GetY(), g.GetZ(), b.GetX(), b.GetY(), b.GetZ(), device),
		Title: fmt.Sprintf("launch %d: %s (probed live)", launch, kernel), Raw: r.GetCtas(),
		Grid: cuda.Dim3{X: g.GetX(), Y: g.GetY(), Z: g.GetZ()},
	}
	for _, k := range d.ProbeKernels {
		if k.GetKernelId() == l.GetKernelId() {
			p.Count, p.Counted = k.GetCount(), int(k.GetCounted())
		}
	}
	return p, nil
}

// Replay runs launch c once on its recorded inputs with module, its PTX with probes injected
// (instrument.InjectProbes), on device (-1: the recorded one), and returns its records. The
// caller has initialised CUDA.
func Replay(c *replay.Case, module []byte, device int) (*Probed, error) {
	s, err := replay.NewSession(c, replay.Options{Module: module, ModuleName: "the probed PTX", Device: device})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	cfg := c.Recorded()
	n := int(cfg.Grid.X) * int(cfg.Grid.Y) * int(cfg.Grid.Z)
	raw, err := s.Probe(cfg, Fill(n))
	if err != nil {
		return nil, err
	}
	return &Probed{
		Header: fmt.Sprintf("launch %d: %s, grid %dx%dx%d, block %dx%dx%d, on %s (%s)", c.Seq, c.Name,
			cfg.Grid.X, cfg.Grid.Y, cfg.Grid.Z, cfg.Block.X, cfg.Block.Y, cfg.Block.Z, s.Device.Name, s.Device.Arch()),
		Title: fmt.Sprintf("launch %d: %s", c.Seq, c.Name), Raw: raw, Grid: cfg.Grid,
	}, nil
}

// WriteText writes the report of p's CTAs (Decode of p.Raw): its header, the summary with the
// top slowest CTAs, and what was counted.
func (p *Probed) WriteText(w io.Writer, ctas []CTA, top int) {
	termsafe.Fprintln(w, p.Header)
	sum := Summarize(ctas, top)
	sum.WriteText(w, p.Grid)
	if p.Count != "" {
		sum.WriteCounts(w, p.Count, p.Counted)
	}
}

// WriteCounts says what was counted (what, at sites instructions of the kernel): in all, per
// CTA, and the CTA that ran the most.
func (s Summary) WriteCounts(w io.Writer, what string, sites int) {
	termsafe.Fprintf(w, "  count of %s (%s in the kernel): %d run in all; per CTA median %d, max %d (CTA %d)\n",
		what, info.Count(sites, "instruction"), s.Counted, s.CountMedian, s.CountMax.Count, s.CountMax.Index)
}

// WriteText writes the summary: span, CTA durations, the tail, the SMs and the slowest CTAs
// with their coordinates in grid.
func (s Summary) WriteText(w io.Writer, grid cuda.Dim3) {
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

// us writes a duration in microseconds, as the reports do: "12.5 µs".
func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/1e3) }
