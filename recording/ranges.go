package recording

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// RangeSeparator joins the names of nested NVTX ranges in a path.
const RangeSeparator = " / "

// Range is an NVTX range with its end applied and its path: the names of
// the ranges it is nested in, outermost first, then its own, joined by
// RangeSeparator ("step 5 / forward").
//
// A path is bounded, so that ranges nested thousands deep cost memory in
// proportion to their count: it names at most the PathHead outermost
// ranges and the PathTail innermost ones, with "… N more …" for those
// between, and each name cut to PathNameBytes (Ranges.PathWarning says so).
type Range struct {
	*pb.Range
	Path  string
	Depth int // 0 for a range in no other

	head []string // the path's first names, at most PathHead: its parent's once it has as many
	tail []string // the names after head, at most PathTail: the innermost
}

// The bounds of a range's path.
const (
	PathHead      = 4   // outermost ranges a path names
	PathTail      = 8   // innermost ranges a path names, its own last
	PathNameBytes = 128 // a name longer than this is cut, ending in "…"
)

// RangeName is what a path calls a range: its message, or "range N" when
// it has none.
func RangeName(r *pb.Range) string {
	if m := r.GetMessage(); m != "" {
		return m
	}
	return fmt.Sprintf("range %d", r.GetId())
}

// Ranges pairs a process's NVTX ranges with their ends (RangeEnd records
// of later frames) and names each by its path, as a reader streams the
// frames in order (Add). It holds the ranges not yet closed, and those
// closed since the last TakeClosed; a launch's range is open when the
// launch is made, so Get finds it while the launch's frame is read.
type Ranges struct {
	byID   map[uint64]*Range
	closed []*Range

	deepest  int  // the most ranges a path held, those left out included
	cutNames bool // a name was cut in a path
}

// NewRanges returns an empty index.
func NewRanges() *Ranges { return &Ranges{byID: map[uint64]*Range{}} }

// Add indexes a batch's ranges and applies its range ends.
func (rs *Ranges) Add(b *pb.Batch) {
	for _, r := range b.GetRanges() {
		x := &Range{Range: r}
		name := rs.pathName(r)
		switch p := rs.byID[r.GetParentId()]; {
		case p == nil || r.GetParentId() == 0:
			x.head = []string{name}
		case len(p.head) < PathHead:
			x.head, x.Depth = append(slices.Clip(p.head), name), p.Depth+1
		default:
			x.head, x.Depth = p.head, p.Depth+1
			x.tail = append(slices.Clip(p.tail[max(0, len(p.tail)-PathTail+1):]), name)
		}
		x.Path = x.path()
		rs.deepest = max(rs.deepest, x.Depth+1)
		rs.byID[r.GetId()] = x
		if r.GetEndNs() != 0 {
			rs.closed = append(rs.closed, x)
		}
	}
	for _, e := range b.GetRangeEnds() {
		if x := rs.byID[e.GetId()]; x != nil && x.GetEndNs() == 0 {
			x.EndNs = e.GetEndNs()
			rs.closed = append(rs.closed, x)
		}
	}
}

// pathName is what r's path calls it: RangeName cut to PathNameBytes.
func (rs *Ranges) pathName(r *pb.Range) string {
	name := RangeName(r)
	if len(name) <= PathNameBytes {
		return name
	}
	rs.cutNames = true
	cut := PathNameBytes - len("…")
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + "…"
}

// path joins the names of x's path, "… N more …" in place of those left out.
func (x *Range) path() string {
	if len(x.tail) == 0 {
		return strings.Join(x.head, RangeSeparator)
	}
	var b strings.Builder
	b.WriteString(strings.Join(x.head, RangeSeparator))
	if left := x.Depth + 1 - len(x.head) - len(x.tail); left > 0 {
		fmt.Fprintf(&b, "%s… %d more …", RangeSeparator, left)
	}
	for _, name := range x.tail {
		b.WriteString(RangeSeparator)
		b.WriteString(name)
	}
	return b.String()
}

// PathWarning says how the paths of process name's ranges read so far were bounded (Range),
// as a line a reader warns with: "" when none was, else e.g. "rank0: NVTX ranges nest 20000
// deep: range paths name the outermost 4 and innermost 8 (… N more … between)".
func (rs *Ranges) PathWarning(name string) string {
	var parts []string
	if rs.deepest > PathHead+PathTail {
		parts = append(parts, fmt.Sprintf("NVTX ranges nest %d deep: range paths name the outermost %d and innermost %d (… N more … between)",
			rs.deepest, PathHead, PathTail))
	}
	if rs.cutNames {
		parts = append(parts, fmt.Sprintf("range names longer than %d bytes are cut in range paths", PathNameBytes))
	}
	if len(parts) == 0 {
		return ""
	}
	return name + ": " + strings.Join(parts, "; ")
}

// Get is the range with id, nil when unknown (its record was lost, or it
// was closed and taken).
func (rs *Ranges) Get(id uint64) *Range {
	if id == 0 {
		return nil
	}
	return rs.byID[id]
}

// Path is the path of the range with id, "" when unknown.
func (rs *Ranges) Path(id uint64) string {
	if r := rs.Get(id); r != nil {
		return r.Path
	}
	return ""
}

// TakeClosed returns the ranges closed since the last call, in the order
// their ends were read, and forgets them.
func (rs *Ranges) TakeClosed() []*Range {
	out := rs.closed
	rs.closed = nil
	for _, r := range out {
		delete(rs.byID, r.GetId())
	}
	return out
}

// Open returns the ranges never closed, in the order they opened.
func (rs *Ranges) Open() []*Range {
	var out []*Range
	for _, r := range rs.byID {
		if r.GetEndNs() == 0 {
			out = append(out, r)
		}
	}
	sortRanges(out)
	return out
}

// AllRanges are every range of d, closed or not, in the order they opened.
func (d *Data) AllRanges() []*Range {
	rs := NewRanges()
	rs.Add(&pb.Batch{Ranges: d.Ranges, RangeEnds: d.RangeEnds})
	out := append(rs.TakeClosed(), rs.Open()...)
	sortRanges(out)
	return out
}

func sortRanges(rs []*Range) {
	slices.SortFunc(rs, func(a, b *Range) int { return cmp.Compare(a.GetId(), b.GetId()) })
}

// RangePath reads p's ranges until the one with id and returns its path (Ranges.Path):
// where a report names the range of one launch. It is "" when id is 0 or the range's record
// was lost.
func RangePath(p *Process, id uint64) (string, error) {
	if id == 0 {
		return "", nil
	}
	rs := NewRanges()
	path := ""
	_, err := p.Scan(func(b *pb.Batch) error {
		rs.Add(b)
		if path = rs.Path(id); path != "" {
			return errStop
		}
		rs.TakeClosed() // a range's path is made when it opens, inside its open parents
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return path, err
}
