// Package export writes gpurr recordings as Parquet tables, so that Spark,
// Trino, DuckDB or pandas can query the recordings of a job larger than
// one machine can load (gpurr query reads one recording into SQLite).
//
// Each table is a folder; inside it, files are partitioned by host and
// rank the way Hive lays out tables (table/host=H/rank=R/PROCESS.parquet),
// so engines prune by host and rank and add both as columns. The row
// types below are the schema: their parquet tags name the columns, and
// docs/trace.md describes every one. Unsigned 64-bit values of the
// recording (ids, handles) are stored as signed 64-bit integers with the
// same bits, as gpurr query stores them.
//
// Parquet reads each process's recording once, streaming: a kernel is
// joined to its launch while the launch waits for it, and region hashes to
// their launch's regions while the launch waits for its memory states.
package export

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// LaunchRow is a row of the launches table: a kernel launch call, or a
// cuGraphLaunch (graph_launch true; the two share the seq numbering).
type LaunchRow struct {
	Process     string `parquet:"process,dict"`
	Pid         int32  `parquet:"pid"`
	Seq         int64  `parquet:"seq"`
	GraphLaunch bool   `parquet:"graph_launch"`
	Tid         int32  `parquet:"tid"`
	Device      int32  `parquet:"device"`
	Stream      int64  `parquet:"stream"`
	StreamID    int32  `parquet:"stream_id"`
	KernelID    int64  `parquet:"kernel_id"`
	Kernel      string `parquet:"kernel,dict"`
	Identity    int64  `parquet:"identity"`
	Dims
	SharedMemBytes int32  `parquet:"shared_mem_bytes"`
	CorrelationID  int64  `parquet:"correlation_id"`
	HostNs         int64  `parquet:"host_ns"`
	HostUnixNs     int64  `parquet:"host_unix_ns"`
	CallstackID    int64  `parquet:"callstack_id"`
	PythonLine     string `parquet:"python_line,dict"`
	// PyTorch's autograd context (Launch.autograd), as gpurr query's
	// launches table has it: null without one.
	InBackward         *bool  `parquet:"in_backward,optional"`
	BackwardNode       string `parquet:"backward_node,dict"`
	AutogradThread     *int64 `parquet:"autograd_thread,optional"`
	AutogradSeq        *int64 `parquet:"autograd_seq,optional"`
	ForwardCallstackID int64  `parquet:"forward_callstack_id"`
	ForwardLink        string `parquet:"forward_link,dict"`
	Captured           bool   `parquet:"captured"`
	GraphNodeID        int64  `parquet:"graph_node_id"`
	GraphExec          int64  `parquet:"graph_exec"`
	API                int32  `parquet:"api"`
	Result             int32  `parquet:"result"`
	MemoryStatus       string `parquet:"memory_status,dict"`
}

// Dims are a launch's grid and block dimensions, columns of the launches
// and gpu_activity tables.
type Dims struct {
	GridX  int32 `parquet:"grid_x"`
	GridY  int32 `parquet:"grid_y"`
	GridZ  int32 `parquet:"grid_z"`
	BlockX int32 `parquet:"block_x"`
	BlockY int32 `parquet:"block_y"`
	BlockZ int32 `parquet:"block_z"`
}

func dims(grid, block *pb.Dim3) Dims {
	return Dims{int32(grid.GetX()), int32(grid.GetY()), int32(grid.GetZ()), int32(block.GetX()), int32(block.GetY()), int32(block.GetZ())}
}

// KernelRow is a row of the kernels table: a CUfunction a process launched.
type KernelRow struct {
	Process      string `parquet:"process,dict"`
	Pid          int32  `parquet:"pid"`
	ID           int64  `parquet:"id"`
	Identity     int64  `parquet:"identity"`
	Name         string `parquet:"name"`
	Demangled    string `parquet:"demangled"`
	ModuleSha256 string `parquet:"module_sha256,dict"`
	Params       int32  `parquet:"params"`
	ParamBytes   int32  `parquet:"param_bytes"`
}

// CallstackRow is a row of the callstacks table: one frame of a distinct
// callstack (depth 0 is the innermost).
type CallstackRow struct {
	Process     string `parquet:"process,dict"`
	Pid         int32  `parquet:"pid"`
	CallstackID int64  `parquet:"callstack_id"`
	Source      string `parquet:"source,dict"`
	Depth       int32  `parquet:"depth"`
	Kind        string `parquet:"kind,dict"`
	File        string `parquet:"file,dict"`
	Line        int32  `parquet:"line"`
	Function    string `parquet:"function,dict"`
	Offset      int64  `parquet:"offset"`
}

// ActivityRow is a row of the gpu_activity table: a kernel execution on
// the GPU, the program's or (gpurr_own) gpurr's own memory capture's.
type ActivityRow struct {
	Process        string `parquet:"process,dict"`
	Pid            int32  `parquet:"pid"`
	CorrelationID  int64  `parquet:"correlation_id"`
	Device         int32  `parquet:"device"`
	StreamID       int32  `parquet:"stream_id"`
	StartNs        int64  `parquet:"start_ns"`
	EndNs          int64  `parquet:"end_ns"`
	StartUnixNs    int64  `parquet:"start_unix_ns"`
	DurationNs     int64  `parquet:"duration_ns"`
	Name           string `parquet:"name,dict"`
	Demangled      string `parquet:"demangled,dict"`
	GraphID        int32  `parquet:"graph_id"`
	GraphNodeID    int64  `parquet:"graph_node_id"`
	ViaGraph       bool   `parquet:"via_graph"`
	LaunchSeq      *int64 `parquet:"launch_seq,optional"`
	GraphLaunchSeq *int64 `parquet:"graph_launch_seq,optional"`
	PythonLine     string `parquet:"python_line,dict"`
	Dims
	Registers      int32 `parquet:"registers_per_thread"`
	SharedMemBytes int32 `parquet:"shared_mem_bytes"`
	StaticSmem     int32 `parquet:"static_shared_mem_bytes"`
	GpurrOwn       bool  `parquet:"gpurr_own"`
}

// RegionHashRow is a row of the region_hashes table (recordings made with
// --memory): the state of one region of a launch before or after it.
type RegionHashRow struct {
	Process           string `parquet:"process,dict"`
	Pid               int32  `parquet:"pid"`
	LaunchSeq         int64  `parquet:"launch_seq"`
	Point             string `parquet:"point,dict"`
	Region            int32  `parquet:"region"`
	Address           int64  `parquet:"address"`
	Size              int64  `parquet:"size"`
	AllocationID      int64  `parquet:"allocation_id"`
	Hash              string `parquet:"hash"`
	Chunks            int32  `parquet:"chunks"`
	ChunksTransferred int32  `parquet:"chunks_transferred"`
	ChunksMissing     int32  `parquet:"chunks_missing"`
	Snapshot          bool   `parquet:"snapshot"`
	Lost              bool   `parquet:"lost"`
	LostReason        string `parquet:"lost_reason,dict"`
}

// Tables names the tables, in the order Parquet writes them.
var Tables = []string{"launches", "kernels", "callstacks", "gpu_activity", "region_hashes"}

// Stats counts the rows written to each table, and the files.
type Stats struct {
	Rows  map[string]int64
	Files int
}

// Partition is the folder, below a table's, that holds a process's file:
// host=H/rank=R, R -1 for a process without a RANK.
func Partition(p *pb.Process) string {
	rank := int32(-1)
	if p.Rank != nil {
		rank = p.GetRank()
	}
	host := strings.Map(func(r rune) rune {
		if r == '/' || r == '=' || r == '\\' || r < ' ' {
			return '_'
		}
		return r
	}, p.GetHostname())
	if host == "" || host == "." || host == ".." {
		host = "_"
	}
	return filepath.Join("host="+host, fmt.Sprintf("rank=%d", rank))
}

// Parquet writes the processes' recordings into dir, which must not exist
// or be empty. An error reading a recording names it; the files written
// before it are left in dir.
func Parquet(dir string, procs []*recording.Process) (Stats, error) {
	st := Stats{Rows: map[string]int64{}}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return st, fmt.Errorf("%s is not empty: export into a new folder", dir)
	}
	for _, p := range procs {
		if err := exportProcess(dir, p, &st); err != nil {
			return st, err
		}
	}
	return st, nil
}

// table is one table's file for one process, created with its first row.
type table[T any] struct {
	path string
	f    *os.File
	w    *parquet.GenericWriter[T]
	rows []T
	st   *Stats
	name string
}

func newTable[T any](dir, name string, p *recording.Process, st *Stats) *table[T] {
	return &table[T]{path: filepath.Join(dir, name, Partition(p.Info), p.Name+".parquet"), st: st, name: name}
}

// rowGroup bounds the rows a writer buffers before it writes them out.
const rowGroup = 64 << 10

func (t *table[T]) add(r T) error {
	t.rows = append(t.rows, r)
	if len(t.rows) >= 4096 {
		return t.flush()
	}
	return nil
}

func (t *table[T]) flush() error {
	if len(t.rows) == 0 {
		return nil
	}
	if t.w == nil {
		if err := os.MkdirAll(filepath.Dir(t.path), 0o755); err != nil {
			return err
		}
		f, err := os.Create(t.path)
		if err != nil {
			return err
		}
		t.f = f
		t.w = parquet.NewGenericWriter[T](f, parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(rowGroup),
			parquet.CreatedBy("gpurr export", "", ""))
		t.st.Files++
	}
	if _, err := t.w.Write(t.rows); err != nil {
		return fmt.Errorf("%s: %w", t.path, err)
	}
	t.st.Rows[t.name] += int64(len(t.rows))
	clear(t.rows)
	t.rows = t.rows[:0]
	return nil
}

func (t *table[T]) close() error {
	if err := t.flush(); err != nil {
		return err
	}
	if t.w == nil {
		return nil
	}
	if err := t.w.Close(); err != nil {
		t.f.Close()
		return fmt.Errorf("%s: %w", t.path, err)
	}
	return t.f.Close()
}

// abort closes a table's file after an error.
func (t *table[T]) abort() {
	if t.f != nil {
		t.f.Close()
	}
}
