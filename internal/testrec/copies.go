package testrec

import pb "github.com/gpurr/gpurr/recording/recordingpb"

// Callstacks of the Copies variant's calls.
var (
	csLoad = []*pb.Frame{
		py(script, 14, "load_batch"),
		py(script, 39, "main"),
		py(script, 52, "<module>"),
	}
	csSync = []*pb.Frame{
		py(script, 48, "main"),
		py(script, 52, "<module>"),
	}
)

// Host waits of the Copies variant, ns: the stream, event and context
// synchronizations' (CopiesWaitNS is their sum).
const (
	streamWaitNS  = 2_000_000
	eventWaitNS   = 1_000_000
	contextWaitNS = 500_000
	CopiesWaitNS  = streamWaitNS + eventWaitNS + contextWaitNS
)

// LaunchCallNS is how long each launch call of the Copies variant took on the host.
const LaunchCallNS = 4_000

// copyBatch is the Copies variant's data loading and waiting, made after
// initialization: a batch copied to the GPU from pinned memory, labels
// from pageable memory asynchronously (the driver stages them: the host
// waits anyway), a memset of the gradients, a copy of 0 bytes (a call,
// but nothing the GPU runs), the loss copied back with .item(), and the
// waits: the stream, an event, another stream made to wait for that event
// (the host does not wait), and the whole context.
func (p *program) copyBatch() *pb.Batch {
	load, sync := callstack(csLoad), callstack(csSync)
	b := &pb.Batch{Callstacks: []*pb.Callstack{load, sync}}
	p.stats.Callstacks += 2
	corr := uint32(90_000) // CUPTI numbers every API call; the launches' are 100 + seq
	call := func(api string, cs *pb.Callstack, hostNS uint64) *pb.HostCall {
		corr++
		start := p.tick()
		h := &pb.HostCall{Api: api, CorrelationId: corr, Tid: pid(p.rank), StartNs: start, EndNs: start + hostNS,
			CallstackId: cs.Id, Device: uint32(p.rank)}
		p.now += hostNS
		b.HostCalls = append(b.HostCalls, h)
		p.stats.HostCalls++
		return h
	}
	cp := func(h *pb.HostCall, c *pb.Copy, gpuNS uint64) {
		c.Device, c.ContextUid, c.CorrelationId = uint32(p.rank), 1, h.CorrelationId
		if c.StreamId == 0 {
			c.StreamId = defaultSID
		}
		c.StartNs = h.StartNs + queueNS/2
		c.EndNs = c.StartNs + gpuNS
		b.Copies = append(b.Copies, c)
		p.stats.Copies++
	}
	wait := func(h *pb.HostCall, s *pb.Sync) {
		s.CorrelationId, s.ContextUid = h.CorrelationId, 1
		s.StartNs, s.EndNs = h.StartNs+1_000, h.EndNs-1_000
		if s.Type == pb.Sync_STREAM_WAIT_EVENT {
			s.EndNs = s.StartNs
		}
		b.Syncs = append(b.Syncs, s)
		p.stats.Syncs++
	}
	u32 := func(v uint32) *uint32 { return &v }
	const (
		pageable, pinned, device = 1, 2, 3
		htod, dtoh               = 1, 2
	)
	cp(call("cuMemcpyHtoD_v2", load, 400_000), &pb.Copy{CopyKind: htod, SrcKind: pinned, DstKind: device, Bytes: 4 << 20}, 360_000)
	cp(call("cuMemcpyHtoDAsync_v2", load, 300_000), &pb.Copy{CopyKind: htod, SrcKind: pageable, DstKind: device, Bytes: 1 << 20, Async: true}, 250_000)
	cp(call("cuMemsetD8Async", load, 8_000), &pb.Copy{Memset: true, DstKind: device, Bytes: 1 << 20, Async: true}, 5_000)
	call("cuMemcpyDtoD_v2", load, 3_000) // 0 bytes: no copy ran
	cp(call("cuMemcpyDtoHAsync_v2", sync, 30_000), &pb.Copy{CopyKind: dtoh, SrcKind: device, DstKind: pageable, Bytes: 4, Async: true}, 2_000)
	wait(call("cuStreamSynchronize", sync, streamWaitNS+2_000), &pb.Sync{Type: pb.Sync_STREAM_SYNCHRONIZE, StreamId: u32(defaultSID)})
	wait(call("cuEventSynchronize", sync, eventWaitNS+2_000), &pb.Sync{Type: pb.Sync_EVENT_SYNCHRONIZE, EventId: u32(3)})
	wait(call("cuStreamWaitEvent", sync, 2_000), &pb.Sync{Type: pb.Sync_STREAM_WAIT_EVENT, StreamId: u32(captureSID), EventId: u32(3)})
	wait(call("cuCtxSynchronize", sync, contextWaitNS+2_000), &pb.Sync{Type: pb.Sync_CONTEXT_SYNCHRONIZE})
	return b
}
