package recording

import (
	"fmt"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// copyKinds name Copy.copy_kind (CUPTI's CUpti_ActivityMemcpyKind).
var copyKinds = []string{"", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"}

// memoryKinds name Copy.src_kind and dst_kind (CUPTI's CUpti_ActivityMemoryKind).
var memoryKinds = []string{"", "pageable", "pinned", "device", "array", "managed", "device_static", "managed_static"}

// CopyDirection names a copy's direction, e.g. "HtoD"; "" for a memset or a kind CUPTI did
// not know, "kind N" for one this reader does not.
func CopyDirection(c *pb.Copy) string { return enumName(copyKinds, c.GetCopyKind()) }

// MemoryKind names a Copy's src_kind or dst_kind, e.g. "pageable"; "" when unknown.
func MemoryKind(kind uint32) string { return enumName(memoryKinds, kind) }

func enumName(names []string, v uint32) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("kind %d", v)
}

// PageableAsync reports whether an asynchronous copy touched pageable host memory: the
// driver staged it and the call returned only when the copy was done (or the staging
// buffer took it), so the host waited where the program asked it not to.
func PageableAsync(c *pb.Copy) bool {
	return !c.GetMemset() && c.GetAsync() && (c.GetSrcKind() == 1 || c.GetDstKind() == 1)
}

// CopyName is how a copy reads in a report: "memcpy HtoD", "memset".
func CopyName(c *pb.Copy) string {
	if c.GetMemset() {
		return "memset"
	}
	if d := CopyDirection(c); d != "" {
		return "memcpy " + d
	}
	return "memcpy"
}

// SyncName names a Sync's type: "stream", "event", "context", "stream_wait_event";
// "unknown" for one CUPTI did not say.
func SyncName(s *pb.Sync) string {
	switch s.GetType() {
	case pb.Sync_EVENT_SYNCHRONIZE:
		return "event"
	case pb.Sync_STREAM_WAIT_EVENT:
		return "stream_wait_event"
	case pb.Sync_STREAM_SYNCHRONIZE:
		return "stream"
	case pb.Sync_CONTEXT_SYNCHRONIZE:
		return "context"
	}
	return "unknown"
}

// HostWait is how long a Sync kept the host waiting: end - start, 0 for a stream made to
// wait for an event (the host returns at once) and for a record without times.
func HostWait(s *pb.Sync) uint64 {
	if s.GetType() == pb.Sync_STREAM_WAIT_EVENT || s.GetEndNs() < s.GetStartNs() {
		return 0
	}
	return s.GetEndNs() - s.GetStartNs()
}

// CopyTime is a Copy's GPU time, end - start; 0 when CUPTI could not time it.
func CopyTime(c *pb.Copy) uint64 {
	if c.GetEndNs() < c.GetStartNs() {
		return 0
	}
	return c.GetEndNs() - c.GetStartNs()
}

// HostCalls indexes host calls by correlation id, to find the call that made a Copy or Sync.
type HostCalls map[uint32]*pb.HostCall

// Add indexes calls.
func (h HostCalls) Add(calls []*pb.HostCall) {
	for _, c := range calls {
		h[c.GetCorrelationId()] = c
	}
}

// Of is the call with correlation id id, nil when none was recorded (an older recording,
// a call the agent does not record, a record lost to a full ring).
func (h HostCalls) Of(id uint32) *pb.HostCall { return h[id] }
