package trace

import (
	"maps"
	"slices"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// copyRecords are a process's copy, memset and synchronization calls and what they did on the
// GPU (format 1.15), kept to the end of its recording: the GPU's records come after the
// calls, in activity buffers, and a program makes few of them beside its launches.
type copyRecords struct {
	calls  []*pb.HostCall
	copies map[uint32][]*pb.Copy // by correlation id
	syncs  map[uint32]*pb.Sync
}

func (cr *copyRecords) add(b *pb.Batch) {
	if len(b.HostCalls)+len(b.Copies)+len(b.Syncs) == 0 {
		return
	}
	if cr.copies == nil {
		cr.copies, cr.syncs = map[uint32][]*pb.Copy{}, map[uint32]*pb.Sync{}
	}
	cr.calls = append(cr.calls, b.HostCalls...)
	for _, c := range b.Copies {
		cr.copies[c.GetCorrelationId()] = append(cr.copies[c.GetCorrelationId()], c)
	}
	for _, s := range b.Syncs {
		cr.syncs[s.GetCorrelationId()] = s
	}
}

// writeCopies writes each call on its thread, as long as it took on the host (a wait is
// the time the host waited), and its copies and memsets on their streams' tracks, with an
// arrow from the call to each; copies whose call is not recorded stand alone. --kernels and
// --launches select launches: with either, no copy is written.
func (ps *procState) writeCopies() error {
	if o := ps.tw.opts; o.Kernels != nil || o.Launches != nil {
		return nil
	}
	cr := &ps.copies
	called := map[uint32]bool{}
	for _, h := range cr.calls {
		corr := h.GetCorrelationId()
		called[corr] = true
		flow, err := ps.writeHostCall(h, cr.syncs[corr], len(cr.copies[corr]) > 0)
		if err != nil {
			return err
		}
		for _, c := range cr.copies[corr] {
			if err := ps.writeCopy(c, flow); err != nil {
				return err
			}
		}
	}
	for _, corr := range slices.Sorted(maps.Keys(cr.copies)) {
		if called[corr] {
			continue
		}
		for _, c := range cr.copies[corr] {
			if err := ps.writeCopy(c, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeHostCall writes a call's slice and returns the flow it starts to its copies (0 when
// none, or the call is outside --time).
func (ps *procState) writeHostCall(h *pb.HostCall, s *pb.Sync, copies bool) (uint64, error) {
	ts, dur := ps.ts(h.GetStartNs()), int64(h.GetEndNs()-min(h.GetStartNs(), h.GetEndNs()))
	if !ps.tw.selected(ts, dur) {
		return 0, nil
	}
	sl := ps.newSlice(h.GetApi(), "copy_call", ts, dur)
	if s != nil {
		sl.cat = "sync"
		sl.args = append(sl.args, str("wait", recording.SyncName(s)), num("wait_ns", int64(recording.HostWait(s))))
		if s.StreamId != nil {
			sl.args = append(sl.args, num("stream", int64(s.GetStreamId())))
		}
		if s.EventId != nil {
			sl.args = append(sl.args, num("event", int64(s.GetEventId())))
		}
	}
	var flow uint64
	if copies {
		flow = uint64(ps.idx+1)<<32 | uint64(h.GetCorrelationId())
		sl.flowOut = flow
	}
	sl.args = append(sl.args, num("device", int64(h.GetDevice())), num("correlation", int64(h.GetCorrelationId())))
	if h.GetResult() != 0 {
		sl.args = append(sl.args, num("result", int64(h.GetResult())))
	}
	o := origin{callstack: h.GetCallstackId(), lines: h.GetCallstackId()}
	sl.args = ps.stackArgs(ps.lineArgs(sl.args, o), o)
	ps.tw.stats.HostCalls++
	return flow, ps.place(ps.thread(h.GetTid()), sl)
}

// writeCopy writes a copy or memset on its stream's track; flow is its call's arrow.
func (ps *procState) writeCopy(c *pb.Copy, flow uint64) error {
	if c.GetEndNs() == 0 || c.GetEndNs() < c.GetStartNs() {
		ps.tw.stats.Skipped++
		return nil
	}
	ts, dur := ps.ts(c.GetStartNs()), int64(recording.CopyTime(c))
	if !ps.tw.selected(ts, dur) {
		return nil
	}
	cat := "memcpy"
	if c.GetMemset() {
		cat = "memset"
	}
	sl := ps.newSlice(recording.CopyName(c), cat, ts, dur)
	sl.args = append(sl.args, num("bytes", int64(c.GetBytes())))
	if c.GetMemset() {
		sl.args = append(sl.args, num("value", int64(c.GetValue())))
	} else {
		sl.args = append(sl.args, str("src", recording.MemoryKind(c.GetSrcKind())))
	}
	sl.args = append(sl.args, str("dst", recording.MemoryKind(c.GetDstKind())), num("async", map[bool]int64{false: 0, true: 1}[c.GetAsync()]))
	if recording.PageableAsync(c) {
		sl.args = append(sl.args, str("pageable_async", "asynchronous copy of pageable memory: the host waited for it"))
	}
	sl.args = append(sl.args, num("stream", int64(c.GetStreamId())), num("device", int64(c.GetDevice())), num("correlation", int64(c.GetCorrelationId())))
	sl.flowIn = flow
	ps.tw.stats.Copies++
	return ps.place(ps.stream(c.GetDevice(), c.GetStreamId()), sl)
}
