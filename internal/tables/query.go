package tables

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// The Query tables: what gpurr query loads into SQLite. Their columns'
// SQL types, names and descriptions are what `gpurr query --schema` lists.

func key(columns ...string) []string { return columns }

var processes = unreadableNull(define("processes", "one row per recorded process, and one per process whose events file cannot be read at all (readable 0: NULL but for process, and hostname, pid and rank as its directory name gives them)", key("process"),
	processCol[procRow](),
	c("pid", Int64, "process id", func(_ *pass, r *procRow) Value { return Int(r.p.GetPid()) }),
	c("ppid", Int64, "parent process id", func(_ *pass, r *procRow) Value { return Int(r.p.GetPpid()) }),
	c("hostname", String, "host it ran on", func(_ *pass, r *procRow) Value { return Text(r.p.GetHostname()) }),
	c("rank", Int64, "RANK from the environment, NULL when unset", func(_ *pass, r *procRow) Value { return optional(r.p.Rank) }).null(),
	c("local_rank", Int64, "LOCAL_RANK, NULL when unset", func(_ *pass, r *procRow) Value { return optional(r.p.LocalRank) }).null(),
	c("world_size", Int64, "WORLD_SIZE, NULL when unset", func(_ *pass, r *procRow) Value { return optional(r.p.WorldSize) }).null(),
	c("argv", String, "command line, arguments separated by spaces", func(_ *pass, r *procRow) Value { return Text(strings.Join(r.p.GetArgv(), " ")) }),
	c("start_ns", Int64, "start on the recording clock (ns; GPU and host timestamps share it)", func(_ *pass, r *procRow) Value { return Int(r.p.GetStartNs()) }),
	c("start_unix_ns", Int64, "wall-clock time at start_ns (ns since 1970), to align hosts", func(_ *pass, r *procRow) Value { return Int(r.p.GetStartUnixNs()) }),
	c("end_ns", Int64, "end on the recording clock, NULL when the recording is incomplete", func(_ *pass, r *procRow) Value {
		return nullUnless(r.end != nil, Int(r.end.GetEndNs()))
	}).null(),
	c("end_reason", String, "why the recording ended (exit, signal, ...), NULL when incomplete", func(_ *pass, r *procRow) Value {
		return nullUnless(r.end != nil, Text(r.end.GetReason()))
	}).null(),
	c("python", String, "detected Python interpreter, empty when none", func(_ *pass, r *procRow) Value { return Text(r.p.GetPython()) }),
	c("agent_version", String, "gpurr agent version that recorded it", func(_ *pass, r *procRow) Value { return Text(r.p.GetAgentVersion()) }),
	c("cupti_path", String, "CUPTI library the agent used", func(_ *pass, r *procRow) Value { return Text(r.p.GetCuptiPath()) }),
	c("driver_version", Int64, "CUDA driver version, e.g. 13000", func(_ *pass, r *procRow) Value { return Int(r.p.GetDriverVersion()) }),
	c("callstack_mode", String, "auto, python, native or off", func(_ *pass, r *procRow) Value { return Text(r.p.GetCallstackMode()) }),
	c("gpu_timing", Boolean, "1 when kernel start/end times on the GPU were collected", func(_ *pass, r *procRow) Value { return Bool(r.p.GetGpuTiming()) }),
	c("kernel_filter", String, "the --kernels regular expression, empty for all", func(_ *pass, r *procRow) Value { return Text(r.p.GetKernelFilter()) }),
	c("complete", Boolean, "1 when the recording was closed normally", func(_ *pass, r *procRow) Value { return Bool(r.end != nil) }),
	c("truncated", Boolean, "1 when the events file ends inside a frame (killed mid-write)", func(_ *pass, r *procRow) Value { return Bool(r.truncated) }),
	c("frames", Int64, "frames read from the events file", func(_ *pass, r *procRow) Value { return Int(r.frames) }),
	memoryConfig("memory_mode", String, "memory capture (--memory): hash or snapshot, NULL when it was off", func(m *pb.MemoryConfig) Value { return Text(m.GetMode()) }),
	memoryConfig("memory_chunk_bytes", Int64, "bytes per chunk of chunk hashes and snapshots (65536), NULL when off", func(m *pb.MemoryConfig) Value { return Int(m.GetChunkBytes()) }),
	memoryConfig("memory_snapshot_kernels", String, "--snapshot-kernels regular expression, empty for all, NULL when off", func(m *pb.MemoryConfig) Value { return Text(m.GetSnapshotKernels()) }),
	memoryConfig("memory_snapshot_launches", String, "--snapshot-launches ranges, empty for all, NULL when off", func(m *pb.MemoryConfig) Value { return Text(m.GetSnapshotLaunches()) }),
	memoryConfig("memory_on_full", String, "what a full staging ring did: backpressure (the program waited) or drop-oldest, NULL when off", func(m *pb.MemoryConfig) Value { return Text(m.GetOnFull()) }),
	memoryConfig("memory_staging_bytes", Int64, "pinned staging ring, NULL when off", func(m *pb.MemoryConfig) Value { return Int(m.GetStagingBytes()) }),
	memoryConfig("memory_flight_recorder", Int64, "snapshots kept of only the last N launches (0: all), NULL when off", func(m *pb.MemoryConfig) Value { return Int(m.GetFlightRecorder()) }),
	memoryConfig("memory_nan_scan", String, "types the GPU counted NaN and Inf as (--nan-scan; nan_counts), comma-separated, empty for none, NULL when off", func(m *pb.MemoryConfig) Value {
		return Text(strings.Join(m.GetNanScan(), ","))
	}),
	memoryConfig("memory_write_sets", String, "which regions a launch left unhashed, carrying an earlier state (--write-sets; memory_states.carried): proved, learned or all (every region hashed); empty for a recording made before write sets (format 1.11), which hashed all; NULL when off", func(m *pb.MemoryConfig) Value {
		return Text(m.GetWriteSets())
	}),
	memoryConfig("memory_audit_every", Int64, "learned write sets: every Nth launch of a kernel hashed all its regions, to audit them (write_set_misses); 0 otherwise; NULL when off", func(m *pb.MemoryConfig) Value {
		return Int(m.GetAuditEvery())
	}),
	memoryConfig("memory_digests", Boolean, "1 when step digests were taken at each training step boundary (--memory digest, --hash-steps; table digests), NULL when off", func(m *pb.MemoryConfig) Value {
		return Bool(m.GetDigests())
	}),
	memoryConfig("memory_digest_every", Int64, "--digest-every: step digests of every Nth step only (steps N-1, 2N-1, ...); 0 or 1 every step; NULL when off", func(m *pb.MemoryConfig) Value {
		return Int(m.GetDigestEvery())
	}),
	memoryConfig("memory_hash_steps", String, "--hash-steps: the training steps whose launches were hashed, K or K-L; empty for all, NULL when off", func(m *pb.MemoryConfig) Value {
		return Text(m.GetHashSteps())
	}),
	torch("torch_version", String, "PyTorch version the agent found, e.g. 2.11.0+cu130 (empty when it could not be read), NULL when no torch was loaded", func(a *pb.AutogradInfo) Value { return Text(a.GetTorchVersion()) }),
	torch("autograd_linked", Boolean, "1 when the launches carry PyTorch's autograd context (launches.in_backward and the like), NULL when no torch was loaded", func(a *pb.AutogradInfo) Value { return Bool(a.GetLinked()) }),
	torch("autograd_reason", String, "why they do not, when autograd_linked is 0 (e.g. a torch version whose layout the agent does not know)", func(a *pb.AutogradInfo) Value { return Text(a.GetReason()) }),
	c("gpu_timing_serial", Boolean, "1 when GPU timing used CUPTI's serial kernel mode (--gpu-timing=serial: kernels ran one at a time)", func(_ *pass, r *procRow) Value { return Bool(r.p.GetGpuTimingSerial()) }),
	c("gpu_timing_sample", String, "ON/EVERY when kernels were timed in windows (--gpu-timing=sample, or steps before a first step ended), else NULL", func(_ *pass, r *procRow) Value {
		return nullUnless(r.p.GetGpuTimingSample() != "", Text(r.p.GetGpuTimingSample()))
	}).null(),
	c("gpu_timing_steps", String, "FIRST/EVERY when kernels were timed by training steps (--gpu-timing=steps, the default: steps 0 to FIRST-1 and every EVERY-th), else NULL", func(_ *pass, r *procRow) Value {
		return nullUnless(r.p.GetGpuTimingSteps() != "", Text(r.p.GetGpuTimingSteps()))
	}).null(),
	c("nvtx", Boolean, "1 when NVTX ranges were recorded (table ranges)", func(_ *pass, r *procRow) Value { return Bool(r.p.GetNvtx()) }),
	c("step_range", String, "the regular expression whose NVTX ranges number the launches' steps (gpurr record --step-range, or the reader's --step-range); empty for torch.optim optimizer steps", func(ps *pass, _ *procRow) Value { return Text(ps.steps.Range()) }),
	c("step_every", Int64, "gpurr record --step-every N: steps are runs of N launch calls, used when step_range is empty; 0 for torch.optim optimizer steps", func(_ *pass, r *procRow) Value { return Int(r.p.GetStepEvery()) }),
	c("nvtx_reason", String, "why not, when nvtx is 0 (e.g. NVTX_INJECTION64_PATH named another tool); NULL otherwise", func(_ *pass, r *procRow) Value {
		return textOrNull(r.p.GetNvtxReason())
	}).null(),
	c("probe", String, "gpurr record --probe as given (REGEX:entry,exit[,CLASSES]; probe_kernels, probe_launches, probe_ctas), NULL when off", func(_ *pass, r *procRow) Value {
		return textOrNull(r.p.GetProbe())
	}).null(),
	c("readable", Boolean, "0 when the process's events file cannot be read at all (empty, or its first frame damaged; gpurr info reports it): the process took part, but its other columns are NULL, and no other table has its rows", func(_ *pass, r *procRow) Value {
		return Bool(!r.unreadable)
	}),
))

// unreadableNull makes the processes table's columns NULL in the row of a process whose
// events file cannot be read (Unreadable), but for process and readable, and for those its
// directory name gives (hostname, pid and rank) where it gives them. Those columns may be
// NULL.
func unreadableNull(t *table[procRow]) *table[procRow] {
	for i, col := range t.Columns {
		get, fromName := t.get[i], col.Name == "pid" || col.Name == "hostname" || col.Name == "rank"
		if col.Name == "process" || col.Name == "readable" {
			continue
		}
		t.Columns[i].Null = true
		t.get[i] = func(ps *pass, r *procRow) Value {
			if r.unreadable && (!fromName || !r.named) {
				return Null
			}
			return get(ps, r)
		}
	}
	return t
}

// memoryConfig is a column of the process's memory capture settings,
// NULL when memory capture was off.
func memoryConfig(name string, typ Type, doc string, get func(*pb.MemoryConfig) Value) cols[procRow] {
	return c(name, typ, doc, func(_ *pass, r *procRow) Value {
		m := r.p.GetMemory()
		return nullUnless(m != nil, get(m))
	}).null()
}

// torch is a column of what the agent found of PyTorch, NULL when no torch
// was loaded.
func torch(name string, typ Type, doc string, get func(*pb.AutogradInfo) Value) cols[procRow] {
	return c(name, typ, doc, func(_ *pass, r *procRow) Value {
		a := r.p.GetAutograd()
		return nullUnless(a != nil, get(a))
	}).null()
}

var devices = define("devices", "GPUs each process used", key("process", "ordinal"),
	processCol[pb.Device](),
	c("ordinal", Int64, "CUDA device ordinal", func(_ *pass, d *pb.Device) Value { return Int(d.GetOrdinal()) }),
	c("uuid", String, "GPU UUID", func(_ *pass, d *pb.Device) Value { return Text(d.GetUuid()) }),
	c("name", String, "product name", func(_ *pass, d *pb.Device) Value { return Text(d.GetName()) }),
	c("cc", String, "compute capability, e.g. 9.0", func(_ *pass, d *pb.Device) Value {
		return Text(fmt.Sprintf("%d.%d", d.GetCcMajor(), d.GetCcMinor()))
	}),
	c("sm_count", Int64, "streaming multiprocessors", func(_ *pass, d *pb.Device) Value { return Int(d.GetSmCount()) }),
	c("memory_bytes", Int64, "device memory", func(_ *pass, d *pb.Device) Value { return Int(d.GetMemoryBytes()) }),
	c("context_uid", Int64, "CUPTI context id first seen on it", func(_ *pass, d *pb.Device) Value { return Int(d.GetContextUid()) }),
)

var modules = define("modules", "module images loaded (stored once under modules/<sha256>.cubin)", key("process", "sha256"),
	processCol[pb.Module](),
	c("sha256", String, "SHA-256 of the image, lower-case hex", func(_ *pass, m *pb.Module) Value { return Text(m.GetSha256()) }),
	c("cupti_module_id", Int64, "CUPTI's module id", func(_ *pass, m *pb.Module) Value { return Int(m.GetCuptiModuleId()) }),
	c("size", Int64, "image bytes", func(_ *pass, m *pb.Module) Value { return Int(m.GetSize()) }),
	c("kernel_count", Int64, "entry functions it holds", func(_ *pass, m *pb.Module) Value { return Int(len(m.GetKernelNames())) }),
	c("host_ns", Int64, "when it was loaded", func(_ *pass, m *pb.Module) Value { return Int(m.GetHostNs()) }),
	c("context_uid", Int64, "CUPTI context id it was loaded into", func(_ *pass, m *pb.Module) Value { return Int(m.GetContextUid()) }),
	c("stored", Boolean, "1 when the image was written to the recording", func(_ *pass, m *pb.Module) Value { return Bool(m.GetStored()) }),
	c("ptx", String, "where the PTX stored beside the image (modules/<sha256>.ptx) came from: triton-cache, fatbin (the program's fat binary holding this cubin), or gpurr-demo (gpurr demo's own kernels); empty when none", func(_ *pass, m *pb.Module) Value { return Text(m.GetPtx()) }),
)

var kernels = define("kernels", "each kernel (CUfunction) a process launched, described once", key("process", "kernel_id"),
	processCol[kernelInfo](),
	c("kernel_id", Int64, "per-process id; launches.kernel_id refers to it", func(_ *pass, k *kernelInfo) Value { return Int(k.k.GetId()) }),
	c("identity", String, "16 hex digits, stable across runs: hash of module and name", func(_ *pass, k *kernelInfo) Value { return Text(k.identity) }),
	c("name", String, "mangled name", func(_ *pass, k *kernelInfo) Value { return Text(k.k.GetName()) }),
	c("demangled", String, "readable name (the name itself when not mangled)", func(_ *pass, k *kernelInfo) Value { return Text(k.demangled) }),
	c("module_sha256", String, "module holding it, empty when unknown", func(_ *pass, k *kernelInfo) Value { return Text(k.k.GetModuleSha256()) }),
	c("param_count", Int64, "parameters", func(_ *pass, k *kernelInfo) Value { return Int(len(k.k.GetParams())) }),
	c("param_bytes", Int64, "size of the parameter buffer", func(_ *pass, k *kernelInfo) Value { return Int(k.k.GetParamBytes()) }),
)

var kernelParams = define("kernel_params", "parameter layout of each kernel, to take launches.params apart with substr()", key("process", "kernel_id"),
	processCol[paramRec](),
	c("kernel_id", Int64, "kernels.kernel_id", func(_ *pass, r *paramRec) Value { return Int(r.k.GetId()) }),
	c("param", Int64, "parameter index, from 0", func(_ *pass, r *paramRec) Value { return Int(r.i) }),
	c("offset", Int64, "byte offset in the parameter buffer", func(_ *pass, r *paramRec) Value { return Int(r.p.GetOffset()) }),
	c("size", Int64, "bytes", func(_ *pass, r *paramRec) Value { return Int(r.p.GetSize()) }),
	c("proved_read_only", Boolean, "1 when the kernel's PTX (kept for Triton kernels) proves no store goes through these bytes", func(_ *pass, r *paramRec) Value { return Bool(r.p.GetProvedReadOnly()) }),
)

var launches = define("launches", "kernel launches made by the program, in order; captured launches built a graph node and ran nothing", key("process", "seq"),
	processCol[callRec](),
	c("seq", Int64, "1, 2, 3 ... shared with graph_launches.seq", func(_ *pass, r *callRec) Value { return Int(r.l.GetSeq()) }),
	c("tid", Int64, "Linux thread id", func(_ *pass, r *callRec) Value { return Int(r.l.GetTid()) }),
	c("device", Int64, "device ordinal", func(_ *pass, r *callRec) Value { return Int(r.l.GetDevice()) }),
	c("context_uid", Int64, "CUPTI context id", func(_ *pass, r *callRec) Value { return Int(r.l.GetContextUid()) }),
	c("stream", Int64, "CUstream handle (0: legacy default stream)", func(_ *pass, r *callRec) Value { return Int(r.l.GetStream()) }),
	c("stream_id", Int64, "CUPTI stream id", func(_ *pass, r *callRec) Value { return Int(r.l.GetStreamId()) }),
	c("kernel_id", Int64, "kernels.kernel_id", func(_ *pass, r *callRec) Value { return Int(r.l.GetKernelId()) }),
	c("identity", String, "kernels.identity", func(_ *pass, r *callRec) Value { return r.kernel(func(k *kernelInfo) string { return k.identity }) }).null().dict(),
	c("name", String, "mangled kernel name", func(_ *pass, r *callRec) Value { return r.kernel(func(k *kernelInfo) string { return k.k.GetName() }) }).null().dict(),
	c("demangled", String, "readable kernel name", func(_ *pass, r *callRec) Value { return r.kernel(func(k *kernelInfo) string { return k.demangled }) }).null().dict(),
	dims("grid", "grid blocks in", func(r *callRec) *pb.Dim3 { return r.l.GetGrid() }),
	dims("block", "block threads in", func(r *callRec) *pb.Dim3 { return r.l.GetBlock() }),
	optionalDims("cluster", "cluster blocks in (NULL: none named)", func(r *callRec) *pb.Dim3 { return r.l.GetCluster() }),
	c("shared_mem_bytes", Int64, "dynamic shared memory", func(_ *pass, r *callRec) Value { return Int(r.l.GetSharedMemBytes()) }),
	c("params", Binary, "raw parameter buffer (kernel_params lays it out)", func(_ *pass, r *callRec) Value { return Blob(r.l.GetParams()) }),
	c("correlation_id", Int64, "CUPTI correlation id of the launch call", func(_ *pass, r *callRec) Value { return Int(r.l.GetCorrelationId()) }),
	c("host_ns", Int64, "when the call was made", func(_ *pass, r *callRec) Value { return Int(r.l.GetHostNs()) }),
	c("host_duration_ns", Int64, "the launch call's host time, from host_ns to its return (the agent's own work at its start included); NULL in recordings before format 1.15", func(_ *pass, r *callRec) Value {
		end := r.l.GetEndNs()
		return nullUnless(end != 0, Int(end-min(end, r.l.GetHostNs())))
	}).null(),
	c("callstack_id", Int64, "callstacks.callstack_id, NULL when none was taken", func(_ *pass, r *callRec) Value { return idOrNull(r.l.GetCallstackId()) }).null(),
	c("captured", Boolean, "1 when made during stream capture, or by a graph API call that added or changed a kernel node (api: cuGraphAddKernelNode_v2, ...): it ran nothing itself, graph replays ran it", func(_ *pass, r *callRec) Value { return Bool(r.l.GetCaptured()) }),
	c("untimed", Boolean, "1 when made where sampled GPU timing was off (between processes.gpu_timing_sample's windows, or in a step processes.gpu_timing_steps leaves untimed): no kernel run is expected", func(_ *pass, r *callRec) Value { return Bool(r.l.GetUntimed()) }),
	c("graph_node_id", Int64, "graph node it built (captured launches), else NULL", func(_ *pass, r *callRec) Value {
		return nullUnless(r.l.GetCaptured(), Int(r.l.GetGraphNodeId()))
	}).null(),
	c("api", Int64, "CUPTI driver callback id: 307 cuLaunchKernel, 652 cuLaunchKernelEx, ...", func(_ *pass, r *callRec) Value { return Int(r.l.GetApi()) }),
	c("cooperative", Boolean, "1 for a cooperative launch: cuLaunchCooperativeKernel, or cuLaunchKernelEx with the cooperative attribute (recorded from format 1.14; before it, cuLaunchCooperativeKernel only)", func(_ *pass, r *callRec) Value {
		return Bool(r.l.GetCooperative() || strings.HasPrefix(recording.LaunchAPIName(r.l.GetApi()), "cuLaunchCooperativeKernel"))
	}),
	c("result", Int64, "CUresult of the call (0: success)", func(_ *pass, r *callRec) Value { return Int(r.l.GetResult()) }),
	c("python_line", String, "innermost Python frame as file:line function, NULL when none; for a backward launch with forward_callstack_id, the forward launch's: the model line whose backward it computes; for an XLA kernel launched without a line of the program on its stack, the line XLA's dump gives its fusion (file:line function, +N more when it fuses several lines)", func(ps *pass, r *callRec) Value {
		return textOrNull(ps.lines(r.lines).python)
	}).null().dict(),
	c("user_line", String, "innermost Python frame outside installed packages, the standard library and code PyTorch generates (Inductor, FX), NULL when none; for a backward launch, the forward launch's, and for an XLA kernel its fusion's, as python_line", func(ps *pass, r *callRec) Value {
		return textOrNull(ps.lines(r.lines).user)
	}).null().dict(),
	c("op_name", String, "for an XLA kernel, the JAX op name of its fusion's root from the recording's XLA dump (jit(step)/jvp()/tanh), NULL otherwise", func(ps *pass, r *callRec) Value {
		return textOrNull(ps.links.OpName(r.l))
	}).null().dict(),
	c("compile", Boolean, "1 when made while XLA compiled and autotuned rather than by the running program: a kernel stream_executor launches only to autotune (redzone checks, buffer fills, result comparison, its timer's delay), a Python stack inside jax/_src/compiler.py, or no Python stack on a thread that launched one of those kernels without one", func(ps *pass, r *callRec) Value {
		return Bool(ps.links.Compile(r.l))
	}),
	rangeCols(),
	stepCol,
	autograd("in_backward", Boolean, "1 when made inside a PyTorch autograd node's backward, 0 in forward; NULL when the launch carries no autograd context (processes.autograd_linked)", inBackward),
	autograd("backward_node", String, "the autograd node whose backward made the launch, e.g. MmBackward0; NULL in forward", func(ag *pb.Autograd) Value { return textOrNull(ag.GetBackwardNode()) }).dict(),
	autograd("autograd_thread", Int64, "PyTorch's forward thread id: the launching thread's in forward, the node's forward thread in backward; NULL without autograd context", autogradThread),
	autograd("autograd_seq", Int64, "autograd sequence number: in forward the thread's next one, in backward the node's (AccumulateGrad's is 2^64-1, read as -1); NULL without autograd context", autogradSeq),
	autograd("forward_callstack_id", Int64, "backward launches: callstacks.callstack_id of the forward launch of the op that created the node; NULL in forward and when none was found", func(ag *pb.Autograd) Value {
		return idOrNull(ag.GetForwardCallstackId())
	}),
	autograd("forward_link", String, "how that forward launch was found: next_launch (the op's own launch) or later_launch (the op launched nothing: a later op's); NULL when none", func(ag *pb.Autograd) Value {
		return textOrNull(recording.EnumText(ag.GetLink()))
	}).dict(),
	c("memory_status", String, "memory capture of the launch: hash, snapshot, or why skipped (skipped_capture, skipped_no_regions, skipped_ring_too_small, skipped_ring_full, skipped_error, skipped_stopped); NULL when memory capture was off", func(_ *pass, r *callRec) Value {
		plan := r.l.GetMemory()
		return nullUnless(plan != nil, Text(recording.EnumText(plan.GetStatus())))
	}).null().dict(),
	c("snapshot_selected", Boolean, "1 when --snapshot-kernels/--snapshot-launches selected it, NULL when memory capture was off", func(_ *pass, r *callRec) Value {
		plan := r.l.GetMemory()
		return nullUnless(plan != nil, Bool(plan.GetSnapshotSelected()))
	}).null(),
	c("region_count", Int64, "regions (allocations its parameters point into), NULL when memory capture was off", func(_ *pass, r *callRec) Value {
		n := len(r.l.GetRegions())
		return nullUnless(r.l.GetMemory() != nil || n > 0, Int(n))
	}).null(),
)

// rangeCols are a call's NVTX range: its id and its path.
func rangeCols() cols[callRec] {
	return append(c("range_id", Int64, "ranges.range_id of the innermost NVTX push/pop range open on its thread when it was made, NULL when none", func(_ *pass, r *callRec) Value {
		return idOrNull(r.rangeID)
	}).null(),
		c("range", String, "that range's path (ranges.path), e.g. step 5 / forward; NULL when none or unknown (its record was lost)", func(ps *pass, r *callRec) Value {
			return textOrNull(ps.ranges.Path(r.rangeID))
		}).null().dict()...)
}

// kernel is a text about the launch's kernel, NULL when the kernel is
// unknown or the text empty.
func (r *callRec) kernel(get func(*kernelInfo) string) Value {
	if r.k == nil {
		return Null
	}
	return textOrNull(get(r.k))
}

// The values of a launch's PyTorch autograd context that both sets have.
func inBackward(ag *pb.Autograd) Value     { return Bool(ag.GetBackwardNode() != "") }
func autogradThread(ag *pb.Autograd) Value { return Int(ag.GetThread()) }
func autogradSeq(ag *pb.Autograd) Value    { return Int(ag.GetSequenceNr()) }

// autograd is a column of a launch's PyTorch autograd context, NULL
// without one.
func autograd(name string, typ Type, doc string, get func(*pb.Autograd) Value) cols[callRec] {
	return c(name, typ, doc, func(_ *pass, r *callRec) Value {
		ag := r.l.GetAutograd()
		return nullUnless(ag != nil, get(ag))
	}).null()
}

var rangesTable = define("ranges", "NVTX ranges the program opened (torch.cuda.nvtx.range, emit_nvtx, NVTX from C/C++); launches.range_id names the innermost push/pop range of a launch", key("process", "range_id"),
	processCol[recording.Range](),
	c("range_id", Int64, "1, 2, 3 ... in the order they opened", func(_ *pass, r *recording.Range) Value { return Int(r.GetId()) }),
	c("parent_id", Int64, "the range open on its thread when it opened, NULL none", func(_ *pass, r *recording.Range) Value { return idOrNull(r.GetParentId()) }).null(),
	c("tid", Int64, "Linux thread id that opened it", func(_ *pass, r *recording.Range) Value { return Int(r.GetTid()) }),
	c("domain", String, "NVTX domain, NULL for the default one", func(_ *pass, r *recording.Range) Value { return textOrNull(r.GetDomain()) }).null(),
	c("message", String, "its text, NULL when it had none (or a wide-character one, not recorded)", func(_ *pass, r *recording.Range) Value { return textOrNull(r.GetMessage()) }).null(),
	c("path", String, fmt.Sprintf("the names of the ranges it is in, outermost first, and its own, joined by ' / '; nested deeper than %d, the outermost %d and innermost %d with '… N more …' between (depth is exact), each name cut to %d bytes",
		recording.PathHead+recording.PathTail, recording.PathHead, recording.PathTail, recording.PathNameBytes), func(_ *pass, r *recording.Range) Value { return Text(r.Path) }),
	c("depth", Int64, "ranges it is nested in", func(_ *pass, r *recording.Range) Value { return Int(r.Depth) }),
	c("category", Int64, "NVTX category, 0 none", func(_ *pass, r *recording.Range) Value { return Int(r.GetCategory()) }),
	c("pushed", Boolean, "1 for push/pop (nested on its thread), 0 for start/end (may end on another thread; no launch names it)", func(_ *pass, r *recording.Range) Value { return Bool(r.GetPushed()) }),
	c("start_ns", Int64, "when it opened, recording clock", func(_ *pass, r *recording.Range) Value { return Int(r.GetStartNs()) }),
	c("end_ns", Int64, "when it closed, NULL when it never did", func(_ *pass, r *recording.Range) Value { return idOrNull(r.GetEndNs()) }).null(),
	c("duration_ns", Int64, "end_ns - start_ns, NULL when open", func(_ *pass, r *recording.Range) Value {
		return nullUnless(r.GetEndNs() != 0, Int(r.GetEndNs()-r.GetStartNs()))
	}).null(),
)

var gpuActivity = define("gpu_activity", "kernel executions on the GPU, joined to the launch that ran them", key("process", "launch_seq"),
	processCol[run](),
	c("correlation_id", Int64, "correlation id of the API call (a graph replay's for graph kernels)", func(_ *pass, r *run) Value { return Int(r.a.GetCorrelationId()) }),
	c("device", Int64, "device ordinal", func(_ *pass, r *run) Value { return Int(r.a.GetDevice()) }),
	c("context_uid", Int64, "CUPTI context id", func(_ *pass, r *run) Value { return Int(r.a.GetContextUid()) }),
	c("stream_id", Int64, "CUPTI stream id", func(_ *pass, r *run) Value { return Int(r.a.GetStreamId()) }),
	c("start_ns", Int64, "kernel start, recording clock", func(_ *pass, r *run) Value { return Int(r.a.GetStartNs()) }),
	c("end_ns", Int64, "kernel end", func(_ *pass, r *run) Value { return Int(r.a.GetEndNs()) }),
	c("duration_ns", Int64, "end_ns - start_ns", func(_ *pass, r *run) Value { return Int(duration(r.a)) }),
	c("name", String, "mangled kernel name", func(_ *pass, r *run) Value { return Text(r.a.GetName()) }).dict(),
	c("demangled", String, "readable kernel name", func(ps *pass, r *run) Value {
		// The launch's kernel's name, when it is this one: the agent's
		// demangling, which knows more than the Go demangler.
		if k := ps.kernels[r.launch.kernel]; r.hasLaunch && k != nil && k.k.GetName() == r.a.GetName() {
			return Text(k.demangled)
		}
		return Text(ps.links.Demangle(r.a.GetName()))
	}).dict(),
	c("graph_id", Int64, "executable graph id, 0 for eager kernels", func(_ *pass, r *run) Value { return Int(r.a.GetGraphId()) }),
	c("graph_node_id", Int64, "executable graph node, 0 for eager kernels", func(_ *pass, r *run) Value { return Int(r.a.GetGraphNodeId()) }),
	c("launch_seq", Int64, "launches.seq of its launch (the capturing launch for graph kernels), NULL when unknown", func(_ *pass, r *run) Value {
		return nullUnless(r.hasLaunch, Int(r.launch.seq))
	}).null(),
	c("via_graph", Boolean, "1 when a graph replay ran it", func(_ *pass, r *run) Value { return Bool(r.a.GetGraphId() != 0) }),
	c("graph_launch_seq", Int64, "graph_launches.seq of the replay that ran it, NULL for eager kernels", func(_ *pass, r *run) Value {
		return nullUnless(r.hasReplay, Int(r.replay))
	}).null(),
	c("python_line", String, "python_line of launch_seq: for a kernel launched in an autograd node's backward, its forward line; for a graph kernel of XLA with no launch (a command buffer XLA built node by node), its fusion's line from the XLA dump", func(ps *pass, r *run) Value {
		return nullUnless(r.hasLaunch || r.xlaLines, textOrNull(ps.lines(r.launch.lines).python))
	}).null().dict(),
	c("user_line", String, "user_line of launch_seq, or of its XLA fusion as python_line", func(ps *pass, r *run) Value {
		return nullUnless(r.hasLaunch || r.xlaLines, textOrNull(ps.lines(r.launch.lines).user))
	}).null().dict(),
	dims("grid", "grid blocks in", func(r *run) *pb.Dim3 { return r.a.GetGrid() }),
	dims("block", "block threads in", func(r *run) *pb.Dim3 { return r.a.GetBlock() }),
	c("registers_per_thread", Int64, "registers per thread", func(_ *pass, r *run) Value { return Int(r.a.GetRegistersPerThread()) }),
	c("shared_mem_bytes", Int64, "dynamic shared memory", func(_ *pass, r *run) Value { return Int(r.a.GetSharedMemBytes()) }),
	c("static_shared_mem_bytes", Int64, "static shared memory", func(_ *pass, r *run) Value { return Int(r.a.GetStaticSharedMemBytes()) }),
)

var gpurrActivity = define("gpurr_activity", "gpurr's own memory-capture kernels (--memory: hashing, snapshot copies) as they ran on the GPU, beside the program's; gpu_activity holds the program's only", nil,
	processCol[pb.KernelActivity](),
	c("device", Int64, "device ordinal", func(_ *pass, a *pb.KernelActivity) Value { return Int(a.GetDevice()) }),
	c("context_uid", Int64, "CUPTI context id", func(_ *pass, a *pb.KernelActivity) Value { return Int(a.GetContextUid()) }),
	c("stream_id", Int64, "CUPTI stream id of the stream it ran on", func(_ *pass, a *pb.KernelActivity) Value { return Int(a.GetStreamId()) }),
	c("start_ns", Int64, "kernel start, recording clock", func(_ *pass, a *pb.KernelActivity) Value { return Int(a.GetStartNs()) }),
	c("end_ns", Int64, "kernel end", func(_ *pass, a *pb.KernelActivity) Value { return Int(a.GetEndNs()) }),
	c("duration_ns", Int64, "end_ns - start_ns", func(_ *pass, a *pb.KernelActivity) Value { return Int(duration(a)) }),
	c("name", String, "kernel name, e.g. gpurr_memcap", func(_ *pass, a *pb.KernelActivity) Value { return Text(a.GetName()) }).dict(),
)

// duration is end minus start, negative when the clock went backwards
// (unsigned, it would be huge).
func duration(a *pb.KernelActivity) int64 { return int64(a.GetEndNs()) - int64(a.GetStartNs()) }

var callstacks = define("callstacks", "host callstacks, stored once and referenced by id", key("process", "callstack_id"),
	processCol[stackRec](),
	c("callstack_id", Int64, "hash of the frames", func(_ *pass, r *stackRec) Value { return Int(r.c.GetId()) }),
	c("source", String, "python, native or python+native", func(_ *pass, r *stackRec) Value { return Text(r.c.GetSource()) }).dict(),
	c("depth", Int64, "number of frames", func(_ *pass, r *stackRec) Value { return Int(len(r.c.GetFrames())) }),
	c("python_line", String, "innermost Python frame, NULL when none", func(ps *pass, r *stackRec) Value { return textOrNull(ps.lines(r.c.GetId()).python) }).null(),
	c("user_line", String, "innermost Python frame outside installed packages, the standard library and code PyTorch generates (Inductor, FX), NULL when none", func(ps *pass, r *stackRec) Value {
		return textOrNull(ps.lines(r.c.GetId()).user)
	}).null(),
	c("text", String, "the frames, innermost first, one per line", func(_ *pass, r *stackRec) Value { return Text(r.text) }),
	c("cut", String, "why the stack ends before the thread's first frame: depth, no unwind info, unsupported unwind rule, corrupt frame or foreign stack; NULL when whole", func(_ *pass, r *stackRec) Value {
		return textOrNull(r.c.GetCut())
	}).null(),
)

var frames = define("frames", "the frames of each callstack", key("process", "callstack_id"),
	processCol[frameRec](),
	c("callstack_id", Int64, "callstacks.callstack_id", func(_ *pass, r *frameRec) Value { return Int(r.c.GetId()) }),
	c("depth", Int64, "0 is the innermost frame", func(_ *pass, r *frameRec) Value { return Int(r.i) }),
	c("kind", String, "python or native", func(_ *pass, r *frameRec) Value {
		if r.python() {
			return Text("python")
		}
		return Text("native")
	}).dict(),
	c("file", String, "Python source file, or native shared object", func(_ *pass, r *frameRec) Value { return Text(r.f.GetFile()) }).dict(),
	c("line", Int64, "Python line, NULL for native frames", func(_ *pass, r *frameRec) Value { return nullUnless(r.python(), Int(r.f.GetLine())) }).null(),
	c("function", String, "Python qualified name, or demangled native symbol", func(_ *pass, r *frameRec) Value { return Text(r.f.GetFunction()) }).dict(),
	c("pc", Int64, "native program counter, NULL for Python frames", func(_ *pass, r *frameRec) Value { return nullUnless(!r.python(), Int(r.f.GetPc())) }).null(),
	c("offset", Int64, "pc minus the object's load address, NULL for Python frames", func(_ *pass, r *frameRec) Value {
		return nullUnless(!r.python(), Int(r.f.GetOffset()))
	}).null(),
)

func (r *frameRec) python() bool { return r.f.GetKind() == pb.Frame_PYTHON }

var graphNodes = define("graph_nodes", "CUDA graph nodes: created by a captured launch or a graph API call, cloned from another node, or given another node's work by a whole-graph update", key("process", "node_id"),
	processCol[pb.GraphNode](),
	c("node_id", Int64, "graph node id", func(_ *pass, n *pb.GraphNode) Value { return Int(n.GetNodeId()) }),
	c("graph_id", Int64, "graph holding it", func(_ *pass, n *pb.GraphNode) Value { return Int(n.GetGraphId()) }),
	c("original_node_id", Int64, "node it was cloned from, NULL when created", func(_ *pass, n *pb.GraphNode) Value { return idOrNull(n.GetOriginalNodeId()) }).null(),
	c("launch_seq", Int64, "launches.seq of the captured launch that created it, NULL when cloned", func(_ *pass, n *pb.GraphNode) Value { return idOrNull(n.GetLaunchSeq()) }).null(),
	c("node_type", Int64, "CUgraphNodeType (0: kernel)", func(_ *pass, n *pb.GraphNode) Value { return Int(n.GetNodeType()) }),
	c("updated_after_seq", Int64, "cuGraphExecUpdate: the graph launches after this launches.seq run original_node_id's work on this executable graph's node; NULL otherwise", func(_ *pass, n *pb.GraphNode) Value { return idOrNull(n.GetUpdatedAfterSeq()) }).null(),
)

var graphLaunches = define("graph_launches", "CUDA graph replays (cuGraphLaunch)", key("process", "seq"),
	processCol[callRec](),
	c("seq", Int64, "shares the sequence with launches.seq", func(_ *pass, r *callRec) Value { return Int(r.g.GetSeq()) }),
	c("tid", Int64, "Linux thread id", func(_ *pass, r *callRec) Value { return Int(r.g.GetTid()) }),
	c("graph_exec", Int64, "CUgraphExec handle", func(_ *pass, r *callRec) Value { return Int(r.g.GetGraphExec()) }),
	c("stream", Int64, "CUstream handle", func(_ *pass, r *callRec) Value { return Int(r.g.GetStream()) }),
	c("stream_id", Int64, "CUPTI stream id", func(_ *pass, r *callRec) Value { return Int(r.g.GetStreamId()) }),
	c("correlation_id", Int64, "matches gpu_activity.correlation_id of the kernels it ran", func(_ *pass, r *callRec) Value { return Int(r.g.GetCorrelationId()) }),
	c("host_ns", Int64, "when the call was made", func(_ *pass, r *callRec) Value { return Int(r.g.GetHostNs()) }),
	c("callstack_id", Int64, "callstacks.callstack_id, NULL when none was taken", func(_ *pass, r *callRec) Value { return idOrNull(r.g.GetCallstackId()) }).null(),
	c("device", Int64, "device ordinal", func(_ *pass, r *callRec) Value { return Int(r.g.GetDevice()) }),
	c("result", Int64, "CUresult of the call", func(_ *pass, r *callRec) Value { return Int(r.g.GetResult()) }),
	c("python_line", String, "innermost Python frame, NULL when none", func(ps *pass, r *callRec) Value { return textOrNull(ps.lines(r.lines).python) }).null().dict(),
	c("user_line", String, "innermost Python frame outside installed packages, the standard library and code PyTorch generates (Inductor, FX), NULL when none", func(ps *pass, r *callRec) Value {
		return textOrNull(ps.lines(r.lines).user)
	}).null().dict(),
	rangeCols(),
	stepCol,
)

// stepCol numbers launch calls by training step (recording.Stepper): the optimizer steps
// (torch.optim), or the NVTX ranges of the step range, that ended before the call.
var stepCol = c("step", Int64, "training step: how many torch.optim optimizer step() calls ended before this call (its own step's optimizer launches count in it), or with a step range (processes.step_range) how many NVTX ranges it matches ended before the call was made; 0 throughout a program without either", func(_ *pass, r *callRec) Value {
	return Int(r.step)
})

var allocations = define("allocations", "device memory allocations (--memory), with when each was freed", key("process", "allocation_id"),
	processCol[allocRec](),
	c("allocation_id", Int64, "per-process id; regions.allocation_id refers to it", func(_ *pass, r *allocRec) Value { return Int(r.id) }),
	c("kind", String, "mem_alloc, mem_alloc_pitch, mem_alloc_async (stream-ordered pool), mem_map (cuMemMap), mem_alloc_managed or range_query (found by cuMemGetAddressRange for a launch)", func(_ *pass, r *allocRec) Value {
		return Text(recording.EnumText(r.first.GetKind()))
	}).dict(),
	c("device", Int64, "device ordinal", func(_ *pass, r *allocRec) Value { return Int(r.first.GetDevice()) }),
	c("address", Int64, "start address (printf('0x%x', address) shows it in hex)", func(_ *pass, r *allocRec) Value { return Int(r.first.GetAddress()) }),
	c("size", Int64, "bytes", func(_ *pass, r *allocRec) Value { return Int(r.first.GetSize()) }),
	c("alloc_ns", Int64, "when it was allocated, NULL when the recording holds only its free", func(_ *pass, r *allocRec) Value {
		return nullUnless(r.alloc != nil, Int(r.alloc.GetHostNs()))
	}).null(),
	c("free_ns", Int64, "when it was freed, NULL when it was still live at the end of the recording", func(_ *pass, r *allocRec) Value {
		return nullUnless(r.freed != nil, Int(r.freed.GetHostNs()))
	}).null(),
	c("owner", String, "the library that allocated it for its own use (nccl, nvshmem, ucx: its memory differs from run to run by design, and diff, verify, nan and step digests leave it out), or program", func(_ *pass, r *allocRec) Value {
		return Text(cmp.Or(r.first.GetOwner(), "program"))
	}).dict(),
	c("callstack_id", Int64, "callstacks.callstack_id of the allocating call, NULL when none was taken (stream-ordered allocations, and recordings before format 1.12)", func(_ *pass, r *allocRec) Value {
		return idOrNull(r.alloc.GetCallstackId())
	}).null(),
	c("cleared", Boolean, "1 when gpurr cleared it to zeros as it was allocated (stream-ordered allocations under --memory hash and snapshot, format 1.17): it held zeros until a launch or copy wrote it", func(_ *pass, r *allocRec) Value {
		return Bool(r.alloc.GetCleared())
	}),
	c("launch_seq", Int64, "launches.seq (or graph_launches.seq) of the last launch call made before it was allocated, NULL when none was (and in recordings before format 1.17)", func(_ *pass, r *allocRec) Value {
		return idOrNull(r.alloc.GetLaunchSeq())
	}).null(),
)

// firstCount is the count of the first type counted, NULL when none was.
func firstCount(counts []uint64) Value {
	if len(counts) == 0 {
		return Null
	}
	return Int(counts[0])
}

var digests = define("digests", "step digests (--memory digest, --hash-steps): the state of the program's allocations where each training step ended, hashed on the GPU; one row per allocation hashed", key("process", "step"),
	processCol[digestRow](),
	c("step", Int64, "the training step that had just ended (launches.step), from 0", func(_ *pass, r *digestRow) Value { return Int(r.st.GetStep()) }),
	c("launch_seq", Int64, "launches.seq (or graph_launches.seq) of the next step's first call: the digest was taken on its stream, before it", func(_ *pass, r *digestRow) Value {
		return Int(r.st.GetLaunchSeq())
	}),
	c("of", String, "which allocations: optimizer (those the step's optimizer launches reached: parameters, gradients, the optimizer's state) or all (every live allocation of the program's)", func(_ *pass, r *digestRow) Value {
		return Text(r.st.GetDigestOf())
	}).dict(),
	c("allocation_id", Int64, "allocations.allocation_id, NULL on the row of a lost digest", func(_ *pass, r *digestRow) Value {
		return nullUnless(r.r != nil, Int(r.r.GetAllocationId()))
	}).null(),
	c("address", Int64, "allocations.address", func(_ *pass, r *digestRow) Value { return nullUnless(r.r != nil, Int(r.r.GetAddress())) }).null(),
	c("size", Int64, "allocations.size", func(_ *pass, r *digestRow) Value { return nullUnless(r.r != nil, Int(r.r.GetSize())) }).null(),
	c("hash", String, "gpurr-h128 of the allocation, 32 hex digits (docs/hash.md), NULL when lost", func(_ *pass, r *digestRow) Value {
		return nullUnless(r.rs != nil, textOrNull(recording.HashText(r.rs.GetHash())))
	}).null(),
	c("nan", Int64, "elements that are NaN read as the first type of processes.memory_nan_scan, NULL when not counted", func(_ *pass, r *digestRow) Value {
		return firstCount(r.rs.GetNanCount())
	}).null(),
	c("inf", Int64, "elements that are +Inf or -Inf as that type, NULL when not counted", func(_ *pass, r *digestRow) Value {
		return firstCount(r.rs.GetInfCount())
	}).null(),
	c("lost", Boolean, "1 when the digest was enqueued but never completed; its row carries no hash", func(_ *pass, r *digestRow) Value { return Bool(r.st.GetLost()) }),
)

var regions = define("regions", "device memory each launch can reach: whole allocations its parameter words point into (--memory)", key("process", "launch_seq"),
	processCol[regionRec](),
	c("launch_seq", Int64, "launches.seq", func(_ *pass, r *regionRec) Value { return Int(r.l.GetSeq()) }),
	c("region", Int64, "index in the launch's regions, from 0; memory_states.region refers to it", func(_ *pass, r *regionRec) Value { return Int(r.i) }),
	c("address", Int64, "start of the allocation", func(_ *pass, r *regionRec) Value { return Int(r.r.GetAddress()) }),
	c("size", Int64, "bytes: the whole allocation, a superset of what the kernel touched", func(_ *pass, r *regionRec) Value { return Int(r.r.GetSize()) }),
	c("allocation_id", Int64, "allocations.allocation_id, NULL when found by the driver's range query", func(_ *pass, r *regionRec) Value {
		return idOrNull(r.r.GetAllocationId())
	}).null(),
	c("param_offsets", String, "byte offsets in launches.params of the 8-byte words that point into it, comma-separated", func(_ *pass, r *regionRec) Value {
		return Text(joinOffsets(r.r.GetParamOffsets()))
	}),
)

// joinOffsets writes parameter offsets comma-separated.
func joinOffsets(offsets []uint32) string {
	parts := make([]string, len(offsets))
	for i, o := range offsets {
		parts[i] = strconv.FormatUint(uint64(o), 10)
	}
	return strings.Join(parts, ",")
}

var memoryStates = define("memory_states", "hash (and snapshot) of each launch's regions before or after it ran, computed on the GPU in stream order (--memory)", key("process", "launch_seq"),
	processCol[stateRow](),
	c("launch_seq", Int64, "launches.seq", func(_ *pass, r *stateRow) Value { return Int(r.st.GetLaunchSeq()) }),
	c("point", String, "before or after the launch", func(_ *pass, r *stateRow) Value { return Text(recording.EnumText(r.st.GetPoint())) }).dict(),
	c("region", Int64, "regions.region, NULL for a lost state of a launch whose regions are unknown", func(_ *pass, r *stateRow) Value { return nullUnless(r.i >= 0, Int(r.i)) }).null(),
	c("address", Int64, "regions.address", func(_ *pass, r *stateRow) Value { return nullUnless(r.r != nil, Int(r.r.GetAddress())) }).null(),
	c("size", Int64, "regions.size", func(_ *pass, r *stateRow) Value { return nullUnless(r.r != nil, Int(r.r.GetSize())) }).null(),
	c("hash", String, "gpurr-h128 of the region, 32 hex digits (docs/hash.md), NULL when lost or unknown", func(_ *pass, r *stateRow) Value {
		return nullUnless(r.known(), textOrNull(recording.HashText(r.rs.GetHash())))
	}).null(),
	c("chunks", Int64, "chunk hashes recorded (memory_chunks), NULL when lost, unknown or carried (the state after carried_from holds them)", func(_ *pass, r *stateRow) Value {
		return nullUnless(r.known() && r.rs.GetCarried() == pb.RegionState_NOT_CARRIED, Int(len(r.rs.GetChunkHashes())/recording.HashBytes))
	}).null(),
	c("chunks_transferred", Int64, "snapshot: chunks that crossed PCIe (the others were stored already), NULL when lost or unknown", func(_ *pass, r *stateRow) Value {
		return nullUnless(r.known(), Int(r.rs.GetChunksTransferred()))
	}).null(),
	c("chunks_missing", Int64, "snapshot: chunks whose bytes were dropped (drop-oldest), NULL when lost or unknown", func(_ *pass, r *stateRow) Value {
		return nullUnless(r.known(), Int(r.rs.GetChunksMissing()))
	}).null(),
	c("snapshot", Boolean, "1 when the region's chunks are in the chunk store", func(_ *pass, r *stateRow) Value { return Bool(r.st.GetSnapshot()) }),
	c("lost", Boolean, "1 when the state was enqueued but never completed or was dropped; its region rows carry no hash", func(_ *pass, r *stateRow) Value { return Bool(r.st.GetLost()) }),
	c("lost_reason", String, "why it was lost, NULL when not lost", func(_ *pass, r *stateRow) Value {
		return nullUnless(r.st.GetLost(), Text(r.st.GetLostReason()))
	}).null().dict(),
	c("carried", String, "write sets (processes.memory_write_sets): proved or learned when the launch could not write the region and its state was carried from launch carried_from, not hashed; empty when hashed after this launch; NULL on a row without a region state", func(_ *pass, r *stateRow) Value {
		return nullUnless(r.rs != nil, Text(recording.CarriedText(r.rs.GetCarried())))
	}).null().dict(),
	c("carried_from", Int64, "launches.seq whose state after it this carried state is (the last launch that hashed the region), NULL when not carried or unknown", func(_ *pass, r *stateRow) Value {
		return nullUnless(r.known() && r.rs.GetCarried() != pb.RegionState_NOT_CARRIED, Int(r.rs.GetCarriedFrom()))
	}).null(),
	c("unknown", Boolean, "1 when the region's state was carried from a state that was lost: it has no hash, and compares as a lost state does", func(_ *pass, r *stateRow) Value {
		return Bool(r.rs.GetUnknown())
	}),
)

// known reports whether the row holds a region state with a hash: not lost, not unknown.
func (r *stateRow) known() bool { return r.rs != nil && !r.rs.GetUnknown() }

var writeSetMisses = define("write_set_misses", "audits that found a region a learned write set called read-only changed (--write-sets learned): the region's states carried after since_seq, up to audit_seq, may be stale", key("process", "audit_seq"),
	processCol[missRec](),
	c("kernel_id", Int64, "kernels.kernel_id of the kernel whose write set missed", func(_ *pass, r *missRec) Value { return Int(r.m.GetKernelId()) }),
	c("name", String, "kernels.demangled, NULL when the recording does not hold the kernel", func(_ *pass, r *missRec) Value { return textOrNull(r.name) }).null(),
	c("param_offsets", String, "byte offsets in launches.params of the parameter words pointing into the region, comma-separated", func(_ *pass, r *missRec) Value {
		return Text(joinOffsets(r.m.GetParamOffsets()))
	}),
	c("audit_seq", Int64, "launches.seq of the audit launch that hashed the region and found it changed", func(_ *pass, r *missRec) Value { return Int(r.m.GetAuditSeq()) }),
	c("since_seq", Int64, "launches.seq of the last launch that hashed the region before it: the write came after this one", func(_ *pass, r *missRec) Value { return Int(r.m.GetSinceSeq()) }),
	c("allocation_id", Int64, "allocations.allocation_id of the region", func(_ *pass, r *missRec) Value { return idOrNull(r.m.GetAllocationId()) }).null(),
)

// tornRec is one kernel of another stream that ran while gpurr took a launch's state.
type tornRec struct {
	key  recording.StateKey
	tear recording.Tear
}

var tornStates = define("torn_states", "memory states gpurr took while a kernel of another stream that reaches the same allocation ran (found from the GPU timeline: needs GPU timing of every kernel): their bytes may be part old, part new, and diff and verify compare those launches with none; one row per such kernel", key("process", "launch_seq"),
	processCol[tornRec](),
	c("launch_seq", Int64, "memory_states.launch_seq of the torn state", func(_ *pass, r *tornRec) Value { return Int(r.key.Seq) }),
	c("point", String, "memory_states.point: before or after", func(_ *pass, r *tornRec) Value { return Text(recording.EnumText(r.key.Point)) }).dict(),
	c("stream_id", Int64, "CUPTI stream id of the kernel that ran meanwhile", func(_ *pass, r *tornRec) Value { return Int(r.tear.Stream) }),
	c("other_seq", Int64, "launches.seq of that kernel's launch", func(_ *pass, r *tornRec) Value { return Int(r.tear.Launch) }),
	c("other_kernel", String, "its kernel's mangled name, as the GPU timeline has it", func(_ *pass, r *tornRec) Value { return Text(r.tear.Kernel) }),
)

var nanCounts = define("nan_counts", "NaN and Inf elements the GPU counted in a launch's regions after it ran (--nan-scan): one row per region and type with at least one", key("process", "launch_seq"),
	processCol[nanRec](),
	c("launch_seq", Int64, "launches.seq", func(_ *pass, r *nanRec) Value { return Int(r.st.GetLaunchSeq()) }),
	c("region", Int64, "regions.region", func(_ *pass, r *nanRec) Value { return Int(r.i) }),
	c("dtype", String, "the type the region's bytes were read as (processes.memory_nan_scan)", func(_ *pass, r *nanRec) Value { return Text(r.dtype) }).dict(),
	c("nan", Int64, "elements that are NaN as that type", func(_ *pass, r *nanRec) Value { return Int(r.nan) }),
	c("inf", Int64, "elements that are +Inf or -Inf as that type", func(_ *pass, r *nanRec) Value { return Int(r.inf) }),
)

var probeLaunches = define("probe_launches", "launches of the kernels gpurr record --probe instrumented: whether each ran with its probes (probe_ctas holds their records) or why not", key("process", "launch_seq"),
	processCol[probeLaunchRec](),
	c("launch_seq", Int64, "launches.seq", func(_ *pass, r *probeLaunchRec) Value { return Int(r.p.GetLaunchSeq()) }),
	c("kernel_id", Int64, "kernels.kernel_id, NULL when the recording does not hold the launch", func(_ *pass, r *probeLaunchRec) Value {
		return nullUnless(r.p.Launch != nil, Int(r.p.Launch.GetKernelId()))
	}).null(),
	c("ctas", Int64, "CTA records written: the launch's grid CTAs, 0 when skipped", func(_ *pass, r *probeLaunchRec) Value { return Int(r.ctas) }),
	c("missing", Int64, "of them, records the probes left untouched: CTAs that did not run (the launch faulted or was cut short)", func(_ *pass, r *probeLaunchRec) Value { return Int(r.missing) }),
	c("skipped", String, "why the launch ran without probes, NULL when it ran with them", func(_ *pass, r *probeLaunchRec) Value { return textOrNull(r.p.GetSkipped()) }).null().dict(),
)

var probeCTAs = define("probe_ctas", "what the live probes of a launch (gpurr record --probe) noted of each CTA that ran: when, how long, on which SM; times are the GPU's %globaltimer, a clock apart from the recording's", key("process", "launch_seq"),
	processCol[probeCTARec](),
	c("launch_seq", Int64, "launches.seq", func(_ *pass, r *probeCTARec) Value { return Int(r.seq) }),
	c("cta", Int64, "index in grid order: x + grid_x × (y + grid_y × z)", func(_ *pass, r *probeCTARec) Value { return Int(r.c.Index) }),
	c("x", Int64, "blockIdx.x, NULL when the recording does not hold the launch (nor its grid)", func(_ *pass, r *probeCTARec) Value { return r.xyz(0) }).null(),
	c("y", Int64, "blockIdx.y, NULL likewise", func(_ *pass, r *probeCTARec) Value { return r.xyz(1) }).null(),
	c("z", Int64, "blockIdx.z, NULL likewise", func(_ *pass, r *probeCTARec) Value { return r.xyz(2) }).null(),
	c("start_ns", Int64, "its threads' earliest entry, %globaltimer ns", func(_ *pass, r *probeCTARec) Value { return Int(r.c.Start) }),
	c("end_ns", Int64, "their latest exit, %globaltimer ns", func(_ *pass, r *probeCTARec) Value { return Int(r.c.End) }),
	c("duration_ns", Int64, "end_ns - start_ns", func(_ *pass, r *probeCTARec) Value { return Int(r.c.End - r.c.Start) }),
	c("sm", Int64, "the SM it ran on", func(_ *pass, r *probeCTARec) Value { return Int(r.c.SM) }),
	c("count", Int64, "how many times its threads ran the instructions --probe counts (probe_kernels.count); 0 when it counts none", func(_ *pass, r *probeCTARec) Value { return Int(r.c.Count) }),
)

var probeKernels = define("probe_kernels", "each kernel whose name gpurr record --probe's expression matched: whether it was instrumented, or why not", key("process", "kernel_id"),
	processCol[probeKernelRec](),
	c("kernel_id", Int64, "kernels.kernel_id", func(_ *pass, r *probeKernelRec) Value { return Int(r.k.GetKernelId()) }),
	c("name", String, "kernels.demangled, NULL when the recording does not hold the kernel", func(_ *pass, r *probeKernelRec) Value { return textOrNull(r.name) }).null(),
	c("instrumented", Boolean, "1 when its launches ran with probes (each says in probe_launches whether it did)", func(_ *pass, r *probeKernelRec) Value { return Bool(r.k.GetInstrumented()) }),
	c("reason", String, "why not, when instrumented is 0; NULL otherwise", func(_ *pass, r *probeKernelRec) Value { return textOrNull(r.k.GetReason()) }).null(),
	c("count", String, "the instruction classes counted per CTA (--probe's CLASSES), NULL for none", func(_ *pass, r *probeKernelRec) Value { return textOrNull(r.k.GetCount()) }).null(),
	c("counted", Int64, "how many instructions of the kernel those are", func(_ *pass, r *probeKernelRec) Value { return Int(r.k.GetCounted()) }),
)

var memoryChunks = define("memory_chunks", "hash of each chunk of each region state: where two states of a region differ; a snapshot's chunks are stored under these hashes in the chunk store (--memory; filled the first time a statement names it)", key("process", "launch_seq"),
	processCol[chunkRec](),
	c("launch_seq", Int64, "memory_states.launch_seq", func(_ *pass, r *chunkRec) Value { return Int(r.st.GetLaunchSeq()) }),
	c("point", String, "memory_states.point", func(_ *pass, r *chunkRec) Value { return Text(recording.EnumText(r.st.GetPoint())) }).dict(),
	c("region", Int64, "memory_states.region", func(_ *pass, r *chunkRec) Value { return Int(r.region) }),
	c("chunk", Int64, "index in the region, from 0", func(_ *pass, r *chunkRec) Value { return Int(r.n) }),
	c("offset", Int64, "byte offset in the region: chunk × processes.memory_chunk_bytes", func(_ *pass, r *chunkRec) Value { return Int(r.offset) }),
	c("hash", String, "gpurr-h128 of the chunk's bytes, 32 hex digits", func(_ *pass, r *chunkRec) Value { return Text(recording.HashText(r.hash)) }),
)

var logs = define("log", "the agent's log: what went wrong or was skipped while recording", nil,
	processCol[pb.LogEntry](),
	c("host_ns", Int64, "when", func(_ *pass, e *pb.LogEntry) Value { return Int(e.GetHostNs()) }),
	c("level", String, "info, warn or error", func(_ *pass, e *pb.LogEntry) Value { return Text(e.GetLevel()) }).dict(),
	c("message", String, "what happened", func(_ *pass, e *pb.LogEntry) Value { return Text(e.GetMessage()) }),
)

var stats = define("stats", "the agent's counters as of the last frame; *_dropped, *_failed and *_lost count losses", key("process"),
	processCol[pb.Stats](), statsColumns())

// statsDocs explains each counter; a field added to Stats later still
// gets a column, described by its name.
var statsDocs = map[string]string{
	"launches":           "launches described",
	"launches_filtered":  "launches skipped by --kernels (by design, not a loss)",
	"launches_dropped":   "launches lost: the agent's ring was full",
	"graph_launches":     "graph launches described",
	"activities":         "GPU activity records received",
	"activities_dropped": "activity records CUPTI reported dropped",
	"callstacks":         "distinct callstacks stored",
	"callstacks_failed":  "callstacks that could not be taken",
	"modules":            "modules described",
	"modules_failed":     "module images that could not be stored",
	"errors":             "log entries at level error",
	"ring_bytes_dropped": "bytes of any record lost to a full ring",
	"frames_written":     "frames the agent wrote",
	"agent_callback_ns":  "time the agent spent in CUPTI callbacks on the program's threads",
	"agent_launch_ns":    "of agent_callback_ns, the part in launch callbacks (1 launch in 16 per thread timed, scaled)",
	"agent_stack_ns":     "of agent_launch_ns, taking callstacks",
	"agent_autograd_ns":  "of agent_launch_ns, reading PyTorch's autograd context",
	"agent_ring_ns":      "of agent_launch_ns, writing launch records to the agent's ring",
	"stacks_new":         "callstacks met for the first time on the program's threads (frames decoded, record written)",
	"agent_stack_new_ns": "the time those took (every one timed); the rest of agent_stack_ns is stacks seen before",

	"agent_memory_ns":        "of agent_launch_ns, memory capture's part: finding regions, deciding carries, enqueueing jobs (--memory)",
	"agent_memory_launch_ns": "of agent_memory_ns, launching gpurr's own hash kernels",
	"memory_hash_kernels":    "gpurr_memcap launches; with --defer-hashes one hashes the jobs of several launches",
	"side_batches":           "--defer-hashes: batches of hash jobs run beside the program, on gpurr's own streams",
	"side_stream_waits":      "--defer-hashes: times a program stream was made to wait for them (cuStreamWaitEvent)",
	"side_host_waits":        "--defer-hashes: times the host waited for them (calls naming no stream, teardown)",
	"write_epochs":           "writes memory capture could not place (graph launches, 2D copies, skipped or filtered launches, kernels storing through loaded pointers): each ended every carry (--write-sets)",

	"allocations":           "allocation and free records (--memory)",
	"memory_launches":       "launches with memory ops enqueued (hash or snapshot)",
	"memory_skipped":        "launches with regions but no memory ops (stream capture, ring too small, capture stopped)",
	"memory_states":         "memory states completed",
	"memory_states_lost":    "memory states enqueued but never completed, or dropped (a loss)",
	"bytes_hashed":          "region bytes hashed on the GPU",
	"snapshots":             "memory states with contents stored",
	"chunks_total":          "snapshot chunks referenced",
	"chunks_transferred":    "snapshot chunks that crossed PCIe (the rest were stored already)",
	"chunks_stored":         "distinct chunks written to the chunk store",
	"chunk_bytes_stored":    "compressed bytes written to the chunk store",
	"staging_wait_ns":       "time the program's threads waited for staging space, or in hash mode for room for the hashes in flight (backpressure)",
	"memory_capture_gpu_ns": "GPU time of gpurr's own hash and copy kernels",
	"flight_dumps":          "flight-recorder dumps written",
	"memory_stopped":        "why memory capture stopped early, empty when it did not",
	"digests":               "step digests enqueued (--memory digest, --hash-steps)",
	"digests_skipped":       "step boundaries whose digest was not taken: a stream capture, memory capture stopped, no room (a loss; see logs)",
	"copy_states":           "states of what the program's copies and memsets wrote, completed (copy_states)",
	"copy_states_lost":      "copy states of copies gpurr placed but could not take, or that never completed (a loss)",

	"copies":                       "memory copies and memsets the GPU ran (copies)",
	"syncs":                        "host waits and stream waits (syncs)",
	"host_calls":                   "copy, memset and synchronization calls recorded (host_calls)",
	"host_calls_dropped":           "host calls lost to a full ring (a loss)",
	"cupti_clients":                "times the program's own CUPTI client (a profiler such as torch.profiler) subscribed beside the agent",
	"cupti_client_records":         "activity records passed on to the program's own CUPTI client",
	"cupti_client_records_dropped": "records of the program's CUPTI client's kinds not passed on to it: it gave no buffer, or their timestamps could not be moved to its clock (a loss)",

	"ranges":         "NVTX ranges recorded",
	"ranges_dropped": "NVTX ranges lost: ring full, nested deeper than 128 on a thread, or closed without an open the agent saw",

	"backward_launches": "launches made inside a PyTorch autograd node's backward",
	"backward_linked":   "backward launches whose forward callstack was found",

	"probe_launches": "launches that ran with live probes (--probe)",
	"probe_skipped":  "launches of instrumented kernels that ran without them (probe_launches.skipped says why)",

	"regions_carried_proved":  "region states carried from an earlier launch, not hashed, because the kernel's PTX proves it does not write the region (--write-sets)",
	"regions_carried_learned": "region states carried because the kernel's earlier launches never changed the region (--write-sets learned)",
	"bytes_carried":           "the bytes of the regions carried: what was not hashed",
	"regions_carried_unknown": "region states carried from a state that was lost: unknown, no hash (a loss)",
	"write_set_audits":        "launches that hashed all their regions to audit learned write sets",
	"write_set_misses":        "audits that found a region a learned write set called read-only changed (write_set_misses; carried states may be stale)",
}

// statsColumns are a column per field of Stats: an integer counter, or
// text (why memory capture stopped). A field of another kind added later
// reads as NULL rather than failing (its column may be NULL).
func statsColumns() cols[pb.Stats] {
	fields := (&pb.Stats{}).ProtoReflect().Descriptor().Fields()
	var out cols[pb.Stats]
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := string(fd.Name())
		doc := statsDocs[name]
		if doc == "" {
			doc = strings.ReplaceAll(name, "_", " ")
		}
		typ := Int64
		if fd.Kind() == protoreflect.StringKind {
			typ = String
		}
		col := c(name, typ, doc, func(_ *pass, s *pb.Stats) Value { return statValue(s.ProtoReflect(), fd) })
		if statValue((&pb.Stats{}).ProtoReflect(), fd).IsNull() {
			col = col.null()
		}
		out = append(out, col...)
	}
	return out
}

func statValue(m protoreflect.Message, fd protoreflect.FieldDescriptor) Value {
	if fd.IsList() || fd.IsMap() {
		return Null
	}
	switch fd.Kind() {
	case protoreflect.StringKind:
		return Text(m.Get(fd).String())
	case protoreflect.Uint64Kind, protoreflect.Uint32Kind, protoreflect.Fixed64Kind, protoreflect.Fixed32Kind:
		return Int(m.Get(fd).Uint())
	case protoreflect.Int64Kind, protoreflect.Int32Kind, protoreflect.Sint64Kind, protoreflect.Sint32Kind,
		protoreflect.Sfixed64Kind, protoreflect.Sfixed32Kind:
		return Int(m.Get(fd).Int())
	}
	return Null
}
