package info

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"text/tabwriter"

	"github.com/gpurr/gpurr/internal/termsafe"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// RangeUse is the GPU work launched inside NVTX ranges of one name: the
// kernels of every launch made in such a range or in a range nested in one.
type RangeUse struct {
	Name      string `json:"name"`   // the ranges' message, runs of digits folded to N ("step N")
	Ranges    int    `json:"ranges"` // ranges of that name
	Runs      int    `json:"runs"`
	GPUTimeNS uint64 `json:"gpu_time_ns"`
}

// Ranges summarizes a process's NVTX ranges.
type Ranges struct {
	Recorded bool       `json:"recorded"`         // the agent recorded ranges (format 1.7)
	Reason   string     `json:"reason,omitempty"` // why not
	Count    int        `json:"count"`
	Open     int        `json:"open,omitempty"` // never closed
	Top      []RangeUse `json:"top_by_gpu_time"`
}

var digits = regexp.MustCompile(`[0-9]+`)

// rangeKey is the name a range's GPU time is summed under: steps 1, 2, 3
// ... are one row.
func rangeKey(r *pb.Range) string { return digits.ReplaceAllString(recording.RangeName(r), "N") }

// rangeCounter sums kernels' GPU time under the names of the ranges they were launched in,
// each name once per kernel however deep it nests. It keeps the ranges still open, and those
// closed in the frame being read, each with the names it counts under; a call takes its
// range's names when it is read, since a range is open while calls are made in it: so it
// needs no memory for ranges that ended, however many a long run opens.
type rangeCounter struct {
	open   map[uint64]*openRange
	uses   map[string]*RangeUse
	closed []uint64 // ranges closed in this frame: forgotten after its calls
	n      int      // range records
	opened int      // ranges not closed
	any    bool     // a range was read
}

type openRange struct {
	uses  []*RangeUse // its name and those of the ranges around it, each once
	ended bool
}

// maxRangeDepth bounds the names a range counts under: a damaged recording may nest ranges
// without end.
const maxRangeDepth = 256

func newRangeCounter() *rangeCounter {
	return &rangeCounter{open: map[uint64]*openRange{}, uses: map[string]*RangeUse{}}
}

// add reads a batch's ranges and range ends.
func (rc *rangeCounter) add(b *pb.Batch) {
	for _, r := range b.GetRanges() {
		rc.any = true
		rc.n++
		key := rangeKey(r)
		u := rc.uses[key]
		if u == nil {
			u = &RangeUse{Name: key}
			rc.uses[key] = u
		}
		u.Ranges++
		x := &openRange{uses: []*RangeUse{u}}
		if parent := rc.open[r.GetParentId()]; parent != nil && r.GetParentId() != 0 {
			for _, pu := range parent.uses {
				if pu != u && len(x.uses) < maxRangeDepth {
					x.uses = append(x.uses, pu)
				}
			}
		}
		rc.open[r.GetId()] = x
		if r.GetEndNs() != 0 {
			x.ended = true
			rc.closed = append(rc.closed, r.GetId())
		} else {
			rc.opened++
		}
	}
	for _, e := range b.GetRangeEnds() {
		if x := rc.open[e.GetId()]; x != nil && !x.ended {
			x.ended = true
			rc.opened--
			rc.closed = append(rc.closed, e.GetId())
		}
	}
}

// closeFrame forgets the ranges closed in the frame whose calls were all read.
func (rc *rangeCounter) closeFrame() {
	for _, id := range rc.closed {
		if x := rc.open[id]; x != nil && x.ended {
			delete(rc.open, id)
		}
	}
	rc.closed = rc.closed[:0]
}

// at is what a call made in range id counts under (nil for id 0: none).
func (rc *rangeCounter) at(id uint64) []*RangeUse {
	if id == 0 {
		return nil
	}
	if x := rc.open[id]; x != nil {
		return x.uses
	}
	return nil
}

// count counts a kernel run of ns under the names of its call's range.
func (rc *rangeCounter) count(uses []*RangeUse, ns uint64) {
	for _, u := range uses {
		u.Runs++
		u.GPUTimeNS += ns
	}
}

// summarize is nil for a recording older than format 1.7, which has no ranges.
func (rc *rangeCounter) summarize(info *pb.Process) *Ranges {
	if !rc.any && !info.GetNvtx() && info.GetNvtxReason() == "" {
		return nil
	}
	return &Ranges{Recorded: info.GetNvtx(), Reason: info.GetNvtxReason(), Count: rc.n, Open: rc.opened, Top: rc.top()}
}

func (rc *rangeCounter) top() []RangeUse {
	var out []RangeUse
	for _, u := range rc.uses {
		if u.Runs > 0 {
			out = append(out, *u)
		}
	}
	slices.SortFunc(out, func(a, b RangeUse) int {
		return cmp.Or(cmp.Compare(b.GPUTimeNS, a.GPUTimeNS), cmp.Compare(b.Runs, a.Runs), cmp.Compare(a.Name, b.Name))
	})
	return out[:min(len(out), topKernels)]
}

// writeField says how many ranges there are, or why none was recorded.
func (r *Ranges) writeField(t *textWriter) {
	if r == nil || t.err != nil {
		return
	}
	if !r.Recorded && r.Count == 0 {
		t.field("NVTX", "ranges not recorded: %s", cmp.Or(r.Reason, "unknown reason"))
		return
	}
	open := ""
	if r.Open > 0 {
		open = fmt.Sprintf(", %d never closed", r.Open)
	}
	t.field("NVTX", "%d ranges%s", r.Count, open)
}

// writeTop writes the range names that launched the most GPU time.
func (r *Ranges) writeTop(t *textWriter) {
	if r == nil || len(r.Top) == 0 || t.err != nil {
		return
	}
	t.printf("\n  top NVTX ranges by GPU time (kernels launched in a range or one nested in it; digits in names folded to N)\n")
	tab := tabwriter.NewWriter(t.w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tab, "    ranges\truns\tGPU time\t  range\n")
	for _, u := range r.Top {
		fmt.Fprintf(tab, "    %d\t%d\t%s\t  %s\n", u.Ranges, u.Runs, formatNS(u.GPUTimeNS), termsafe.String(u.Name))
	}
	t.err = tab.Flush()
}
