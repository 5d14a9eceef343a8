package agent

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// hangWatch finds launches the GPU has not finished some time after they were made (gpurr
// record --hang-timeout): a kernel spinning on a flag nobody sets, a deadlocked collective.
// A launch is finished when its kernel's activity record arrives (GPU timing). The writer's
// half-second flush hands over only full CUPTI buffers, so a quiet program's finished kernels
// can sit in a partly filled one: an overdue launch is a suspicion until a forced flush and
// the next look confirm it (check); the incomplete record a forced flush gives for a kernel
// still running (no end time) finishes nothing. Captured launches and graph launches are not watched (a
// graph's kernels carry the graph launch's id).
type hangWatch struct {
	timeout time.Duration
	pending map[uint32]*pb.Launch // by correlation id
	early   map[uint32]bool       // kernels whose record came before their launch's (a flush between the two)
	max     int                   // entries kept: past it the oldest are forgotten (dropped activity records)
	Lost    int                   // launches forgotten that way
	suspect bool                  // the last check found launches overdue and asked for a forced flush
	where   map[uint64]string     // recording.Where of every callstack met, by id
}

func newHangWatch(timeout time.Duration) *hangWatch {
	if timeout <= 0 {
		return nil
	}
	return &hangWatch{timeout: timeout, pending: map[uint32]*pb.Launch{}, early: map[uint32]bool{}, max: 1 << 20,
		where: map[uint64]string{}}
}

func (h *hangWatch) launch(l *pb.Launch) {
	if h == nil || l.GetCaptured() || l.GetResult() != 0 {
		return
	}
	if h.early[l.GetCorrelationId()] {
		delete(h.early, l.GetCorrelationId())
		return
	}
	if len(h.pending) >= h.max {
		h.forgetOldest()
	}
	h.pending[l.GetCorrelationId()] = l
}

func (h *hangWatch) finished(a *pb.KernelActivity) {
	if h == nil {
		return
	}
	if a.GetEndNs() == 0 { // an incomplete record a forced flush hands over: the kernel still runs
		return
	}
	id := a.GetCorrelationId()
	if _, ok := h.pending[id]; ok {
		delete(h.pending, id)
		return
	}
	if len(h.early) >= 1<<16 { // graph kernels, whose launches are not watched, land here too
		clear(h.early)
	}
	h.early[id] = true
}

func (h *hangWatch) forgetOldest() {
	var oldest uint32
	first := true
	for id, l := range h.pending {
		if first || l.GetSeq() < h.pending[oldest].GetSeq() {
			oldest, first = id, false
		}
	}
	delete(h.pending, oldest)
	h.Lost++
}

// overdue lists, oldest first, the launches made more than the timeout before nowNs (the
// launch records' clock) that have not finished; nil when none.
func (h *hangWatch) overdue(nowNs uint64) []*pb.Launch {
	if h == nil {
		return nil
	}
	limit := uint64(h.timeout.Nanoseconds())
	var out []*pb.Launch
	for _, l := range h.pending {
		if nowNs > l.GetHostNs() && nowNs-l.GetHostNs() > limit {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetSeq() < out[j].GetSeq() })
	return out
}

// check is the periodic look: the launches that hang, confirmed (nil when none), or forceFlush
// when some are overdue for the first time, and CUPTI should hand over its partly filled
// buffers before the next check, whose records may finish them.
func (h *hangWatch) check(nowNs uint64) (stuck []*pb.Launch, forceFlush bool) {
	stuck = h.overdue(nowNs)
	switch {
	case len(stuck) == 0:
		h.suspect = false
		return nil, false
	case !h.suspect:
		h.suspect = true
		return nil, true
	}
	return stuck, false
}

// callstack keeps where the call of a callstack the agent met was made (recording.Where),
// for the report to name launches by their lines: the text only, not the frames.
func (h *hangWatch) callstack(c *pb.Callstack) {
	if h != nil {
		h.where[c.GetId()] = recording.Where(c)
	}
}

// hangRecord is the record of a hang found at nowNs: stuck's oldest launch, and the oldest
// unfinished launch of every other stream, which holds the rest of its stream (a stream runs
// its launches in order), with how many each stream has.
func (h *hangWatch) hangRecord(stuck []*pb.Launch, nowNs uint64, kill bool) *pb.Hang {
	type stream struct {
		device, id uint32
	}
	oldest := map[stream]*pb.HangLaunch{}
	for _, p := range h.pending {
		k := stream{p.GetDevice(), p.GetStreamId()}
		o := oldest[k]
		if o == nil || p.GetSeq() < o.GetSeq() {
			o = recording.NewHangLaunch(p, o.GetUnfinished())
			oldest[k] = o
		}
		o.Unfinished++
	}
	l := stuck[0]
	hang := &pb.Hang{HostNs: nowNs, TimeoutNs: uint64(h.timeout.Nanoseconds()), Killed: kill}
	for k, o := range oldest {
		if k == (stream{l.GetDevice(), l.GetStreamId()}) {
			hang.Launch = o // the oldest of its stream: stuck's, which is overdue
		} else {
			hang.Streams = append(hang.Streams, o)
		}
	}
	slices.SortFunc(hang.Streams, func(a, b *pb.HangLaunch) int { return cmp.Compare(a.GetSeq(), b.GetSeq()) })
	return hang
}

// reportHang writes the hang found at nowNs: its Hang record, and its report, a line each, in
// the recording's log and on the program's stderr, each launch named by the line that made it.
func (r *recorder) reportHang(stuck []*pb.Launch, nowNs uint64) {
	hang := r.hang.hangRecord(stuck, nowNs, r.cfg.HangKill)
	r.batch.Hangs = append(r.batch.Hangs, hang)
	r.added()
	name := func(id uint64) string { return r.kernels[id].GetDemangled() }
	where := func(id uint64) (string, bool) {
		text, ok := r.hang.where[id]
		return text, ok
	}
	for _, line := range recording.HangReport(hang, name, where) {
		r.logf("error", "%s%s", recording.HangLogPrefix, line)
		fmt.Fprintf(os.Stderr, "gpurr: %s\n", line)
	}
}
