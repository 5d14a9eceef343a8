package nanscan

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/recording"
)

// Report is what gpurr nan found in one process: the data model of both its text (WriteText)
// and its JSON (WriteJSON), and what another verb embeds.
type Report struct {
	Process string   `json:"process"`
	Source  string   `json:"source"` // where the counts come from: "snapshots" or "gpu-counts"
	Types   []string `json:"types"`  // the dtypes looked for NaN as
	// Launches counts the launches looked at: before the one found, or all of them.
	Launches int    `json:"launches"`
	Chunks   int    `json:"chunks,omitempty"` // distinct chunks decoded (snapshots)
	Found    *Found `json:"found,omitempty"`  // nil when no launch holds NaN or Inf
	// NotScanned counts launches with nothing to look at (Stats.NotScanned), UnknownRegions the
	// region states carried from a lost state, and Unclear the launches with NaN bit patterns in
	// regions whose type is unclear from their bytes (without --dtype).
	NotScanned     int `json:"not_scanned,omitempty"`
	UnknownRegions int `json:"unknown_regions,omitempty"`
	Unclear        int `json:"unclear,omitempty"`
	// Library counts the region states left out because a communication library made their
	// memory for its own use, by owner (Stats.Library).
	Library map[string]int `json:"library_left_out,omitempty"`
	// Compile counts the launches of XLA's compilation and autotuning left out (--include-compile).
	Compile int `json:"compile_left_out,omitempty"`
	// Stale counts the launches passed over (before the one found, or all of them) whose
	// regions held only the NaN or Inf their memory already held (Stats.Stale).
	Stale    int      `json:"passed_over,omitempty"`
	Warnings []string `json:"warnings"`
}

// Found is the first launch after which a region holds NaN or Inf.
type Found struct {
	Seq    uint64      `json:"seq"`
	Kernel string      `json:"kernel"`
	Step   *int        `json:"step,omitempty"` // training step, when the run went through steps
	Steps  int         `json:"steps,omitempty"`
	Unit   string      `json:"unit,omitempty"`
	Range  string      `json:"range,omitempty"` // NVTX range path, outermost first
	Origin diff.Origin `json:"origin"`
	// Regions holding NaN or Inf after the launch, the first diff.MaxListed; RegionsMore counts
	// the rest.
	Regions     []RegionReport `json:"regions"`
	RegionsMore int            `json:"regions_more,omitempty"`
	Disagree    []string       `json:"disagree,omitempty"` // the GPU's counts contradict the snapshot's
	Inputs      *Inputs        `json:"inputs,omitempty"`
	// Counted: the counts were taken on the GPU while recording, with no snapshot of the launch.
	Counted bool `json:"counted_on_gpu"`
}

// RegionReport is a region holding NaN or Inf after the launch.
type RegionReport struct {
	Index        int      `json:"index"`
	Size         uint64   `json:"size"`
	ParamOffsets []uint32 `json:"param_offsets"`
	Counts       []Counts `json:"counts"`
	Before       bool     `json:"before"` // its snapshot before the launch held them already
	region       bool
}

// NewReport is the report of a scan of p for NaN as types (explicit: named by the user) that
// found f (nil for none), with at most frames callstack frames. It reads p again for the
// finding's training step and NVTX range; Warnings are the scan's, and a step range that
// matches nothing.
func NewReport(p *recording.Process, types []*dtype.Type, explicit bool, f *Finding, st Stats, frames int) (*Report, error) {
	r := &Report{Process: p.Name, Source: "snapshots", Types: []string{}, Launches: st.Launches, NotScanned: st.NotScanned,
		UnknownRegions: st.Unknown, Library: st.Library, Compile: st.Compile, Stale: st.Stale, Warnings: append([]string{}, st.Warnings...)}
	for _, t := range types {
		r.Types = append(r.Types, t.Name)
	}
	switch {
	case st.Source == GPUCounts:
		r.Source = "gpu-counts"
	default:
		r.Chunks = st.Chunks
		if !explicit {
			r.Unclear = st.Unclear
		}
	}
	if f == nil {
		return r, nil
	}
	l := f.Launch
	found := &Found{Seq: l.GetSeq(), Kernel: "(kernel not in the recording)", Origin: diff.NewOrigin(l, f.Callstack, f.Forward, frames),
		Regions: []RegionReport{}, Disagree: f.Disagree, Inputs: f.Inputs, Counted: f.Source == GPUCounts}
	if f.Kernel != nil {
		found.Kernel = cmp.Or(f.Kernel.GetDemangled(), recording.Demangle(f.Kernel.GetName()))
	}
	step, steps, err := recording.StepOf(p, l.GetSeq())
	if err != nil {
		return nil, err
	}
	if n := steps.Steps(); n > 0 && step >= 0 {
		found.Step, found.Steps, found.Unit = &step, n, steps.Unit()
	} else if none := steps.NoneMatched(); none != "" {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%s: %s", p.Dir, none))
	}
	if found.Range, err = recording.RangePath(p, l.GetRangeId()); err != nil {
		return nil, err
	}
	for i, reg := range f.Regions {
		if i == diff.MaxListed {
			found.RegionsMore = len(f.Regions) - diff.MaxListed
			break
		}
		rr := RegionReport{Index: reg.Index, Counts: reg.Counts, Before: reg.Before, ParamOffsets: []uint32{}}
		if reg.Region != nil {
			rr.region, rr.Size, rr.ParamOffsets = true, reg.Region.GetSize(), append(rr.ParamOffsets, reg.Region.GetParamOffsets()...)
		}
		found.Regions = append(found.Regions, rr)
	}
	r.Found = found
	return r, nil
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error { return diff.WriteJSON(w, r) }

// WriteText writes the report for people.
func (r *Report) WriteText(w io.Writer) error {
	t := info.NewTextWriter(w)
	looked := "with snapshots" // which launches the scan looked at
	if r.Source == "gpu-counts" {
		looked = "counted on the GPU"
	}
	f := r.Found
	if f == nil {
		t.Printf("%s: no NaN or Inf (as %s) after %s", r.Process, strings.Join(r.Types, ","), scanned(r.Launches, looked))
		if r.Source == "snapshots" {
			t.Printf(" (%s read)", info.Count(r.Chunks, "distinct chunk"))
		}
		t.Printf("\n")
		r.notScanned(t, "")
		r.unclear(t, "")
		return t.Err()
	}
	t.Printf("%s: NaN or Inf first after launch %d (%s)\n", r.Process, f.Seq, scannedBefore(r.Launches-1, looked))
	t.Printf("  kernel   %s\n", f.Kernel)
	if f.Step != nil {
		t.Printf("  step     %d of %d (%s ended before it)\n", *f.Step, f.Steps, f.Unit)
	}
	if f.Range != "" {
		t.Printf("  range    %s\n", f.Range)
	}
	f.Origin.Write(t, "at")
	for _, reg := range f.Regions {
		where := ""
		if reg.region {
			where = fmt.Sprintf(" (%s, parameter offset %s)", info.FormatBytes(reg.Size), info.JoinOffsets(reg.ParamOffsets))
		}
		var parts []string
		for _, c := range reg.Counts {
			p := fmt.Sprintf("as %s %d NaN, %d Inf", c.Type, c.NaN, c.Inf)
			if c.First >= 0 {
				p += fmt.Sprintf(" (first at byte 0x%x, element %d)", c.First, c.FirstElement)
			}
			parts = append(parts, p)
		}
		t.Printf("  region %d%s: %s\n", reg.Index, where, strings.Join(parts, "; "))
		if reg.Before {
			if in := f.input(reg.Index); in != nil && in.Writer.Reached() {
				t.Printf("    already there before this launch (%s)\n", in.Writer.Text())
			} else {
				t.Printf("    already there before this launch: it came from outside a kernel (a copy from the host, a memset, memory no kernel wrote)\n")
			}
		}
	}
	diff.WriteMore(t, "  ", f.RegionsMore)
	for _, d := range f.Disagree {
		t.Printf("  !! %s: the recording contradicts itself (please report it)\n", d)
	}
	if in := f.Inputs; in != nil {
		t.Printf("  why      %s\n", in.Verdict)
		for i, reg := range in.Regions {
			label := ""
			if i == 0 {
				label = "before"
			}
			t.Printf("  %-8s region %d: %s\n", label, reg.Region, reg.Text())
		}
		diff.WriteMore(t, "           ", in.More)
	}
	if f.Counted {
		if in := f.Inputs; in == nil || in.Kind == "unknown" {
			t.Printf("  counted on the GPU while recording; the region may have held them before the launch (a copy from the host lands unseen until a kernel reaches it).\n")
		} else {
			t.Printf("  counted on the GPU while recording, after the launch.\n")
		}
		t.Printf("  To see the values: record again with --memory snapshot --snapshot-launches %d, then gpurr nan or gpurr rewind\n", f.Seq)
	}
	r.notScanned(t, "; an earlier one may hold NaN")
	r.unclear(t, " before it")
	return t.Err()
}

// input is the state before the launch of region i, nil when the report does not list it.
func (f *Found) input(i int) *Input {
	if f.Inputs == nil {
		return nil
	}
	for k := range f.Inputs.Regions {
		if f.Inputs.Regions[k].Region == i {
			return &f.Inputs.Regions[k]
		}
	}
	return nil
}

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

// unclear says how many launches hold NaN bit patterns in regions whose bytes fit no type
// asked: their type is unknown, and nan does not guess it.
func (r *Report) unclear(t *info.TextWriter, where string) {
	if r.Unclear == 0 {
		return
	}
	t.Printf("  (%s%s hold NaN bit patterns in regions whose element type is unclear from their bytes (integers, packed data?): --dtype T counts every NaN pattern as T)\n",
		info.Count(r.Unclear, "launch"), where)
}

// notScanned says which launches, and which region states of the others, nan could not look
// at.
func (r *Report) notScanned(t *info.TextWriter, consequence string) {
	for _, owner := range slices.Sorted(maps.Keys(r.Library)) {
		t.Printf("  (%s)\n", diff.LibraryLine(r.Library[owner], owner))
	}
	if r.Compile > 0 {
		t.Printf("  (%s made while XLA compiled and autotuned left out: --include-compile looks at them)\n", info.Count(r.Compile, "launch"))
	}
	if r.Stale > 0 {
		t.Printf("  (passed over: %s whose regions held only the NaN or Inf their memory held before, made by no launch looked at)\n",
			info.Count(r.Stale, "launch"))
	}
	if r.UnknownRegions > 0 {
		t.Printf("  (not scanned: %s carried from a lost state (write sets), with neither counts nor bytes%s)\n",
			info.Count(r.UnknownRegions, "region state"), consequence)
	}
	if r.NotScanned == 0 {
		return
	}
	if r.Source == "gpu-counts" {
		t.Printf("  (%d launches' memory states hold no NaN counts: lost, or the GPU had no memory for the counters (see gpurr info)%s)\n", r.NotScanned, consequence)
		return
	}
	t.Printf("  (%d launches had hashes only, no snapshot, and were not scanned (--snapshot-kernels/--snapshot-launches)%s)\n", r.NotScanned, consequence)
}
