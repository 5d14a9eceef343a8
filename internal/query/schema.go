// Package query loads recordings into SQLite tables and runs SQL over them.
//
// The database lives in memory and is built from the recording each time;
// the recording stays the truth. Every table has a process column (the
// process directory's name inside the recording), so a recording of many
// ranks queries as one.
//
// SQLite integers are signed 64-bit: unsigned 64-bit values at or above
// 2^63 (callstack ids are hashes, so half of them are) are stored with the
// same bits and read back negative. They still join and compare for
// equality; kernel identities are given as hex text instead, as gpurr
// prints them.
package query

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Column is one column of a table.
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"` // INTEGER, TEXT or BLOB
	Doc  string `json:"doc"`
}

// Table is one table of the database.
type Table struct {
	Name    string   `json:"name"`
	Doc     string   `json:"doc"`
	Columns []Column `json:"columns"`
	Key     []string `json:"key,omitempty"` // indexed, in this order
}

func col(name, typ, doc string) Column { return Column{Name: name, Type: typ, Doc: doc} }

var processCol = col("process", "TEXT", "the process's directory name in the recording")

// dims are the x, y, z columns of a Dim3.
func dims(prefix, what string) []Column {
	return []Column{
		col(prefix+"_x", "INTEGER", what+" x"),
		col(prefix+"_y", "INTEGER", what+" y"),
		col(prefix+"_z", "INTEGER", what+" z"),
	}
}

func columns(groups ...[]Column) []Column {
	out := []Column{processCol}
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func cols(c ...Column) []Column { return c }

var tables = []Table{
	{Name: "processes", Doc: "one row per recorded process", Key: []string{"process"}, Columns: columns(cols(
		col("pid", "INTEGER", "process id"),
		col("ppid", "INTEGER", "parent process id"),
		col("hostname", "TEXT", "host it ran on"),
		col("rank", "INTEGER", "RANK from the environment, NULL when unset"),
		col("local_rank", "INTEGER", "LOCAL_RANK, NULL when unset"),
		col("world_size", "INTEGER", "WORLD_SIZE, NULL when unset"),
		col("argv", "TEXT", "command line, arguments separated by spaces"),
		col("start_ns", "INTEGER", "start on the recording clock (ns; GPU and host timestamps share it)"),
		col("start_unix_ns", "INTEGER", "wall-clock time at start_ns (ns since 1970), to align hosts"),
		col("end_ns", "INTEGER", "end on the recording clock, NULL when the recording is incomplete"),
		col("end_reason", "TEXT", "why the recording ended (exit, signal, ...), NULL when incomplete"),
		col("python", "TEXT", "detected Python interpreter, empty when none"),
		col("agent_version", "TEXT", "gpurr agent version that recorded it"),
		col("cupti_path", "TEXT", "CUPTI library the agent used"),
		col("driver_version", "INTEGER", "CUDA driver version, e.g. 13000"),
		col("callstack_mode", "TEXT", "auto, python, native or off"),
		col("gpu_timing", "INTEGER", "1 when kernel start/end times on the GPU were collected"),
		col("kernel_filter", "TEXT", "the --kernels regular expression, empty for all"),
		col("complete", "INTEGER", "1 when the recording was closed normally"),
		col("truncated", "INTEGER", "1 when the events file ends inside a frame (killed mid-write)"),
		col("frames", "INTEGER", "frames read from the events file"),
		col("memory_mode", "TEXT", "memory capture (--memory): hash or snapshot, NULL when it was off"),
		col("memory_chunk_bytes", "INTEGER", "bytes per chunk of chunk hashes and snapshots (65536), NULL when off"),
		col("memory_snapshot_kernels", "TEXT", "--snapshot-kernels regular expression, empty for all, NULL when off"),
		col("memory_snapshot_launches", "TEXT", "--snapshot-launches ranges, empty for all, NULL when off"),
		col("memory_on_full", "TEXT", "what a full staging ring did: backpressure (the program waited) or drop-oldest, NULL when off"),
		col("memory_staging_bytes", "INTEGER", "pinned staging ring, NULL when off"),
		col("memory_flight_recorder", "INTEGER", "snapshots kept of only the last N launches (0: all), NULL when off"),
		col("memory_nan_scan", "TEXT", "types the GPU counted NaN and Inf as (--nan-scan; nan_counts), comma-separated, empty for none, NULL when off"),
		col("torch_version", "TEXT", "PyTorch version the agent found, e.g. 2.11.0+cu130 (empty when it could not be read), NULL when no torch was loaded"),
		col("autograd_linked", "INTEGER", "1 when the launches carry PyTorch's autograd context (launches.in_backward and the like), NULL when no torch was loaded"),
		col("autograd_reason", "TEXT", "why they do not, when autograd_linked is 0 (e.g. a torch version whose layout the agent does not know)"),
	))},
	{Name: "devices", Doc: "GPUs each process used", Key: []string{"process", "ordinal"}, Columns: columns(cols(
		col("ordinal", "INTEGER", "CUDA device ordinal"),
		col("uuid", "TEXT", "GPU UUID"),
		col("name", "TEXT", "product name"),
		col("cc", "TEXT", "compute capability, e.g. 9.0"),
		col("sm_count", "INTEGER", "streaming multiprocessors"),
		col("memory_bytes", "INTEGER", "device memory"),
		col("context_uid", "INTEGER", "CUPTI context id first seen on it"),
	))},
	{Name: "modules", Doc: "module images loaded (stored once under modules/<sha256>.cubin)", Key: []string{"process", "sha256"}, Columns: columns(cols(
		col("sha256", "TEXT", "SHA-256 of the image, lower-case hex"),
		col("cupti_module_id", "INTEGER", "CUPTI's module id"),
		col("size", "INTEGER", "image bytes"),
		col("kernel_count", "INTEGER", "entry functions it holds"),
		col("host_ns", "INTEGER", "when it was loaded"),
		col("context_uid", "INTEGER", "CUPTI context id it was loaded into"),
		col("stored", "INTEGER", "1 when the image was written to the recording"),
	))},
	{Name: "kernels", Doc: "each kernel (CUfunction) a process launched, described once", Key: []string{"process", "kernel_id"}, Columns: columns(cols(
		col("kernel_id", "INTEGER", "per-process id; launches.kernel_id refers to it"),
		col("identity", "TEXT", "16 hex digits, stable across runs: hash of module and name"),
		col("name", "TEXT", "mangled name"),
		col("demangled", "TEXT", "readable name (the name itself when not mangled)"),
		col("module_sha256", "TEXT", "module holding it, empty when unknown"),
		col("param_count", "INTEGER", "parameters"),
		col("param_bytes", "INTEGER", "size of the parameter buffer"),
	))},
	{Name: "kernel_params", Doc: "parameter layout of each kernel, to take launches.params apart with substr()", Key: []string{"process", "kernel_id"}, Columns: columns(cols(
		col("kernel_id", "INTEGER", "kernels.kernel_id"),
		col("param", "INTEGER", "parameter index, from 0"),
		col("offset", "INTEGER", "byte offset in the parameter buffer"),
		col("size", "INTEGER", "bytes"),
	))},
	{Name: "launches", Doc: "kernel launches made by the program, in order; captured launches built a graph node and ran nothing", Key: []string{"process", "seq"}, Columns: columns(cols(
		col("seq", "INTEGER", "1, 2, 3 ... shared with graph_launches.seq"),
		col("tid", "INTEGER", "Linux thread id"),
		col("device", "INTEGER", "device ordinal"),
		col("context_uid", "INTEGER", "CUPTI context id"),
		col("stream", "INTEGER", "CUstream handle (0: legacy default stream)"),
		col("stream_id", "INTEGER", "CUPTI stream id"),
		col("kernel_id", "INTEGER", "kernels.kernel_id"),
		col("identity", "TEXT", "kernels.identity"),
		col("name", "TEXT", "mangled kernel name"),
		col("demangled", "TEXT", "readable kernel name"),
	), dims("grid", "grid blocks in"), dims("block", "block threads in"), dims("cluster", "cluster blocks in (NULL: none named)"), cols(
		col("shared_mem_bytes", "INTEGER", "dynamic shared memory"),
		col("params", "BLOB", "raw parameter buffer (kernel_params lays it out)"),
		col("correlation_id", "INTEGER", "CUPTI correlation id of the launch call"),
		col("host_ns", "INTEGER", "when the call was made"),
		col("callstack_id", "INTEGER", "callstacks.callstack_id, NULL when none was taken"),
		col("captured", "INTEGER", "1 when made during stream capture"),
		col("graph_node_id", "INTEGER", "graph node it built (captured launches), else NULL"),
		col("api", "INTEGER", "CUPTI driver callback id: 307 cuLaunchKernel, 652 cuLaunchKernelEx, ..."),
		col("result", "INTEGER", "CUresult of the call (0: success)"),
		col("python_line", "TEXT", "innermost Python frame as file:line function, NULL when none; for a backward launch with forward_callstack_id, the forward launch's: the model line whose backward it computes"),
		col("user_line", "TEXT", "innermost Python frame outside installed packages, the standard library and code PyTorch generates (Inductor, FX), NULL when none; for a backward launch, the forward launch's, as python_line"),
		col("in_backward", "INTEGER", "1 when made inside a PyTorch autograd node's backward, 0 in forward; NULL when the launch carries no autograd context (processes.autograd_linked)"),
		col("backward_node", "TEXT", "the autograd node whose backward made the launch, e.g. MmBackward0; NULL in forward"),
		col("autograd_thread", "INTEGER", "PyTorch's forward thread id: the launching thread's in forward, the node's forward thread in backward; NULL without autograd context"),
		col("autograd_seq", "INTEGER", "autograd sequence number: in forward the thread's next one, in backward the node's (AccumulateGrad's is 2^64-1, read as -1); NULL without autograd context"),
		col("forward_callstack_id", "INTEGER", "backward launches: callstacks.callstack_id of the forward launch of the op that created the node; NULL in forward and when none was found"),
		col("forward_link", "TEXT", "how that forward launch was found: next_launch (the op's own launch) or later_launch (the op launched nothing: a later op's); NULL when none"),
		col("memory_status", "TEXT", "memory capture of the launch: hash, snapshot, or why skipped (skipped_capture, skipped_no_regions, skipped_ring_too_small, skipped_ring_full, skipped_error, skipped_stopped); NULL when memory capture was off"),
		col("snapshot_selected", "INTEGER", "1 when --snapshot-kernels/--snapshot-launches selected it, NULL when memory capture was off"),
		col("region_count", "INTEGER", "regions (allocations its parameters point into), NULL when memory capture was off"),
	))},
	{Name: "gpu_activity", Doc: "kernel executions on the GPU, joined to the launch that ran them", Key: []string{"process", "launch_seq"}, Columns: columns(cols(
		col("correlation_id", "INTEGER", "correlation id of the API call (a graph replay's for graph kernels)"),
		col("device", "INTEGER", "device ordinal"),
		col("context_uid", "INTEGER", "CUPTI context id"),
		col("stream_id", "INTEGER", "CUPTI stream id"),
		col("start_ns", "INTEGER", "kernel start, recording clock"),
		col("end_ns", "INTEGER", "kernel end"),
		col("duration_ns", "INTEGER", "end_ns - start_ns"),
		col("name", "TEXT", "mangled kernel name"),
		col("demangled", "TEXT", "readable kernel name"),
		col("graph_id", "INTEGER", "executable graph id, 0 for eager kernels"),
		col("graph_node_id", "INTEGER", "executable graph node, 0 for eager kernels"),
		col("launch_seq", "INTEGER", "launches.seq of its launch (the capturing launch for graph kernels), NULL when unknown"),
		col("via_graph", "INTEGER", "1 when a graph replay ran it"),
		col("graph_launch_seq", "INTEGER", "graph_launches.seq of the replay that ran it, NULL for eager kernels"),
		col("python_line", "TEXT", "python_line of launch_seq: for a kernel launched in an autograd node's backward, its forward line"),
		col("user_line", "TEXT", "user_line of launch_seq"),
	), dims("grid", "grid blocks in"), dims("block", "block threads in"), cols(
		col("registers_per_thread", "INTEGER", "registers per thread"),
		col("shared_mem_bytes", "INTEGER", "dynamic shared memory"),
		col("static_shared_mem_bytes", "INTEGER", "static shared memory"),
	))},
	{Name: "callstacks", Doc: "host callstacks, stored once and referenced by id", Key: []string{"process", "callstack_id"}, Columns: columns(cols(
		col("callstack_id", "INTEGER", "hash of the frames"),
		col("source", "TEXT", "python, native or python+native"),
		col("depth", "INTEGER", "number of frames"),
		col("python_line", "TEXT", "innermost Python frame, NULL when none"),
		col("user_line", "TEXT", "innermost Python frame outside installed packages, the standard library and code PyTorch generates (Inductor, FX), NULL when none"),
		col("text", "TEXT", "the frames, innermost first, one per line"),
		col("cut", "TEXT", "why the stack ends before the thread's first frame: depth, no unwind info, unsupported unwind rule, corrupt frame or foreign stack; NULL when whole"),
	))},
	{Name: "frames", Doc: "the frames of each callstack", Key: []string{"process", "callstack_id"}, Columns: columns(cols(
		col("callstack_id", "INTEGER", "callstacks.callstack_id"),
		col("depth", "INTEGER", "0 is the innermost frame"),
		col("kind", "TEXT", "python or native"),
		col("file", "TEXT", "Python source file, or native shared object"),
		col("line", "INTEGER", "Python line, NULL for native frames"),
		col("function", "TEXT", "Python qualified name, or demangled native symbol"),
		col("pc", "INTEGER", "native program counter, NULL for Python frames"),
		col("offset", "INTEGER", "pc minus the object's load address, NULL for Python frames"),
	))},
	{Name: "graph_nodes", Doc: "CUDA graph nodes: created by a captured launch, or cloned from another node", Key: []string{"process", "node_id"}, Columns: columns(cols(
		col("node_id", "INTEGER", "graph node id"),
		col("graph_id", "INTEGER", "graph holding it"),
		col("original_node_id", "INTEGER", "node it was cloned from, NULL when created"),
		col("launch_seq", "INTEGER", "launches.seq of the captured launch that created it, NULL when cloned"),
		col("node_type", "INTEGER", "CUgraphNodeType (0: kernel)"),
	))},
	{Name: "graph_launches", Doc: "CUDA graph replays (cuGraphLaunch)", Key: []string{"process", "seq"}, Columns: columns(cols(
		col("seq", "INTEGER", "shares the sequence with launches.seq"),
		col("tid", "INTEGER", "Linux thread id"),
		col("graph_exec", "INTEGER", "CUgraphExec handle"),
		col("stream", "INTEGER", "CUstream handle"),
		col("stream_id", "INTEGER", "CUPTI stream id"),
		col("correlation_id", "INTEGER", "matches gpu_activity.correlation_id of the kernels it ran"),
		col("host_ns", "INTEGER", "when the call was made"),
		col("callstack_id", "INTEGER", "callstacks.callstack_id, NULL when none was taken"),
		col("device", "INTEGER", "device ordinal"),
		col("result", "INTEGER", "CUresult of the call"),
		col("python_line", "TEXT", "innermost Python frame, NULL when none"),
		col("user_line", "TEXT", "innermost Python frame outside installed packages, the standard library and code PyTorch generates (Inductor, FX), NULL when none"),
	))},
	{Name: "allocations", Doc: "device memory allocations (--memory), with when each was freed", Key: []string{"process", "allocation_id"}, Columns: columns(cols(
		col("allocation_id", "INTEGER", "per-process id; regions.allocation_id refers to it"),
		col("kind", "TEXT", "mem_alloc, mem_alloc_pitch, mem_alloc_async (stream-ordered pool), mem_map (cuMemMap), mem_alloc_managed or range_query (found by cuMemGetAddressRange for a launch)"),
		col("device", "INTEGER", "device ordinal"),
		col("address", "INTEGER", "start address (printf('0x%x', address) shows it in hex)"),
		col("size", "INTEGER", "bytes"),
		col("alloc_ns", "INTEGER", "when it was allocated, NULL when the recording holds only its free"),
		col("free_ns", "INTEGER", "when it was freed, NULL when it was still live at the end of the recording"),
	))},
	{Name: "regions", Doc: "device memory each launch can reach: whole allocations its parameter words point into (--memory)", Key: []string{"process", "launch_seq"}, Columns: columns(cols(
		col("launch_seq", "INTEGER", "launches.seq"),
		col("region", "INTEGER", "index in the launch's regions, from 0; memory_states.region refers to it"),
		col("address", "INTEGER", "start of the allocation"),
		col("size", "INTEGER", "bytes: the whole allocation, a superset of what the kernel touched"),
		col("allocation_id", "INTEGER", "allocations.allocation_id, NULL when found by the driver's range query"),
		col("param_offsets", "TEXT", "byte offsets in launches.params of the 8-byte words that point into it, comma-separated"),
	))},
	{Name: "memory_states", Doc: "hash (and snapshot) of each launch's regions before or after it ran, computed on the GPU in stream order (--memory)", Key: []string{"process", "launch_seq"}, Columns: columns(cols(
		col("launch_seq", "INTEGER", "launches.seq"),
		col("point", "TEXT", "before or after the launch"),
		col("region", "INTEGER", "regions.region, NULL for a lost state of a launch whose regions are unknown"),
		col("address", "INTEGER", "regions.address"),
		col("size", "INTEGER", "regions.size"),
		col("hash", "TEXT", "gpurr-h128 of the region, 32 hex digits (docs/hash.md), NULL when lost"),
		col("chunks", "INTEGER", "chunk hashes recorded (memory_chunks), NULL when lost"),
		col("chunks_transferred", "INTEGER", "snapshot: chunks that crossed PCIe (the others were stored already), NULL when lost"),
		col("chunks_missing", "INTEGER", "snapshot: chunks whose bytes were dropped (drop-oldest), NULL when lost"),
		col("snapshot", "INTEGER", "1 when the region's chunks are in the chunk store"),
		col("lost", "INTEGER", "1 when the state was enqueued but never completed or was dropped; its region rows carry no hash"),
		col("lost_reason", "TEXT", "why it was lost, NULL when not lost"),
	))},
	{Name: "nan_counts", Doc: "NaN and Inf elements the GPU counted in a launch's regions after it ran (--nan-scan): one row per region and type with at least one", Key: []string{"process", "launch_seq"}, Columns: columns(cols(
		col("launch_seq", "INTEGER", "launches.seq"),
		col("region", "INTEGER", "regions.region"),
		col("dtype", "TEXT", "the type the region's bytes were read as (processes.memory_nan_scan)"),
		col("nan", "INTEGER", "elements that are NaN as that type"),
		col("inf", "INTEGER", "elements that are +Inf or -Inf as that type"),
	))},
	{Name: "memory_chunks", Doc: "hash of each chunk of each region state: where two states of a region differ; a snapshot's chunks are stored under these hashes in the chunk store (--memory; filled the first time a statement names it)", Key: []string{"process", "launch_seq"}, Columns: columns(cols(
		col("launch_seq", "INTEGER", "memory_states.launch_seq"),
		col("point", "TEXT", "memory_states.point"),
		col("region", "INTEGER", "memory_states.region"),
		col("chunk", "INTEGER", "index in the region, from 0"),
		col("offset", "INTEGER", "byte offset in the region: chunk × processes.memory_chunk_bytes"),
		col("hash", "TEXT", "gpurr-h128 of the chunk's bytes, 32 hex digits"),
	))},
	{Name: "log", Doc: "the agent's log: what went wrong or was skipped while recording", Columns: columns(cols(
		col("host_ns", "INTEGER", "when"),
		col("level", "TEXT", "info, warn or error"),
		col("message", "TEXT", "what happened"),
	))},
	{Name: "stats", Doc: "the agent's counters as of the last frame; *_dropped, *_failed and *_lost count losses", Key: []string{"process"}, Columns: columns(statsColumns())},
}

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
	"staging_wait_ns":       "time the program's threads waited for staging space (backpressure)",
	"memory_capture_gpu_ns": "GPU time of gpurr's own hash and copy kernels",
	"flight_dumps":          "flight-recorder dumps written",
	"memory_stopped":        "why memory capture stopped early, empty when it did not",

	"backward_launches": "launches made inside a PyTorch autograd node's backward",
	"backward_linked":   "backward launches whose forward callstack was found",
}

func statsFields() protoreflect.FieldDescriptors {
	return (&pb.Stats{}).ProtoReflect().Descriptor().Fields()
}

func statsColumns() []Column {
	fields := statsFields()
	var out []Column
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := string(fd.Name())
		doc := statsDocs[name]
		if doc == "" {
			doc = strings.ReplaceAll(name, "_", " ")
		}
		typ := "INTEGER"
		if fd.Kind() == protoreflect.StringKind {
			typ = "TEXT"
		}
		out = append(out, col(name, typ, doc))
	}
	return out
}

// Schema describes every table, in the order they are created.
func Schema() []Table {
	out := make([]Table, len(tables))
	for i, t := range tables {
		t.Columns = append([]Column(nil), t.Columns...)
		t.Key = append([]string(nil), t.Key...)
		out[i] = t
	}
	return out
}

func (t Table) createSQL() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE %s (", t.Name)
	for i, c := range t.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q %s", c.Name, c.Type)
	}
	b.WriteString(")")
	return b.String()
}

func (t Table) insertSQL() string {
	return fmt.Sprintf("INSERT INTO %s VALUES (%s)", t.Name, strings.TrimSuffix(strings.Repeat("?, ", len(t.Columns)), ", "))
}

func (t Table) indexSQL() string {
	if len(t.Key) == 0 {
		return ""
	}
	return fmt.Sprintf("CREATE INDEX %s_key ON %s (%s)", t.Name, t.Name, strings.Join(t.Key, ", "))
}
