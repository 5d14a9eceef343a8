package agent

import (
	"testing"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Memory capture's own copies are left out of the program's by correlation id, each once;
// the ids kept are bounded when records never come for them.
func TestOwnCalls(t *testing.T) {
	var o ownCalls
	o.add(7)
	if o.take(8) || !o.take(7) || o.take(7) {
		t.Fatal("an own call's copy not taken exactly once")
	}
	for i := range uint32(3 * ownCallsKept) {
		o.add(100 + i)
	}
	if len(o.ids) > ownCallsKept || len(o.fifo) > ownCallsKept {
		t.Fatalf("%d ids, %d in order kept", len(o.ids), len(o.fifo))
	}
	if !o.take(100+3*ownCallsKept-1) || o.take(100) {
		t.Error("the newest call forgotten, or the oldest kept")
	}
}

// Copies, memsets, waits and host calls decode as the recording has them: the driver call
// named by its callback id, a stream or event CUPTI did not name left unset, and the GPU
// record of gpurr's own copy left out.
func TestRecordCopies(t *testing.T) {
	r := testRecorder(t)
	call := &pb.HostCall{Api: "cuMemcpyHtoDAsync_v2", CorrelationId: 40, Tid: 9, StartNs: 100, EndNs: 250, CallstackId: 11, RangeId: 2, Device: 1, Result: 0}
	r.record(cannedHostCall(call, 277, false))
	sync := &pb.HostCall{Api: "cuStreamSynchronize", CorrelationId: 41, Tid: 9, StartNs: 300, EndNs: 900, Result: 700}
	r.record(cannedHostCall(sync, 126, false))
	r.record(cannedHostCall(&pb.HostCall{CorrelationId: 42}, 279, true)) // memory capture's own copy
	cp := &pb.Copy{CopyKind: 1, SrcKind: 1, DstKind: 3, Bytes: 4096, Async: true, Device: 1, ContextUid: 2, StreamId: 13,
		CorrelationId: 40, StartNs: 120, EndNs: 200}
	set := &pb.Copy{Memset: true, DstKind: 3, Bytes: 0, Value: 7, Device: 1, ContextUid: 2, StreamId: 13, CorrelationId: 43, GraphId: 5, GraphNodeId: 0x900}
	r.record(cannedCopy(cp))
	r.record(cannedCopy(&pb.Copy{CopyKind: 2, Bytes: 1 << 20, CorrelationId: 42}))
	r.record(cannedCopy(set))
	stream := uint32(13)
	waited := &pb.Sync{Type: pb.Sync_STREAM_SYNCHRONIZE, StartNs: 310, EndNs: 890, CorrelationId: 41, ContextUid: 2, StreamId: &stream}
	ctx := &pb.Sync{Type: pb.Sync_CONTEXT_SYNCHRONIZE, StartNs: 1000, EndNs: 1500, CorrelationId: 44, ContextUid: 2}
	r.record(cannedSync(waited))
	r.record(cannedSync(ctx))
	if len(r.batch.HostCalls) != 2 || len(r.batch.Copies) != 2 || len(r.batch.Syncs) != 2 {
		t.Fatalf("%d calls, %d copies, %d syncs", len(r.batch.HostCalls), len(r.batch.Copies), len(r.batch.Syncs))
	}
	equal(t, "copy call", r.batch.HostCalls[0], call)
	equal(t, "sync call", r.batch.HostCalls[1], sync)
	equal(t, "copy", r.batch.Copies[0], cp)
	equal(t, "memset", r.batch.Copies[1], set)
	equal(t, "stream wait", r.batch.Syncs[0], waited)
	equal(t, "context wait", r.batch.Syncs[1], ctx)
}
