package diff

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Report is what gpurr diff found, pair of processes by pair: the data model of both its
// text (WriteText) and its JSON (WriteJSON), and what another verb embeds.
type Report struct {
	A     string        `json:"a"` // the recordings, as given
	B     string        `json:"b"`
	Pairs []*PairReport `json:"pairs"`
	// Parted counts the pairs that part ways; when several do, FirstInTime names the one that
	// parted first, by the wall clock of A's processes, and Followed the others that ranks
	// waiting on each other's collectives may only have followed.
	Parted      int        `json:"parted"`
	FirstInTime string     `json:"first_in_time,omitempty"`
	Followed    []Followed `json:"followed,omitempty"`
	Unread      []string   `json:"unread,omitempty"` // pairs whose recordings could not be read (exit 2)
	Warnings    []string   `json:"warnings"`
}

// PairReport is the comparison of one process of A with its pair in B.
type PairReport struct {
	A    string `json:"a"` // process names
	B    string `json:"b"`
	Rank *int32 `json:"rank,omitempty"` // A's
	// Outcome: "agree", "part-ways", or "not-compared" (Error says why).
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
	// Memory: the runs' memory was compared; false when a run was recorded without memory
	// capture, and what they launched was compared instead (Lone).
	Memory      bool `json:"memory_compared"`
	Matched     int  `json:"matched"`
	Compared    int  `json:"compared"`
	NotCompared int  `json:"not_compared"` // matched launches with a region's state unknown on a side
	Differ      int  `json:"differ"`
	// AlikeThreads: this many threads of a run launch alike (Run.AlikeThreads), and their
	// streams were paired by the order the threads were created, and nothing else.
	AlikeThreads int           `json:"alike_threads,omitempty"`
	Divergence   *Divergence   `json:"divergence,omitempty"`
	Lone         *LoneLaunch   `json:"lone_launch,omitempty"`
	WriteSets    *WriteSetNote `json:"write_sets,omitempty"`
	OnlyA        *Unmatched    `json:"only_a,omitempty"`
	OnlyB        *Unmatched    `json:"only_b,omitempty"`
	// Library counts, by owner, the region states left out of the comparison because their
	// memory is a communication library's own (Run.Library); --include-library compares them.
	Library map[string]int `json:"library_left_out,omitempty"`
	// CompileA and CompileB count the launches of each run made while XLA compiled and
	// autotuned, left out of the alignment (Run.Compile); --include-compile aligns them.
	CompileA int `json:"compile_left_out_a,omitempty"`
	CompileB int `json:"compile_left_out_b,omitempty"`
	// TornA and TornB list the launches of each run whose state after them was torn: taken
	// while another stream's kernel that reaches the same memory ran (Run.Torn), not compared;
	// the first MaxListed, TornMore counting the rest of both.
	TornA    []TornLaunch `json:"torn_a,omitempty"`
	TornB    []TornLaunch `json:"torn_b,omitempty"`
	TornMore int          `json:"torn_more,omitempty"`
	// Digests compares the runs' step digests, when both have them (format 1.12): the whole
	// comparison of runs recorded with --memory digest, beside the launches' with --hash-steps.
	Digests *DigestComparison `json:"digests,omitempty"`
}

// Label names the pair in the report: "NAME vs NAME".
func (p *PairReport) Label() string { return fmt.Sprintf("%s vs %s", p.A, p.B) }

// RankLabel names the pair by its rank where it has one: "rank 1 (NAME vs NAME)".
func (p *PairReport) RankLabel() string {
	if p.Rank != nil {
		return fmt.Sprintf("rank %d (%s)", *p.Rank, p.Label())
	}
	return p.Label()
}

// shortLabel names the pair in a line about ranks: "rank 1", else "NAME vs NAME".
func (p *PairReport) shortLabel() string {
	if p.Rank != nil {
		return fmt.Sprintf("rank %d", *p.Rank)
	}
	return p.Label()
}

// Divergence is the first launch after which the runs' memory differs.
type Divergence struct {
	SeqA   uint64 `json:"seq_a"`
	SeqB   uint64 `json:"seq_b"`
	Kernel string `json:"kernel"`
	Stream int32  `json:"stream"`
	// WallNs is when A made the launch, by A's wall clock (ns since the Unix epoch): it orders
	// the divergences of several ranks.
	WallNs      int64          `json:"wall_ns"`
	Step        *Step          `json:"step,omitempty"`
	RangeA      string         `json:"range_a,omitempty"` // NVTX range paths, outermost first
	RangeB      string         `json:"range_b,omitempty"`
	OriginA     Origin         `json:"origin_a"`
	OriginB     Origin         `json:"origin_b"`
	Regions     []RegionReport `json:"regions"` // the first MaxListed
	RegionsMore int            `json:"regions_more,omitempty"`
	Explanation *Explanation   `json:"explanation,omitempty"`
	Replay      *Replayed      `json:"replay,omitempty"` // gpurr diff --replay
}

// Replayed is what replaying the launch several times from A's recorded inputs on a GPU says
// (gpurr diff --replay, internal/replay.Repeat).
type Replayed struct {
	Runs     int `json:"runs"`
	Distinct int `json:"distinct"`   // distinct outputs among the replays
	AsA      int `json:"equal_to_a"` // replays whose output equals A's recorded output
	// Kind: "nondeterministic" (the replays differ among themselves), "inputs" (every replay
	// gives A's output: B's inputs differ), "unrecorded" (the replays agree with each other but
	// not with A's output: an input gpurr did not record, or the hardware).
	Kind    string `json:"kind"`
	Verdict string `json:"verdict"`
}

// Step is the training step of a pair of launches.
type Step struct {
	A      int32  `json:"a"`
	B      int32  `json:"b"`
	StepsA int    `json:"steps_a"`
	StepsB int    `json:"steps_b"`
	Unit   string `json:"unit"` // what a step is: "optimizer steps", or "ranges matching ..."
}

// Origin is where a launch came from: its callstack's Python frames (or, with none, its native
// frames), innermost first; for a launch of PyTorch's backward pass, its autograd node and the
// forward line whose backward it computes, whose frames are then shown.
type Origin struct {
	BackwardNode string   `json:"backward_node,omitempty"`
	ForwardLine  string   `json:"forward_line,omitempty"` // "" when the forward launch was not found
	Frames       []string `json:"frames"`
	NoCallstack  bool     `json:"no_callstack,omitempty"` // frames were asked for and there are none
}

// NewOrigin is the origin of launch l from its own callstack and, for a backward launch, its
// forward launch's (nil when the recording has none), or for an XLA kernel the callstack of its
// fusion's lines (LaunchRecord.Forward), with at most n frames.
func NewOrigin(l *pb.Launch, own, forward *pb.Callstack, n int) Origin {
	o := Origin{Frames: []string{}}
	stack := own
	if node := l.GetAutograd().GetBackwardNode(); node != "" {
		o.BackwardNode = node
		if forward != nil {
			o.ForwardLine = cmp.Or(recording.Line(forward), "(no Python frame)")
			stack = forward
		}
	} else if forward != nil { // an XLA kernel: the lines of its fusion
		stack = forward
	}
	for _, f := range stack.GetFrames() {
		if f.GetKind() == pb.Frame_PYTHON && len(o.Frames) < n {
			o.Frames = append(o.Frames, recording.FrameText(f))
		}
	}
	if len(o.Frames) == 0 {
		o.Frames = recording.NativeFrames(stack, n) // a C++ or CUDA program's own code
	}
	o.NoCallstack = len(o.Frames) == 0 && n > 0
	return o
}

// RegionReport is a region whose state after the launch differs, or is unknown on a side.
type RegionReport struct {
	Index        int      `json:"index"`
	Size         uint64   `json:"size"`             // bytes (A's region, else B's)
	SizeB        uint64   `json:"size_b,omitempty"` // B's, when the sizes differ
	ParamOffsets []uint32 `json:"param_offsets"`    // the parameter words that point into it
	// Chunks compared, how many differ and the first (-1 when only the sizes differ), and
	// where it starts.
	Chunks          int    `json:"chunks"`
	DifferentChunks int    `json:"different_chunks"`
	FirstChunk      int    `json:"first_chunk"`
	FirstByte       uint64 `json:"first_byte"`
	// Unknown: the region's state after the launch is unknown on side "a", "b" or "both"
	// (carried from a state that was lost): it was not compared.
	Unknown  string    `json:"unknown,omitempty"`
	Elements []Element `json:"elements,omitempty"` // the first differing elements, with --dtype and snapshots
	Note     string    `json:"note,omitempty"`     // why elements are not shown, when they are not
	region   bool      // the launch holds the region (not only a state of it)
}

// Element is a differing element of a region, as the report prints it: values are text, since
// NaN and Inf are values here.
type Element struct {
	Index uint64 `json:"index"` // in the region
	A     string `json:"a"`
	B     string `json:"b"`
	Abs   string `json:"abs"` // |A - B|
	Rel   string `json:"rel"` // |A - B| / max(|A|, |B|)
}

// NewRegionReport is the report of a region that differs.
func NewRegionReport(d RegionDiff) RegionReport {
	r := RegionReport{Index: d.Index, Chunks: d.Chunks, DifferentChunks: d.DifferentChunks, FirstChunk: d.FirstChunk,
		FirstByte: d.ElementsOff, Note: d.Note, ParamOffsets: []uint32{}}
	if reg := cmp.Or(d.A, d.B); reg != nil {
		r.region, r.Size, r.ParamOffsets = true, reg.GetSize(), append(r.ParamOffsets, reg.GetParamOffsets()...)
	}
	if d.A != nil && d.B != nil && d.A.GetSize() != d.B.GetSize() {
		r.SizeB = d.B.GetSize()
	}
	switch {
	case d.UnknownA && d.UnknownB:
		r.Unknown = "both"
	case d.UnknownA:
		r.Unknown = "a"
	case d.UnknownB:
		r.Unknown = "b"
	}
	for _, e := range d.Elements {
		r.Elements = append(r.Elements, Element{Index: e.Index, A: elemText(e.A, e.BitsA, e.IsReal), B: elemText(e.B, e.BitsB, e.IsReal),
			Abs: fmt.Sprintf("%.3g", e.Abs), Rel: fmt.Sprintf("%.3g", e.Rel)})
	}
	return r
}

func elemText(v float64, bits uint64, real bool) string {
	if real {
		return fmt.Sprintf("%.9g", v)
	}
	return fmt.Sprintf("%d (0x%x)", int64(v), bits)
}

// LoneLaunch is, for runs compared by what they launched (no memory capture), the launch one
// run made and the other did not that was made earliest into its run.
type LoneLaunch struct {
	Side   string `json:"side"` // A or B
	Seq    uint64 `json:"seq"`
	Kernel string `json:"kernel"`
	Stream int32  `json:"stream"`
	WallNs int64  `json:"wall_ns"`
	Step   *int32 `json:"step,omitempty"`
	Steps  int    `json:"steps,omitempty"`
	Unit   string `json:"unit,omitempty"`
	Range  string `json:"range,omitempty"`
	Origin Origin `json:"origin"`
}

// WriteSetNote says what a comparison's answer rests on when runs were recorded with write sets
// (format 1.11).
type WriteSetNote struct {
	// Learned names the sides whose learned write sets carried regions unhashed, audited every
	// AuditEvery-th launch of a kernel.
	Learned    []string    `json:"learned,omitempty"`
	AuditEvery uint32      `json:"audit_every,omitempty"`
	Uncertain  []Uncertain `json:"uncertain,omitempty"`
	unknown    int         // matched launches not compared (PairReport.NotCompared)
}

// Uncertain lists the audits of a side that found a write unseen where a difference may hide:
// before the launch reported (First), or anywhere when that side reports none.
type Uncertain struct {
	Side   string `json:"side"`
	First  uint64 `json:"first,omitempty"`
	Misses []Miss `json:"misses"` // earliest first, the first ShownMisses
	More   int    `json:"more,omitempty"`
}

// Miss is an audit (AuditSeq) that found a region changed since SinceSeq.
type Miss struct {
	AuditSeq uint64 `json:"audit_seq"`
	SinceSeq uint64 `json:"since_seq"`
}

// ShownMisses is how many write set misses a report names per run.
const ShownMisses = 3

// CarrySide is a run as a WriteSetNote names it, with the launch of it reported as where the
// runs part ways (0 when none is).
type CarrySide struct {
	Name  string
	Run   *Run
	First uint64
}

// NewWriteSetNote is what a comparison's answer rests on; nil when nothing needs saying.
func NewWriteSetNote(res *Result, sides ...CarrySide) *WriteSetNote {
	n := &WriteSetNote{unknown: res.Unknown - res.Torn}
	for _, s := range sides {
		if s.Run.WriteSets == "learned" {
			n.Learned = append(n.Learned, s.Name)
			n.AuditEvery = max(n.AuditEvery, s.Run.AuditEvery)
		}
	}
	for _, s := range sides {
		misses := s.Run.Uncertain(s.First)
		if len(misses) == 0 {
			continue
		}
		u := Uncertain{Side: s.Name, First: s.First, More: max(0, len(misses)-ShownMisses)}
		for _, m := range misses[:min(len(misses), ShownMisses)] {
			u.Misses = append(u.Misses, Miss{m.GetAuditSeq(), m.GetSinceSeq()})
		}
		n.Uncertain = append(n.Uncertain, u)
	}
	if n.unknown == 0 && len(n.Learned) == 0 && len(n.Uncertain) == 0 {
		return nil
	}
	return n
}

// Unmatched are the launches of a run with no counterpart in the other.
type Unmatched struct {
	Count    int         `json:"count"`
	Launches []LaunchRef `json:"launches"` // the first ones, as many as asked
}

// LaunchRef names a launch.
type LaunchRef struct {
	Seq    uint64 `json:"seq"`
	Kernel string `json:"kernel"`
}

// NewUnmatched lists launches idx of r, naming the first limit; nil when there are none.
func NewUnmatched(r *Run, idx []int, limit int) *Unmatched {
	if len(idx) == 0 {
		return nil
	}
	u := &Unmatched{Count: len(idx), Launches: []LaunchRef{}}
	for _, i := range idx[:min(len(idx), limit)] {
		l := r.Launches[i]
		u.Launches = append(u.Launches, LaunchRef{l.Seq, r.KernelName(l)})
	}
	return u
}

// Followed is a pair that parted ways after the pair that parted first in time, through a
// collective: it may only have received the other's values.
type Followed struct {
	Pair   string `json:"pair"`   // the one that followed
	Leader string `json:"leader"` // the one that parted first
	Seq    uint64 `json:"seq"`    // the collective's launch, in A
	Kernel string `json:"kernel"`
}

// Options are what a divergence's report shows.
type Options struct {
	Dtype    *dtype.Type // decode differing elements as this type (needs snapshots on both sides)
	Elements int         // differing elements per region
	Frames   int         // callstack frames per launch
}

// NewDivergence reads the launch of a and b where they part ways (res.First) and says where
// it is, what differs after it and why.
func NewDivergence(a, b *Run, res *Result, o Options) (*Divergence, error) {
	la, lb := a.Launches[res.First.A], b.Launches[res.First.B]
	sa, err := ReadLaunch(a.Process, la.Seq)
	if err != nil {
		return nil, err
	}
	sb, err := ReadLaunch(b.Process, lb.Seq)
	if err != nil {
		return nil, err
	}
	proc := a.Process.Info
	d := &Divergence{SeqA: la.Seq, SeqB: lb.Seq, Kernel: a.KernelName(la), Stream: la.Stream,
		WallNs:  proc.GetStartUnixNs() + int64(sa.Launch.GetHostNs()) - int64(proc.GetStartNs()),
		OriginA: NewOrigin(sa.Launch, sa.Callstack, sa.Forward, o.Frames), OriginB: NewOrigin(sb.Launch, sb.Callstack, sb.Forward, o.Frames)}
	if na, nb := a.Steps.Steps(), b.Steps.Steps(); na > 0 || nb > 0 {
		unit := a.Steps.Unit()
		if u := b.Steps.Unit(); u != unit {
			unit = fmt.Sprintf("A's %s, B's %s", unit, u)
		}
		d.Step = &Step{A: la.Step, B: lb.Step, StepsA: na, StepsB: nb, Unit: unit}
	}
	if d.RangeA, err = recording.RangePath(a.Process, sa.Launch.GetRangeId()); err != nil {
		return nil, err
	}
	if d.RangeB, err = recording.RangePath(b.Process, sb.Launch.GetRangeId()); err != nil {
		return nil, err
	}
	regions, err := Differences(sa, sb, o.Dtype, o.Elements)
	if err != nil {
		return nil, err
	}
	d.Regions = []RegionReport{}
	for i, r := range regions {
		if i == MaxListed {
			d.RegionsMore = len(regions) - MaxListed
			break
		}
		d.Regions = append(d.Regions, NewRegionReport(r))
	}
	if d.Explanation, err = Explain(a, b, *res.First, sa, sb); err != nil {
		return nil, err
	}
	return d, nil
}

// NewLoneLaunch is, of the launches one run made and the other did not, the one made earliest
// into its run; nil when there are none.
func NewLoneLaunch(a, b *Run, res *Result, frames int) (*LoneLaunch, error) {
	var first *LoneLaunch
	var firstInto int64
	for _, c := range []struct {
		name string
		run  *Run
		idx  []int
	}{{"A", a, res.OnlyA}, {"B", b, res.OnlyB}} {
		if len(c.idx) == 0 {
			continue
		}
		l := c.run.Launches[c.idx[0]]
		side, err := ReadLaunch(c.run.Process, l.Seq)
		if err != nil {
			return nil, err
		}
		info := c.run.Process.Info
		into := int64(side.Launch.GetHostNs()) - int64(info.GetStartNs()) // ns since its process started
		if first != nil && into >= firstInto {
			continue
		}
		lone := &LoneLaunch{Side: c.name, Seq: l.Seq, Kernel: c.run.KernelName(l), Stream: l.Stream,
			WallNs: info.GetStartUnixNs() + into, Origin: NewOrigin(side.Launch, side.Callstack, side.Forward, frames)}
		if n := c.run.Steps.Steps(); n > 0 {
			step := l.Step
			lone.Step, lone.Steps, lone.Unit = &step, n, c.run.Steps.Unit()
		}
		if lone.Range, err = recording.RangePath(c.run.Process, side.Launch.GetRangeId()); err != nil {
			return nil, err
		}
		first, firstInto = lone, into
	}
	return first, nil
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error { return WriteJSON(w, r) }

// WriteJSON writes v as one indented JSON document, as the reports of diff, nan and verify are.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // C++ names are full of <, > and &
	return enc.Encode(v)
}
