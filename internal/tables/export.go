package tables

import (
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// The Export tables: what gpurr export writes as Parquet, one file per
// table and process. docs/trace.md lists their columns.

var exportLaunches = define("launches", "a launch call, or a cuGraphLaunch (graph_launch; the two share the seq numbering)", nil,
	exportCols[callRec](),
	c("seq", Int64, "launch number (launches and graph launches share the numbering)", func(_ *pass, r *callRec) Value { return Int(r.seq) }),
	c("graph_launch", Boolean, "a cuGraphLaunch (the kernel columns are then empty)", func(_ *pass, r *callRec) Value { return Bool(r.g != nil) }),
	c("tid", Int32, "Linux thread", func(_ *pass, r *callRec) Value { return Int(r.tid) }),
	c("device", Int32, "device ordinal", func(_ *pass, r *callRec) Value { return Int(r.device) }),
	c("stream", Int64, "CUstream handle", func(_ *pass, r *callRec) Value { return Int(r.stream) }),
	c("stream_id", Int32, "CUPTI stream id (matches gpu_activity.stream_id)", func(_ *pass, r *callRec) Value { return Int(r.streamID) }),
	c("kernel_id", Int64, "the process's kernel id (kernels.id)", func(_ *pass, r *callRec) Value { return Int(r.l.GetKernelId()) }),
	c("kernel", String, "demangled kernel name", func(_ *pass, r *callRec) Value {
		if r.k == nil {
			return Text("")
		}
		return Text(r.k.demangled)
	}).dict(),
	c("identity", Int64, "kernel identity, stable across runs (format.md)", func(_ *pass, r *callRec) Value {
		if r.k == nil {
			return Int(0)
		}
		return Int(r.k.k.GetIdentity())
	}),
	dims("grid", "grid blocks in", Int32, func(r *callRec) *pb.Dim3 { return r.l.GetGrid() }),
	dims("block", "block threads in", Int32, func(r *callRec) *pb.Dim3 { return r.l.GetBlock() }),
	c("shared_mem_bytes", Int32, "dynamic shared memory", func(_ *pass, r *callRec) Value { return Int(r.l.GetSharedMemBytes()) }),
	c("correlation_id", Int64, "CUPTI correlation id", func(_ *pass, r *callRec) Value { return Int(r.correlationID) }),
	c("host_ns", Int64, "when the call was made, on the recording clock", func(_ *pass, r *callRec) Value { return Int(r.hostNS) }),
	c("host_unix_ns", Int64, "when the call was made, on the wall clock (0 when the recording has no wall-clock start)", func(ps *pass, r *callRec) Value {
		return Int(ps.unix(r.hostNS))
	}),
	c("callstack_id", Int64, "the callstack (callstacks.callstack_id), 0 when none was taken", func(_ *pass, r *callRec) Value { return Int(r.callstack) }),
	c("python_line", String, "its innermost Python frame (a PyTorch backward launch's: its forward launch's, as gpurr query has it)", func(ps *pass, r *callRec) Value {
		return Text(ps.lines(r.lines).python)
	}).dict(),
	c("range_id", Int64, "the innermost NVTX push/pop range open on its thread (ranges of gpurr query), 0 none", func(_ *pass, r *callRec) Value { return Int(r.rangeID) }),
	c("range", String, "that range's path, outermost first: step 5 / forward (shortened as gpurr query's ranges.path); empty when none", func(ps *pass, r *callRec) Value {
		return Text(ps.ranges.Path(r.rangeID))
	}).dict(),
	stepCol,
	autograd("in_backward", Boolean, "PyTorch: made inside an autograd node's backward; null for launches without autograd context (no torch, or not linked: format.md)", inBackward),
	c("backward_node", String, "PyTorch: the autograd node whose backward made it, e.g. MmBackward0", func(_ *pass, r *callRec) Value {
		return Text(r.l.GetAutograd().GetBackwardNode())
	}).dict(),
	autograd("autograd_thread", Int64, "PyTorch's forward thread id (format.md); null without autograd context", autogradThread),
	autograd("autograd_seq", Int64, "PyTorch's autograd sequence number (format.md); null without autograd context", autogradSeq),
	c("forward_callstack_id", Int64, "backward launches: the forward launch's callstack (0: none found)", func(_ *pass, r *callRec) Value {
		return Int(r.l.GetAutograd().GetForwardCallstackId())
	}),
	c("forward_link", String, "how that was found: next_launch or later_launch", func(_ *pass, r *callRec) Value {
		return Text(recording.EnumText(r.l.GetAutograd().GetLink()))
	}).dict(),
	c("captured", Boolean, "made during stream capture", func(_ *pass, r *callRec) Value { return Bool(r.l.GetCaptured()) }),
	c("untimed", Boolean, "made between sampled GPU timing's windows: no kernel run is expected", func(_ *pass, r *callRec) Value { return Bool(r.l.GetUntimed()) }),
	c("graph_node_id", Int64, "the graph node it built (captured launches)", func(_ *pass, r *callRec) Value { return Int(r.l.GetGraphNodeId()) }),
	c("graph_exec", Int64, "graph launches: the executable graph", func(_ *pass, r *callRec) Value { return Int(r.g.GetGraphExec()) }),
	c("api", Int32, "CUPTI callback id (307 cuLaunchKernel, 652 cuLaunchKernelEx, 514 cuGraphLaunch, ...)", func(_ *pass, r *callRec) Value {
		if r.g != nil {
			return Int(graphLaunchAPI)
		}
		return Int(r.l.GetApi())
	}),
	c("result", Int32, "CUresult of the call", func(_ *pass, r *callRec) Value { return Int(r.result) }),
	c("memory_status", String, "with --memory: hash, snapshot, skipped_capture, ... (format.md); empty without", func(_ *pass, r *callRec) Value {
		return Text(recording.EnumText(r.l.GetMemory().GetStatus()))
	}).dict(),
)

// graphLaunchAPI is cuGraphLaunch's CUPTI driver callback id.
const graphLaunchAPI = 514

// unix is a recording-clock time on the wall clock, 0 when unknown.
func (ps *pass) unix(t uint64) int64 {
	if ps.wall == 0 || t == 0 {
		return 0
	}
	return int64(t) + ps.wall
}

var exportKernels = define("kernels", "a CUfunction the process launched", nil,
	exportCols[kernelInfo](),
	c("id", Int64, "the process's kernel id (launches.kernel_id)", func(_ *pass, k *kernelInfo) Value { return Int(k.k.GetId()) }),
	c("identity", Int64, "stable across runs: hash of module and name (format.md)", func(_ *pass, k *kernelInfo) Value { return Int(k.k.GetIdentity()) }),
	c("name", String, "mangled name", func(_ *pass, k *kernelInfo) Value { return Text(k.k.GetName()) }),
	c("demangled", String, "readable name (the name itself when not mangled)", func(_ *pass, k *kernelInfo) Value { return Text(k.demangled) }),
	c("module_sha256", String, "SHA-256 of the module holding it, empty when unknown", func(_ *pass, k *kernelInfo) Value { return Text(k.k.GetModuleSha256()) }).dict(),
	c("params", Int32, "parameter count", func(_ *pass, k *kernelInfo) Value { return Int(len(k.k.GetParams())) }),
	c("param_bytes", Int32, "size of the parameter buffer", func(_ *pass, k *kernelInfo) Value { return Int(k.k.GetParamBytes()) }),
)

var exportCallstacks = define("callstacks", "one frame of a distinct callstack (depth 0 is the innermost)", nil,
	exportCols[frameRec](),
	c("callstack_id", Int64, "the callstack (launches.callstack_id)", func(_ *pass, r *frameRec) Value { return Int(r.c.GetId()) }),
	c("source", String, "python, native or python+native", func(_ *pass, r *frameRec) Value { return Text(r.c.GetSource()) }).dict(),
	c("depth", Int32, "0 is the innermost frame", func(_ *pass, r *frameRec) Value { return Int(r.i) }),
	c("kind", String, "python or native", func(_ *pass, r *frameRec) Value {
		if r.f.GetKind() == pb.Frame_NATIVE {
			return Text("native")
		}
		return Text("python")
	}).dict(),
	c("file", String, "Python source file, or native shared object", func(_ *pass, r *frameRec) Value { return Text(r.f.GetFile()) }).dict(),
	c("line", Int32, "Python line, 0 for native frames", func(_ *pass, r *frameRec) Value { return Int(r.f.GetLine()) }),
	c("function", String, "Python qualified name, or demangled native symbol", func(_ *pass, r *frameRec) Value { return Text(r.f.GetFunction()) }).dict(),
	c("offset", Int64, "native frames: pc minus the object's load address", func(_ *pass, r *frameRec) Value { return Int(r.f.GetOffset()) }),
)

var exportActivity = define("gpu_activity", "a kernel execution on the GPU: the program's, or (gpurr_own) one of gpurr's own memory-capture kernels", nil,
	exportCols[run](),
	c("correlation_id", Int64, "correlation id of the call that ran it (a graph replay's for graph kernels), as CUPTI reports it", func(_ *pass, r *run) Value {
		return Int(r.a.GetCorrelationId())
	}),
	c("device", Int32, "device ordinal", func(_ *pass, r *run) Value { return Int(r.a.GetDevice()) }),
	c("stream_id", Int32, "CUPTI stream id", func(_ *pass, r *run) Value { return Int(r.a.GetStreamId()) }),
	c("start_ns", Int64, "GPU start, recording clock", func(_ *pass, r *run) Value { return Int(r.a.GetStartNs()) }),
	c("end_ns", Int64, "GPU end, recording clock", func(_ *pass, r *run) Value { return Int(r.a.GetEndNs()) }),
	c("start_unix_ns", Int64, "GPU start on the wall clock (0 when the recording has no wall-clock start)", func(ps *pass, r *run) Value {
		return Int(ps.unix(r.a.GetStartNs()))
	}),
	c("duration_ns", Int64, "end_ns - start_ns", func(_ *pass, r *run) Value { return Int(r.duration()) }),
	c("name", String, "kernel name as CUPTI gives it (mangled)", func(_ *pass, r *run) Value { return Text(r.a.GetName()) }).dict(),
	c("demangled", String, "readable kernel name", func(ps *pass, r *run) Value { return Text(ps.links.Demangle(r.a.GetName())) }).dict(),
	c("graph_id", Int32, "executable graph that ran it, 0 for eager kernels", func(_ *pass, r *run) Value { return Int(r.a.GetGraphId()) }),
	c("graph_node_id", Int64, "executable graph node, 0 for eager kernels", func(_ *pass, r *run) Value { return Int(r.a.GetGraphNodeId()) }),
	c("via_graph", Boolean, "run by a graph replay", func(_ *pass, r *run) Value { return Bool(r.a.GetGraphId() != 0) }),
	c("launch_seq", Int64, "the launch call that ran it; for a graph kernel, the launch that captured it; null when the recording lacks it", func(_ *pass, r *run) Value {
		return nullUnless(r.hasLaunch, Int(r.launch.seq))
	}).null(),
	c("graph_launch_seq", Int64, "graph kernels: the cuGraphLaunch that replayed it; null for eager kernels", func(_ *pass, r *run) Value {
		return nullUnless(r.hasReplay, Int(r.replay))
	}).null(),
	c("python_line", String, "innermost Python frame of launch_seq's callstack: for graph kernels, the capture-time line; for a kernel of PyTorch's backward, its forward line", func(ps *pass, r *run) Value {
		if !r.hasLaunch {
			return Text("")
		}
		return Text(ps.lines(r.launch.lines).python)
	}).dict(),
	runShape(Int32),
	c("gpurr_own", Boolean, "one of gpurr's own memory-capture kernels (format 1.2), not the program's", func(_ *pass, r *run) Value { return Bool(r.own) }),
)

var exportRegions = define("region_hashes", "a region's state before or after a launch (--memory)", nil,
	exportCols[stateRow](),
	c("launch_seq", Int64, "the launch", func(_ *pass, r *stateRow) Value { return Int(r.st.GetLaunchSeq()) }),
	c("point", String, "before or after", func(_ *pass, r *stateRow) Value {
		if r.st.GetPoint() == pb.MemoryState_BEFORE {
			return Text("before")
		}
		return Text("after")
	}).dict(),
	c("region", Int32, "index in the launch's regions; -1 on the row of a lost state", func(_ *pass, r *stateRow) Value { return Int(r.i) }),
	c("address", Int64, "start of the region: the whole allocation a parameter points into", func(_ *pass, r *stateRow) Value { return Int(r.r.GetAddress()) }),
	c("size", Int64, "bytes", func(_ *pass, r *stateRow) Value { return Int(r.r.GetSize()) }),
	c("allocation_id", Int64, "the allocation, 0 when found by the driver's range query", func(_ *pass, r *stateRow) Value { return Int(r.r.GetAllocationId()) }),
	c("hash", String, "gpurr-h128 of the region, 32 hex digits (hash.md)", func(_ *pass, r *stateRow) Value { return Text(recording.HashText(r.rs.GetHash())) }),
	c("chunks", Int32, "64 KiB chunks", func(_ *pass, r *stateRow) Value { return Int(len(r.rs.GetChunkHashes()) / recording.HashBytes) }),
	c("chunks_transferred", Int32, "snapshots: chunks that crossed PCIe", func(_ *pass, r *stateRow) Value { return Int(r.rs.GetChunksTransferred()) }),
	c("chunks_missing", Int32, "snapshots: chunks dropped", func(_ *pass, r *stateRow) Value { return Int(r.rs.GetChunksMissing()) }),
	c("snapshot", Boolean, "the bytes are in the process's chunk store", func(_ *pass, r *stateRow) Value { return Bool(r.st.GetSnapshot()) }),
	c("lost", Boolean, "the state was never completed (format.md, Lost states)", func(_ *pass, r *stateRow) Value { return Bool(r.st.GetLost()) }),
	c("lost_reason", String, "why it was lost", func(_ *pass, r *stateRow) Value { return Text(r.st.GetLostReason()) }).dict(),
	c("carried", String, "write sets: proved or learned when the launch could not write the region and its state is that after launch carried_from, not hashed; empty when hashed", func(_ *pass, r *stateRow) Value {
		return Text(recording.CarriedText(r.rs.GetCarried()))
	}).dict(),
	c("carried_from", Int64, "the launch whose state this carried state is, 0 when not carried or unknown", func(_ *pass, r *stateRow) Value { return Int(r.rs.GetCarriedFrom()) }),
	c("unknown", Boolean, "carried from a state that was lost: no hash, to compare as a lost state", func(_ *pass, r *stateRow) Value { return Bool(r.rs.GetUnknown()) }),
)
