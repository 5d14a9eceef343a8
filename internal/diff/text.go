package diff

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/gpurr/gpurr/internal/info"
)

// WriteText writes the report for people: each pair, then the pairs that parted first and
// followed.
func (r *Report) WriteText(w io.Writer) error {
	for _, p := range r.Pairs {
		if err := p.WriteText(w); err != nil {
			return err
		}
	}
	return r.WriteTrailer(w)
}

// WriteTrailer writes the lines that follow the pairs: which parted ways first in time, and
// which followed it through a collective.
func (r *Report) WriteTrailer(w io.Writer) error {
	t := info.NewTextWriter(w)
	if r.FirstInTime != "" {
		t.Printf("%d of %s part ways; first in time: %s (wall clock of A)\n", r.Parted, info.Count(len(r.Pairs), "pair"), r.FirstInTime)
	}
	for _, f := range r.Followed {
		t.Printf("%s followed %s through %s (launch %d of A)\n", f.Pair, f.Leader, ShortKernel(f.Kernel), f.Seq)
	}
	return t.Err()
}

// WriteText writes one pair's comparison.
func (p *PairReport) WriteText(w io.Writer) error {
	t := info.NewTextWriter(w)
	label := p.Label()
	switch {
	case p.Outcome == "not-compared":
		t.Printf("%s: not compared: %s\n", label, p.Error)
		return t.Err()
	case !p.Memory && p.Lone == nil:
		t.Printf("%s: the runs launch the same kernels, stream by stream: %s matched (memory not compared)\n", label, info.Count(p.Matched, "launch"))
	case !p.Memory:
		l := p.Lone
		t.Printf("%s: the runs part ways in what they launch: launch %d of %s has no counterpart in %s\n", label, l.Seq, l.Side, other(l.Side))
		t.Printf("  kernel   %s (stream %d)\n", l.Kernel, l.Stream)
		if l.Step != nil {
			t.Printf("  step     %d of %s's %d (%s ended before it)\n", *l.Step, l.Side, l.Steps, l.Unit)
		}
		if l.Range != "" {
			t.Printf("  range    %s\n", l.Range)
		}
		l.Origin.Write(t, l.Side)
		t.Printf("  %s matched (memory not compared)\n", info.Count(p.Matched, "launch"))
	case p.Compared == 0 && p.Digests != nil:
		p.Digests.write(t, label)
	case p.Divergence == nil:
		t.Printf("%s: the runs agree: %d launches compared after they ran (%d matched)\n", label, p.Compared, p.Matched)
		p.WriteSets.Write(t)
	default:
		d := p.Divergence
		t.Printf("%s: the runs part ways at launch %d of A and %d of B: the memory after it differs\n", label, d.SeqA, d.SeqB)
		t.Printf("  kernel   %s (stream %d)\n", d.Kernel, d.Stream)
		d.Step.write(t)
		switch {
		case d.RangeA == d.RangeB && d.RangeA != "":
			t.Printf("  range    %s\n", d.RangeA)
		case d.RangeA != d.RangeB:
			t.Printf("  range    %s in A, %s in B\n", orNone(d.RangeA), orNone(d.RangeB))
		}
		d.OriginA.Write(t, "A")
		d.OriginB.Write(t, "B")
		writeRegions(t, d.Regions, d.RegionsMore, "A", "B")
		d.Explanation.write(t)
		if d.Replay != nil {
			t.Printf("  replay   %s\n", d.Replay.Verdict)
		}
		t.Printf("  %d launches matched, %d compared; %d of them differ after they ran, this one first\n", p.Matched, p.Compared, p.Differ)
		p.WriteSets.Write(t)
	}
	if p.Compared > 0 && p.Digests != nil {
		if f := p.Digests.First; f != nil {
			t.Printf("  digests  part ways in step %d (%s)\n", f.Step, p.Digests.agreedText())
		} else {
			t.Printf("  digests  agree at %s\n", info.Count(p.Digests.Compared, "step"))
		}
	}
	for _, owner := range slices.Sorted(maps.Keys(p.Library)) {
		t.Printf("  %s\n", LibraryLine(p.Library[owner], owner))
	}
	if p.CompileA+p.CompileB > 0 {
		t.Printf("  compile  %d launches of A and %d of B made while XLA compiled and autotuned, not aligned (--include-compile aligns them)\n", p.CompileA, p.CompileB)
	}
	for _, side := range []struct {
		name string
		torn []TornLaunch
	}{{"A", p.TornA}, {"B", p.TornB}} {
		for _, l := range side.torn {
			t.Printf("  torn     launch %d of %s, not compared: %s\n", l.Seq, side.name, strings.Join(l.Tears, "; "))
		}
	}
	if p.TornMore > 0 {
		t.Printf("           ... and %s\n", info.Count(p.TornMore, "more torn launch"))
	}
	if p.AlikeThreads > 1 {
		t.Printf("  %d threads launch alike (same kernel and callstack): paired by the order they were created\n", p.AlikeThreads)
	}
	p.OnlyA.Write(t, "A")
	p.OnlyB.Write(t, "B")
	return t.Err()
}

// libraryName is an Allocation.owner as a person names the library.
// LibraryLine is the line reports print for region states left out of a comparison because
// owner's library made their memory for its own use.
func LibraryLine(n int, owner string) string {
	return fmt.Sprintf("left out %s of %s own memory (it differs from run to run by design; --include-library compares it)",
		info.Count(n, "region state"), LibraryName(owner))
}

// LibraryName is how reports name a library as the owner of memory: "NCCL's".
func LibraryName(owner string) string {
	switch owner {
	case "nccl":
		return "NCCL's"
	case "nvshmem":
		return "NVSHMEM's"
	case "ucx":
		return "UCX's"
	}
	return owner + "'s"
}

// shownDigestAllocs is how many allocations of a step whose digests differ the text names.
const shownDigestAllocs = 8

func (c *DigestComparison) agreedText() string {
	switch c.Agreed {
	case -1:
		return "no step before it agrees"
	case 0:
		return "step 0 agrees"
	}
	return fmt.Sprintf("steps 0-%d agree", c.Agreed)
}

// WriteAllocs writes the allocations that differ, a line each behind prefix, the first
// shownDigestAllocs of them.
func (f *StepDiff) WriteAllocs(t *info.TextWriter, prefix string) {
	for i, a := range f.Allocs {
		if i == shownDigestAllocs {
			t.Printf("%s... and %s\n", prefix, info.Count(len(f.Allocs)-shownDigestAllocs, "more allocation"))
			return
		}
		where := "allocated where no line was recorded"
		if a.Line != "" {
			where = "allocated at " + a.Line
		}
		chunk := ""
		if a.Chunk >= 0 {
			chunk = fmt.Sprintf(": chunk %d differs first", a.Chunk)
		}
		t.Printf("%s%s %s%s\n", prefix, info.FormatBytes(a.Size), where, chunk)
	}
}

// write writes a comparison of two runs by their step digests alone.
func (c *DigestComparison) write(t *info.TextWriter, label string) {
	if c.First == nil {
		t.Printf("%s: the runs agree at every digest: %s compared\n", label, info.Count(c.Compared, "step"))
		if c.OnlyA+c.OnlyB > 0 {
			t.Printf("  steps    %d digested in A only, %d in B only (not compared)\n", c.OnlyA, c.OnlyB)
		}
		return
	}
	f := c.First
	t.Printf("%s: the runs part ways in step %d (%s): the state at its end differs in %d of %s\n", label, f.Step, c.agreedText(),
		len(f.Allocs), info.Count(f.Matched, "allocation"))
	if f.AtEnd {
		t.Printf("  digest   as the runs ended (the last step's)\n")
	} else {
		t.Printf("  digest   before launch %d of A and %d of B\n", f.SeqA, f.SeqB)
	}
	f.WriteAllocs(t, "  alloc    ")
	if f.Unmatched > 0 {
		t.Printf("  %s in one run's digest only (not compared)\n", info.Count(f.Unmatched, "allocation"))
	}
	t.Printf("  narrow   gpurr bisect A B reruns step %d hashing each launch, and names the one that differs\n", f.Step)
}

func other(side string) string {
	if side == "A" {
		return "B"
	}
	return "A"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func (s *Step) write(t *info.TextWriter) {
	switch {
	case s == nil:
	case s.A == s.B:
		t.Printf("  step     %d of A's %d and B's %d (%s ended before it)\n", s.A, s.StepsA, s.StepsB, s.Unit)
	default:
		t.Printf("  step     %d of A's %d, %d of B's %d (%s ended before it)\n", s.A, s.StepsA, s.B, s.StepsB, s.Unit)
	}
}

// Write writes where a launch came from under label (A, B, at): the backward node and forward
// line of a backward launch, then the frames.
func (o Origin) Write(t *info.TextWriter, label string) {
	var lines []string
	switch {
	case o.BackwardNode != "" && o.ForwardLine != "":
		lines = append(lines, fmt.Sprintf("backward of %s, forward at %s", o.BackwardNode, o.ForwardLine))
	case o.BackwardNode != "":
		lines = append(lines, fmt.Sprintf("backward of %s (its forward line was not found)", o.BackwardNode))
	}
	lines = append(lines, o.Frames...)
	if o.NoCallstack {
		lines = append(lines, "(no callstack recorded)")
	}
	for i, line := range lines {
		if i == 0 {
			t.Printf("  %-8s %s\n", label, line)
		} else {
			t.Printf("           %s\n", line)
		}
	}
}

// writeRegions writes regions that differ, with their elements and notes, and how many more
// there are; nameA and nameB name the sides.
func writeRegions(t *info.TextWriter, regions []RegionReport, more int, nameA, nameB string) {
	for _, r := range regions {
		t.Printf("  region %d %s\n", r.Index, r.Text(nameA, nameB))
		for _, e := range r.Elements {
			t.Printf("    [%d] %s %s  %s %s  abs %s  rel %s\n", e.Index, nameA, e.A, nameB, e.B, e.Abs, e.Rel)
		}
		if r.Note != "" {
			t.Printf("    (%s)\n", r.Note)
		}
	}
	WriteMore(t, "  ", more)
}

// WriteMore writes the line that counts the regions a list leaves out, under indent.
func WriteMore(t *info.TextWriter, indent string, more int) {
	if more > 0 {
		t.Printf("%s... and %s\n", indent, info.Count(more, "more region"))
	}
}

// Text describes a region that differs, or whose state is unknown on a side; nameA and nameB
// name the sides in the report.
func (r RegionReport) Text(nameA, nameB string) string {
	where := ""
	if r.region {
		where = fmt.Sprintf("(%s, parameter offset %s)", info.FormatBytes(r.Size), info.JoinOffsets(r.ParamOffsets))
	}
	switch {
	case r.Unknown != "":
		side := map[string]string{"a": nameA, "b": nameB, "both": "both"}[r.Unknown]
		return fmt.Sprintf("%s: not compared: its state is unknown in %s (carried from a state that was lost)", where, side)
	case r.SizeB != 0:
		return fmt.Sprintf("%s: sizes differ, %s %d %s %d bytes; %d of %d chunks differ", where, nameA, r.Size, nameB, r.SizeB, r.DifferentChunks, r.Chunks)
	case r.FirstChunk >= 0:
		return fmt.Sprintf("%s: %d of %d chunks differ, the first at byte 0x%x (chunk %d)", where, r.DifferentChunks, r.Chunks, r.FirstByte, r.FirstChunk)
	}
	return where
}

// write writes the explanation: the verdict, the parameters that differ, and each region's
// state before the launch.
func (e *Explanation) write(t *info.TextWriter) {
	if e == nil {
		return
	}
	t.Printf("  why      %s\n", e.Verdict)
	for i, p := range e.Params {
		label := ""
		if i == 0 {
			label = "params"
		}
		t.Printf("  %-8s %s\n", label, p.Text())
	}
	for i, in := range e.Inputs {
		label := ""
		if i == 0 {
			label = "before"
		}
		t.Printf("  %-8s region %d: %s\n", label, in.Region, in.Text())
	}
	WriteMore(t, "           ", e.InputsMore)
}

// Write writes the notes of write sets, a line each; nothing for none.
func (n *WriteSetNote) Write(t *info.TextWriter) {
	if n == nil {
		return
	}
	if n.unknown > 0 {
		t.Printf("  %s with states on both sides not compared: a region's state after it is unknown (carried from a state that was lost)\n",
			info.Count(n.unknown, "matched launch"))
	}
	if len(n.Learned) > 0 {
		audited := ""
		if n.AuditEvery > 0 {
			audited = fmt.Sprintf(" (audited every %s launch of a kernel)", info.Ordinal(n.AuditEvery))
		}
		t.Printf("  this answer rests on learned write sets (%s): regions a kernel's earlier launches never changed were carried, not hashed%s\n",
			strings.Join(n.Learned, " and "), audited)
	}
	for _, u := range n.Uncertain {
		where := "the first divergence may be in"
		if u.First == 0 {
			where = "a difference may hide in"
		}
		for _, m := range u.Misses {
			t.Printf("  uncertain: in %s an audit at launch %d found a write unseen since launch %d: %s launches %d..%d\n",
				u.Side, m.AuditSeq, m.SinceSeq, where, m.SinceSeq+1, m.AuditSeq)
		}
		if u.More > 0 {
			t.Printf("  uncertain: in %s %d more audits found writes unseen (gpurr query: write_set_misses)\n", u.Side, u.More)
		}
	}
}

// Write writes the launches of one side with no counterpart in the other; nothing for none.
func (u *Unmatched) Write(t *info.TextWriter, side string) {
	if u == nil {
		return
	}
	t.Printf("  %s only in %s:", info.Count(u.Count, "launch"), side)
	for _, l := range u.Launches {
		t.Printf("\n    %d %s", l.Seq, l.Kernel)
	}
	if u.Count > len(u.Launches) {
		t.Printf("\n    ...")
	}
	t.Printf("\n")
}
