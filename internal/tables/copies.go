package tables

import (
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// The tables of copies, memsets and host waits (format 1.15): the GPU's
// records joined to the program's calls that made them by correlation id.
// Recordings before 1.15 have no rows in them.

// copyRow is a copy or memset and the call that made it (nil when none was recorded).
type copyRow struct {
	c    *pb.Copy
	call *pb.HostCall
}

// syncRow is a host wait and the call that waited.
type syncRow struct {
	s    *pb.Sync
	call *pb.HostCall
}

var copiesTable = define("copies", "memory copies and memsets as the GPU ran them (cudaMemcpy*, cudaMemset*, tensor.to, .cpu(); with GPU timing), joined to the call that made them", nil,
	processCol[copyRow](),
	c("kind", String, "memcpy or memset", func(_ *pass, r *copyRow) Value {
		if r.c.GetMemset() {
			return Text("memset")
		}
		return Text("memcpy")
	}).dict(),
	c("direction", String, "a memcpy's direction: HtoD, DtoH, DtoD, HtoH, PtoP, HtoA, AtoH, AtoA, AtoD, DtoA; NULL for a memset or when CUPTI did not know it", func(_ *pass, r *copyRow) Value {
		return textOrNull(recording.CopyDirection(r.c))
	}).null().dict(),
	c("src_memory", String, "the source's memory: pageable, pinned, device, array, managed, device_static, managed_static; NULL for a memset or when unknown", func(_ *pass, r *copyRow) Value {
		return textOrNull(recording.MemoryKind(r.c.GetSrcKind()))
	}).null().dict(),
	c("dst_memory", String, "the destination's memory (a memset's: the memory it set), as src_memory", func(_ *pass, r *copyRow) Value {
		return textOrNull(recording.MemoryKind(r.c.GetDstKind()))
	}).null().dict(),
	c("bytes", Int64, "bytes copied or set", func(_ *pass, r *copyRow) Value { return Int(r.c.GetBytes()) }),
	c("value", Int64, "a memset's value, NULL for a memcpy", func(_ *pass, r *copyRow) Value {
		return nullUnless(r.c.GetMemset(), Int(r.c.GetValue()))
	}).null(),
	c("async", Boolean, "1 when an asynchronous call made it (cudaMemcpyAsync, non_blocking=True)", func(_ *pass, r *copyRow) Value { return Bool(r.c.GetAsync()) }),
	c("pageable_async", Boolean, "1 for an asynchronous copy to or from pageable host memory: the driver staged it and the host waited anyway (pin the memory to overlap it)", func(_ *pass, r *copyRow) Value {
		return Bool(recording.PageableAsync(r.c))
	}),
	c("device", Int64, "device ordinal", func(_ *pass, r *copyRow) Value { return Int(r.c.GetDevice()) }),
	c("context_uid", Int64, "CUPTI context id", func(_ *pass, r *copyRow) Value { return Int(r.c.GetContextUid()) }),
	c("stream_id", Int64, "CUPTI stream id it ran on (launches.stream_id)", func(_ *pass, r *copyRow) Value { return Int(r.c.GetStreamId()) }),
	c("correlation_id", Int64, "CUPTI correlation id of the call that made it (host_calls.correlation_id)", func(_ *pass, r *copyRow) Value { return Int(r.c.GetCorrelationId()) }),
	c("start_ns", Int64, "start on the GPU, recording clock; NULL when CUPTI could not time it", func(_ *pass, r *copyRow) Value {
		return nullUnless(r.c.GetEndNs() != 0, Int(r.c.GetStartNs()))
	}).null(),
	c("end_ns", Int64, "end on the GPU; NULL when untimed", func(_ *pass, r *copyRow) Value { return idOrNull(r.c.GetEndNs()) }).null(),
	c("duration_ns", Int64, "end_ns - start_ns; NULL when untimed", func(_ *pass, r *copyRow) Value {
		return nullUnless(r.c.GetEndNs() != 0, Int(recording.CopyTime(r.c)))
	}).null(),
	c("graph_id", Int64, "executable graph that ran it, 0 for one a call made", func(_ *pass, r *copyRow) Value { return Int(r.c.GetGraphId()) }),
	hostCallCols("call_", func(r *copyRow) *pb.HostCall { return r.call }),
)

var syncsTable = define("syncs", "times the host waited for the GPU (cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize, torch.cuda.synchronize, .item()) and streams made to wait for an event (cudaStreamWaitEvent; the host does not wait); with GPU timing", nil,
	processCol[syncRow](),
	c("type", String, "stream, event, context or stream_wait_event", func(_ *pass, r *syncRow) Value { return Text(recording.SyncName(r.s)) }).dict(),
	c("context_uid", Int64, "CUPTI context id", func(_ *pass, r *syncRow) Value { return Int(r.s.GetContextUid()) }),
	c("stream_id", Int64, "CUPTI stream id waited for (stream) or made to wait (stream_wait_event); NULL for context and event waits", func(_ *pass, r *syncRow) Value {
		return nullUnless(r.s.StreamId != nil, Int(r.s.GetStreamId()))
	}).null(),
	c("event_id", Int64, "CUPTI event id waited for; NULL for context and stream waits", func(_ *pass, r *syncRow) Value {
		return nullUnless(r.s.EventId != nil, Int(r.s.GetEventId()))
	}).null(),
	c("correlation_id", Int64, "CUPTI correlation id of the call (host_calls.correlation_id)", func(_ *pass, r *syncRow) Value { return Int(r.s.GetCorrelationId()) }),
	c("start_ns", Int64, "when the host began to wait, recording clock", func(_ *pass, r *syncRow) Value { return Int(r.s.GetStartNs()) }),
	c("end_ns", Int64, "when it stopped", func(_ *pass, r *syncRow) Value { return Int(r.s.GetEndNs()) }),
	c("wait_ns", Int64, "how long the host waited: end_ns - start_ns, 0 for stream_wait_event", func(_ *pass, r *syncRow) Value { return Int(recording.HostWait(r.s)) }),
	hostCallCols("call_", func(r *syncRow) *pb.HostCall { return r.call }),
)

var hostCallsTable = define("host_calls", "the program's copy, memset and synchronization calls as the host made them (recorded with or without GPU timing); copies and syncs hold what each did on the GPU", nil,
	processCol[pb.HostCall](),
	c("correlation_id", Int64, "CUPTI correlation id (copies.correlation_id, syncs.correlation_id)", func(_ *pass, h *pb.HostCall) Value { return Int(h.GetCorrelationId()) }),
	c("device", Int64, "device ordinal of its context", func(_ *pass, h *pb.HostCall) Value { return Int(h.GetDevice()) }),
	c("range_id", Int64, "ranges.range_id of the innermost NVTX push/pop range open on its thread, NULL when none", func(_ *pass, h *pb.HostCall) Value { return idOrNull(h.GetRangeId()) }).null(),
	hostCallCols("", func(h *pb.HostCall) *pb.HostCall { return h }),
)

// hostCallCols are a call's columns, each named prefix+name: in host_calls,
// and in copies and syncs (prefix call_) the call that made the row's GPU
// work, NULL when none was recorded.
func hostCallCols[R any](prefix string, call func(*R) *pb.HostCall) cols[R] {
	col := func(name string, typ Type, doc string, get func(*pass, *pb.HostCall) Value) cols[R] {
		if prefix != "" {
			doc = "the call's " + doc + "; NULL when the call was not recorded (host_calls)"
		}
		cs := c(prefix+name, typ, doc, func(ps *pass, r *R) Value {
			if h := call(r); h != nil {
				return get(ps, h)
			}
			return Null
		})
		if prefix != "" {
			cs = cs.null()
		}
		return cs
	}
	var out cols[R]
	for _, cs := range []cols[R]{
		col("api", String, "driver call, e.g. cuMemcpyHtoDAsync_v2, cuStreamSynchronize", func(_ *pass, h *pb.HostCall) Value { return Text(h.GetApi()) }).dict(),
		col("tid", Int64, "Linux thread id", func(_ *pass, h *pb.HostCall) Value { return Int(h.GetTid()) }),
		col("host_start_ns", Int64, "time the call entered, recording clock", func(_ *pass, h *pb.HostCall) Value { return Int(h.GetStartNs()) }),
		col("host_end_ns", Int64, "time it returned", func(_ *pass, h *pb.HostCall) Value { return Int(h.GetEndNs()) }),
		col("host_duration_ns", Int64, "host time: host_end_ns - host_start_ns", func(_ *pass, h *pb.HostCall) Value {
			return Int(h.GetEndNs() - min(h.GetStartNs(), h.GetEndNs()))
		}),
		col("result", Int64, "CUresult (0 success)", func(_ *pass, h *pb.HostCall) Value { return Int(h.GetResult()) }),
		col("callstack_id", Int64, "callstacks.callstack_id, NULL when none was taken", func(_ *pass, h *pb.HostCall) Value { return idOrNull(h.GetCallstackId()) }).null(),
		col("python_line", String, "innermost Python frame as file:line function, NULL when none", func(ps *pass, h *pb.HostCall) Value {
			return textOrNull(ps.lines(h.GetCallstackId()).python)
		}).null().dict(),
		col("user_line", String, "innermost Python frame outside installed packages and the standard library, NULL when none", func(ps *pass, h *pb.HostCall) Value {
			return textOrNull(ps.lines(h.GetCallstackId()).user)
		}).null().dict(),
	} {
		out = append(out, cs...)
	}
	return out
}

// copyStateRow is an allocation a copy state names (format 1.17); rs is nil on the row of a
// lost one, and r too when it names none.
type copyStateRow struct {
	st *pb.MemoryState
	rs *pb.RegionState
	r  *pb.Region
}

var copyStatesTable = define("copy_states", "the state of what each copy or memset of the program into device memory wrote (--memory hash or snapshot), hashed on the GPU on the call's stream right after it; one row per allocation it wrote", key("process", "launch_seq"),
	processCol[copyStateRow](),
	c("launch_seq", Int64, "launches.seq (or graph_launches.seq) of the last launch call made before the copy call, 0 for none: the copy lies between it and the next", func(_ *pass, r *copyStateRow) Value {
		return Int(r.st.GetLaunchSeq())
	}),
	c("correlation_id", Int64, "host_calls.correlation_id (and copies.correlation_id) of the call: its driver call and line", func(_ *pass, r *copyStateRow) Value {
		return Int(r.st.GetCorrelationId())
	}),
	c("allocation_id", Int64, "allocations.allocation_id of the allocation it wrote, NULL when found by the driver's range query or not named", func(_ *pass, r *copyStateRow) Value {
		return idOrNull(r.r.GetAllocationId())
	}).null(),
	c("address", Int64, "start of the allocation", func(_ *pass, r *copyStateRow) Value { return nullUnless(r.r != nil, Int(r.r.GetAddress())) }).null(),
	c("size", Int64, "bytes: the whole allocation", func(_ *pass, r *copyStateRow) Value { return nullUnless(r.r != nil, Int(r.r.GetSize())) }).null(),
	c("hash", String, "gpurr-h128 of the allocation after the copy, 32 hex digits (docs/hash.md), NULL when lost", func(_ *pass, r *copyStateRow) Value {
		return nullUnless(r.rs != nil, textOrNull(recording.HashText(r.rs.GetHash())))
	}).null(),
	c("snapshot", Boolean, "1 when its chunks are in the chunk store (snapshot mode)", func(_ *pass, r *copyStateRow) Value { return Bool(r.st.GetSnapshot()) }),
	c("nan", Int64, "elements that are NaN read as the first type of processes.memory_nan_scan, NULL when not counted", func(_ *pass, r *copyStateRow) Value {
		return firstCount(r.rs.GetNanCount())
	}).null(),
	c("inf", Int64, "elements that are +Inf or -Inf as that type, NULL when not counted", func(_ *pass, r *copyStateRow) Value {
		return firstCount(r.rs.GetInfCount())
	}).null(),
	c("lost", Boolean, "1 when gpurr could not take the state (the destination on another device, capture stopped, no room) or it never completed: what the copy wrote is unknown", func(_ *pass, r *copyStateRow) Value {
		return Bool(r.st.GetLost())
	}),
	c("lost_reason", String, "why it was lost, NULL when not lost", func(_ *pass, r *copyStateRow) Value {
		return nullUnless(r.st.GetLost(), Text(r.st.GetLostReason()))
	}).null().dict(),
)

// copyStates emits the rows of a batch's copy states.
func (ps *pass) copyStates(b *pb.Batch) {
	if !ps.want[copyStatesTable.id] {
		return
	}
	for _, st := range b.GetCopyStates() {
		if len(st.GetCopyRegions()) == 0 {
			emit(ps, copyStatesTable, &copyStateRow{st: st})
		}
		for i, reg := range st.GetCopyRegions() {
			r := &copyStateRow{st: st, r: reg}
			if !st.GetLost() && i < len(st.GetRegions()) {
				r.rs = st.GetRegions()[i]
			}
			emit(ps, copyStatesTable, r)
		}
	}
}
