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
		col("python_line", "TEXT", "innermost Python frame as file:line function, NULL when none"),
		col("user_line", "TEXT", "innermost Python frame outside installed packages and the standard library, NULL when none"),
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
		col("python_line", "TEXT", "python_line of launch_seq"),
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
		col("user_line", "TEXT", "innermost Python frame outside installed packages and the standard library, NULL when none"),
		col("text", "TEXT", "the frames, innermost first, one per line"),
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
		col("user_line", "TEXT", "innermost Python frame outside installed packages and the standard library, NULL when none"),
	))},
	{Name: "log", Doc: "the agent's log: what went wrong or was skipped while recording", Columns: columns(cols(
		col("host_ns", "INTEGER", "when"),
		col("level", "TEXT", "info, warn or error"),
		col("message", "TEXT", "what happened"),
	))},
	{Name: "stats", Doc: "the agent's counters as of the last frame; *_dropped and *_failed count losses", Key: []string{"process"}, Columns: columns(statsColumns())},
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
}

func statsFields() protoreflect.FieldDescriptors {
	return (&pb.Stats{}).ProtoReflect().Descriptor().Fields()
}

func statsColumns() []Column {
	fields := statsFields()
	var out []Column
	for i := range fields.Len() {
		name := string(fields.Get(i).Name())
		doc := statsDocs[name]
		if doc == "" {
			doc = strings.ReplaceAll(name, "_", " ")
		}
		out = append(out, col(name, "INTEGER", doc))
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
