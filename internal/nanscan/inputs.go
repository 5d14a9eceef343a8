package nanscan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memview"
)

// Inputs says whether the launch a Finding names made the NaN or passed it on: whether its
// regions held NaN or Inf before it.
type Inputs struct {
	// Kind: "made" (every region was finite before the launch), "passed" (a region held NaN or
	// Inf before it), "unknown" (finite where recorded, but a region's state before it was not).
	Kind    string  `json:"kind"`
	Verdict string  `json:"verdict"` // the line the report prints
	Regions []Input `json:"regions"` // the first diff.MaxListed
	More    int     `json:"more,omitempty"`
}

// Input is one region's state before the launch.
type Input struct {
	Region int    `json:"region"`
	State  string `json:"state"` // finite, nan (it held NaN or Inf), unknown, or library (a library's own memory, left out; From names it)
	// From: "snapshot" (the launch's snapshot before it, decoded), "gpu-counts" (the GPU's
	// counts of the state after launch Seq, the last earlier launch that reached the region),
	// "digest" (the counts of the step digest taken before launch Seq, --hash-steps), "new"
	// (allocated since the last step digest, and reached by no launch before this one), "copy"
	// (the GPU's counts of the state after the copy or memset that wrote it last, which Writer
	// names; format 1.17), "cleared" (gpurr cleared it when it was allocated, and nothing wrote
	// it since: zeros).
	From   string   `json:"from,omitempty"`
	Seq    uint64   `json:"seq,omitempty"`
	Counts []Counts `json:"counts,omitempty"` // as the types that count for the region
	// Writer is the launch that left the region as it was, where the recording says.
	diff.Writer
	Unknown string `json:"unknown,omitempty"`
	Owner   string `json:"owner,omitempty"` // the library whose own memory the region is (State library)
}

// inputs reads each region of the found launch r before it: from its snapshot before it where
// it has one, else from the GPU's counts of the state after the last earlier launch that
// reached the region (diff.PriorStates, one more pass up to the launch), which also names the
// launch that last wrote it.
func (s *scanner) inputs(f *Finding, r *recording.LaunchRecord) (*Inputs, error) {
	regions := r.Launch.GetRegions()
	out := make([]Input, len(regions))
	var hint *dtype.Type
	if r.Kernel != nil {
		hint = KernelType(recording.Demangle(r.Kernel.GetName()), s.types)
	}
	before, err := s.view.State(memview.FromRecord(r), memview.Before)
	if err != nil {
		before = nil
	}
	needPrior := false
	for i := range out {
		in := &out[i]
		in.Region, in.State = i, "unknown"
		if owner := s.library(r.Launch, i); owner != "" {
			in.State, in.Owner = "library", owner
			continue
		}
		if i >= len(before.GetRegions()) || before.GetRegions()[i].GetUnknown() {
			needPrior = true
			continue
		}
		counts, err := s.regionCounts(before.GetRegions()[i])
		if err != nil {
			return nil, fmt.Errorf("launch %d region %d before it: %w", r.Launch.GetSeq(), i, err)
		}
		in.From, in.Counts = "snapshot", s.countsFor(f, i, counts, hint, true)
		in.State = finiteOrNaN(in.Counts)
		needPrior = needPrior || in.State == "nan"
	}
	if needPrior {
		prior, err := diff.PriorStatesRead(s.p, s.calls, r.Launch, s.writes)
		if err != nil {
			return nil, err
		}
		// A region no earlier launch reached may be in the last step digest (--hash-steps), or
		// have been allocated since it: then no kernel wrote it before this one.
		var digested map[uint64]diff.DigestState
		anyDigest := false
		for i, p := range prior {
			if p.State == nil && p.Seq == 0 && regions[i].GetAllocationId() != 0 && digested == nil {
				if digested, anyDigest, err = diff.LastDigest(s.p, r.Launch.GetSeq()); err != nil {
					return nil, err
				}
			}
		}
		for i := range out {
			in, p := &out[i], prior[i]
			in.Writer = diff.WriterOf(p)
			d, inDigest := digested[regions[i].GetAllocationId()]
			switch {
			case in.From != "" || in.Owner != "":
			case p.State == nil && p.Seq == 0 && inDigest && len(d.State.GetNanCount()) > 0:
				in.From, in.Seq = "digest", d.Seq
				in.Counts = s.countsFor(f, i, s.gpuCounts(d.State), hint, false)
				in.State = finiteOrNaN(in.Counts)
			case p.State == nil && p.Seq == 0 && anyDigest && !inDigest && regions[i].GetAllocationId() != 0:
				in.From, in.State = "new", "finite"
			case p.State == nil:
				in.Seq, in.Unknown = p.Seq, p.Unknown
			case p.Cleared:
				in.From, in.State = "cleared", "finite"
			case p.Copy != "" && len(p.State.GetNanCount()) == 0:
				in.Unknown = fmt.Sprintf("the %s that last wrote it holds no NaN counts of it", p.Copy)
			case p.Copy != "":
				in.From = "copy"
				in.Counts = s.countsFor(f, i, s.gpuCounts(p.State), hint, false)
				in.State = finiteOrNaN(in.Counts)
			case p.State.GetUnknown() || len(p.State.GetNanCount()) == 0:
				in.Seq, in.Unknown = p.Seq, fmt.Sprintf("launch %d, the last to reach it, holds no NaN counts of it", p.Seq)
			default:
				in.From, in.Seq = "gpu-counts", p.Seq
				in.Counts = s.countsFor(f, i, s.gpuCounts(p.State), hint, false)
				in.State = finiteOrNaN(in.Counts)
			}
		}
	}
	in := &Inputs{Regions: out[:min(len(out), diff.MaxListed)], More: max(0, len(out)-diff.MaxListed)}
	in.Kind, in.Verdict = inputsVerdict(f, out)
	return in, nil
}

// countsFor keeps, of a region's counts before the launch, those of the types that count for
// it: for a region that holds NaN or Inf after the launch, the types it was reported as; else
// all types asked when the user named them, else the type its bytes are (judge), or for the
// GPU's counts, which carry no bytes, the kernel's type where its name says one.
func (s *scanner) countsFor(f *Finding, i int, counts []Counts, hint *dtype.Type, bytes bool) []Counts {
	if k := slices.IndexFunc(f.Regions, func(r Region) bool { return r.Index == i }); k >= 0 {
		return slices.DeleteFunc(counts, func(c Counts) bool {
			return !slices.ContainsFunc(f.Regions[k].Counts, func(kept Counts) bool { return kept.Type == c.Type })
		})
	}
	switch {
	case s.explicit:
		return counts
	case bytes:
		kept, _ := judge(counts, hint)
		return kept
	case hint != nil:
		return slices.DeleteFunc(counts, func(c Counts) bool { return c.Type != hint.Name })
	}
	return counts
}

func finiteOrNaN(counts []Counts) string {
	if hasNaNOrInf(counts) {
		return "nan"
	}
	return "finite"
}

// inputsVerdict: a region that held NaN or Inf before the launch passed it on; with every
// region finite before it, the launch made it; else the state before it of some region is not
// recorded.
func inputsVerdict(f *Finding, inputs []Input) (kind, line string) {
	what := "NaN"
	if !slices.ContainsFunc(f.Regions, func(r Region) bool {
		return slices.ContainsFunc(r.Counts, func(c Counts) bool { return c.NaN > 0 })
	}) {
		what = "Inf"
	}
	for _, in := range inputs {
		if in.State == "nan" {
			held := "NaN"
			if !slices.ContainsFunc(in.Counts, func(c Counts) bool { return c.NaN > 0 }) {
				held = "Inf"
			}
			return "passed", fmt.Sprintf("it passed it on: region %d held %s before it (%s)", in.Region, held, in.Writer.Text())
		}
	}
	for _, in := range inputs {
		if in.State == "unknown" {
			some := "its inputs were finite where recorded, but "
			if !slices.ContainsFunc(inputs, func(in Input) bool { return in.State == "finite" }) {
				some = ""
			}
			return "unknown", fmt.Sprintf("%sregion %d's state before it was not recorded (%s): the %s may come from there", some, in.Region, in.Unknown, what)
		}
	}
	return "made", fmt.Sprintf("it made the %s: its inputs were finite", what)
}

// Text is a region's state before the launch, for the report.
func (in Input) Text() string {
	var where string
	switch in.From {
	case "snapshot":
		where = "its snapshot before the launch"
	case "gpu-counts":
		where = fmt.Sprintf("counted on the GPU after launch %d", in.Seq)
	case "digest":
		where = fmt.Sprintf("counted in the step digest taken before launch %d; no launch since reached it", in.Seq)
	case "new":
		where = "allocated since the last step digest and reached by no launch before this one"
	case "copy":
		where = "counted on the GPU after the " + in.Writer.Copy
		if in.Writer.Line != "" {
			where += " at " + in.Writer.Line
		}
	case "cleared":
		where = "gpurr cleared it when it was allocated, and nothing wrote it since"
	}
	switch in.State {
	case "library":
		return "left out: " + diff.LibraryName(in.Owner) + " own memory (--include-library looks at it)"
	case "finite":
		return "finite (" + where + ")"
	case "nan":
		var parts []string
		for _, c := range in.Counts {
			if c.NaN+c.Inf > 0 {
				parts = append(parts, fmt.Sprintf("as %s %d NaN, %d Inf", c.Type, c.NaN, c.Inf))
			}
		}
		return fmt.Sprintf("NaN or Inf: %s (%s; %s)", strings.Join(parts, "; "), where, in.Writer.Text())
	}
	return "not recorded: " + in.Unknown
}
