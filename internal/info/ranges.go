package info

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"text/tabwriter"

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

// rangeCounter sums kernels' GPU time under the names of the ranges they
// were launched in, each name once per kernel however deep it nests.
type rangeCounter struct {
	byID map[uint64]*recording.Range
	uses map[string]*RangeUse
	seen map[string]bool // the names of one kernel's ranges
}

// newRangeCounter returns nil for a recording without ranges.
func newRangeCounter(d *recording.Data) (*rangeCounter, *Ranges) {
	info := d.Process
	if len(d.Ranges) == 0 && !info.GetNvtx() && info.GetNvtxReason() == "" {
		return nil, nil // older than format 1.7
	}
	s := &Ranges{Recorded: info.GetNvtx(), Reason: info.GetNvtxReason()}
	rc := &rangeCounter{byID: map[uint64]*recording.Range{}, uses: map[string]*RangeUse{}, seen: map[string]bool{}}
	for _, r := range d.AllRanges() {
		rc.byID[r.GetId()] = r
		s.Count++
		if r.GetEndNs() == 0 {
			s.Open++
		}
		key := rangeKey(r.Range)
		u := rc.uses[key]
		if u == nil {
			u = &RangeUse{Name: key}
			rc.uses[key] = u
		}
		u.Ranges++
	}
	return rc, s
}

// add counts a kernel run of ns launched in range id (0: none).
func (rc *rangeCounter) add(id uint64, ns uint64) {
	if rc == nil || id == 0 {
		return
	}
	clear(rc.seen)
	// A damaged recording may link ranges in a cycle: the walk is bounded.
	r := rc.byID[id]
	for steps := 0; r != nil && steps < 256; steps++ {
		key := rangeKey(r.Range)
		if !rc.seen[key] {
			rc.seen[key] = true
			rc.uses[key].Runs++
			rc.uses[key].GPUTimeNS += ns
		}
		r = rc.byID[r.GetParentId()]
	}
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

// rangeOf is the range a kernel run was launched in: its eager launch's,
// or for a graph kernel its replay's (the capture may have been made in
// another range, long before).
func rangeOf(l *pb.Launch, g *pb.GraphLaunch) uint64 {
	if g != nil {
		return g.GetRangeId()
	}
	return l.GetRangeId()
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
		fmt.Fprintf(tab, "    %d\t%d\t%s\t  %s\n", u.Ranges, u.Runs, formatNS(u.GPUTimeNS), u.Name)
	}
	t.err = tab.Flush()
}
