package agent

/*
#include "agent.h"
*/
import "C"

import (
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// copyRecord is a GP_REC_COPY as the recording has it.
func copyRecord(c *C.gp_copy_rec) *pb.Copy {
	return &pb.Copy{
		Memset:        c.memset != 0,
		CopyKind:      uint32(c.copy_kind),
		SrcKind:       uint32(c.src_kind),
		DstKind:       uint32(c.dst_kind),
		Bytes:         uint64(c.bytes),
		Value:         uint32(c.value),
		Async:         c.async != 0,
		Device:        uint32(c.device),
		ContextUid:    uint32(c.context_uid),
		StreamId:      uint32(c.stream_id),
		CorrelationId: uint32(c.correlation_id),
		StartNs:       uint64(c.start),
		EndNs:         uint64(c.end),
		GraphId:       uint32(c.graph_id),
		GraphNodeId:   uint64(c.graph_node_id),
	}
}

// syncRecord is a GP_REC_SYNC as the recording has it: CUPTI's "not this
// kind's" value for stream and event left unset.
func syncRecord(s *C.gp_sync_rec) *pb.Sync {
	out := &pb.Sync{
		Type:          pb.Sync_Type(s._type),
		StartNs:       uint64(s.start),
		EndNs:         uint64(s.end),
		CorrelationId: uint32(s.correlation_id),
		ContextUid:    uint32(s.context_uid),
	}
	if v := uint32(s.stream_id); v != syncNone {
		out.StreamId = &v
	}
	if v := uint32(s.event_id); v != syncNone {
		out.EventId = &v
	}
	return out
}

// syncNone is CUPTI_SYNCHRONIZATION_INVALID_VALUE (cabi.h's GP_SYNC_NONE).
const syncNone = 0xFFFFFFFF

// hostCall is a GP_REC_HOSTCALL as the recording has it; its callstack is
// interned as a launch's (callstack.c).
func hostCall(h *C.gp_hostcall_rec) *pb.HostCall {
	return &pb.HostCall{
		Api:           C.GoString(C.gp_hostcall_name(h.cbid)),
		CorrelationId: uint32(h.correlation_id),
		Tid:           uint32(h.tid),
		StartNs:       uint64(h.start),
		EndNs:         uint64(h.end),
		CallstackId:   uint64(h.callstack_id),
		Result:        int32(h.result),
		RangeId:       uint64(h.range_id),
		Device:        uint32(h.device),
	}
}

// ownCalls are the correlation ids of the copies and memsets gpurr made itself (memory
// capture's), whose GPU records come after them through the ring and are left out of the
// program's. At most ownCallsKept wait: a call whose record never comes (CUPTI dropped it)
// is forgotten with the oldest half.
type ownCalls struct {
	ids  map[uint32]bool
	fifo []uint32
}

const ownCallsKept = 1 << 16

func (o *ownCalls) add(id uint32) {
	if o.ids == nil {
		o.ids = map[uint32]bool{}
	}
	if len(o.fifo) == ownCallsKept {
		for _, old := range o.fifo[:ownCallsKept/2] {
			delete(o.ids, old)
		}
		o.fifo = append(o.fifo[:0], o.fifo[ownCallsKept/2:]...)
	}
	o.ids[id] = true
	o.fifo = append(o.fifo, id)
}

// take reports whether id is a call of gpurr's own, and forgets it: each of those makes one
// copy or memset.
func (o *ownCalls) take(id uint32) bool {
	if !o.ids[id] {
		return false
	}
	delete(o.ids, id)
	return true
}
