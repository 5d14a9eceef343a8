package query

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

type collect struct {
	names []string
	rows  [][]any
}

func (c *collect) Columns(names []string) error { c.names = names; return nil }
func (c *collect) Row(values []any) error {
	c.rows = append(c.rows, append([]any(nil), values...))
	return nil
}

func load(t *testing.T, v testrec.Variant) *DB {
	t.Helper()
	db, err := Load(context.Background(), testrec.Open(t, v))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func run(t *testing.T, db *DB, q string) *collect {
	t.Helper()
	var c collect
	if err := db.Query(context.Background(), q, &c); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return &c
}

// one runs a query that returns a single value.
func one(t *testing.T, db *DB, q string) any {
	t.Helper()
	c := run(t, db, q)
	if len(c.rows) != 1 || len(c.rows[0]) != 1 {
		t.Fatalf("%s: %d rows, want one value", q, len(c.rows))
	}
	return c.rows[0][0]
}

func TestTablesMatchSchema(t *testing.T) {
	db := load(t, testrec.Memory) // everything the good one holds, and memory capture
	for _, table := range Schema() {
		c := run(t, db, "SELECT name, type, \"notnull\" FROM pragma_table_info('"+table.Name+"')")
		if len(c.rows) != len(table.Columns) {
			t.Fatalf("%s has %d columns, schema says %d", table.Name, len(c.rows), len(table.Columns))
		}
		for i, col := range table.Columns {
			if c.rows[i][0] != col.Name || c.rows[i][1] != col.Type.SQL() || c.rows[i][2] != map[bool]int64{false: 1, true: 0}[col.Null] {
				t.Errorf("%s column %d is %v %v (not null %v), schema says %s %s", table.Name, i, c.rows[i][0], c.rows[i][1], c.rows[i][2], col.Name, col.TypeText())
			}
			if col.Doc == "" {
				t.Errorf("%s.%s has no description", table.Name, col.Name)
			}
		}
		if strings.HasPrefix(table.Name, "probe_") {
			continue // recorded with --probe only: TestProbeTables
		}
		if table.Name == "write_set_misses" {
			continue // recorded with --write-sets learned only: TestWriteSetTables
		}
		if table.Name == "digests" {
			continue // recorded with --memory digest only: TestDigestTable
		}
		if table.Name == "copy_states" {
			continue // recorded from format 1.17 on, of copies into device memory: the tables package's TestCopyStates
		}
		if table.Name == "copies" || table.Name == "syncs" || table.Name == "host_calls" {
			continue // recorded from format 1.15 on: TestCopyTables
		}
		if table.Name == "torn_states" {
			continue // holds rows only where streams overlapped gpurr's kernels: TestTornStatesTable
		}
		if n := one(t, db, "SELECT count(*) FROM "+table.Name); n == int64(0) {
			t.Errorf("table %s is empty for the synthetic recording", table.Name)
		}
		if n := one(t, db, "SELECT count(DISTINCT process) FROM "+table.Name); n != int64(testrec.Ranks) {
			t.Errorf("table %s holds %v processes, want %d", table.Name, n, testrec.Ranks)
		}
	}
}

// Copies, memsets and waits (format 1.15), as SQL sees them: each joined to the call and
// line that made it; a copy of 0 bytes is a call with no copy; an asynchronous copy from
// pageable memory is marked; the time the host waited sums the waits; a recording made
// before 1.15 has none of them.
func TestCopyTables(t *testing.T) {
	db := load(t, testrec.Copies)
	for q, want := range map[string]any{
		"SELECT group_concat(kind || ':' || coalesce(direction, '-') || ':' || bytes || ':' || pageable_async, ' ') FROM (SELECT * FROM copies WHERE process = 'gpu-box-4242' ORDER BY correlation_id)": "memcpy:HtoD:4194304:0 memcpy:HtoD:1048576:1 memset:-:1048576:0 memcpy:DtoH:4:1",
		"SELECT count(*) FROM copies WHERE call_python_line IS NULL OR duration_ns <= 0 OR stream_id != 7":                                                                                              int64(0),
		"SELECT call_python_line FROM copies WHERE kind = 'memset' AND process = 'gpu-box-4242'":                                                                                                        "/home/ada/train.py:14 load_batch",
		"SELECT count(*) FROM host_calls h WHERE NOT EXISTS (SELECT 1 FROM copies c WHERE c.process = h.process AND c.correlation_id = h.correlation_id) AND api LIKE 'cuMemcpy%'":                      int64(2),
		"SELECT sum(wait_ns) FROM syncs WHERE process = 'gpu-box-4242'":                                                                                                                                 int64(testrec.CopiesWaitNS),
		"SELECT group_concat(type || ':' || coalesce(stream_id, '-') || ':' || coalesce(event_id, '-'), ' ') FROM (SELECT * FROM syncs WHERE process = 'gpu-box-4242' ORDER BY correlation_id)":         "stream:7:- event:-:3 stream_wait_event:13:3 context:-:-",
		"SELECT DISTINCT call_python_line FROM syncs":    "/home/ada/train.py:48 main",
		"SELECT DISTINCT host_duration_ns FROM launches": int64(testrec.LaunchCallNS),
	} {
		if got := one(t, db, q); got != want {
			t.Errorf("%s\n got %v, want %v", q, got, want)
		}
	}
	old := load(t, testrec.Good)
	for q, want := range map[string]any{
		"SELECT count(*) FROM copies":                                  int64(0),
		"SELECT count(*) FROM syncs":                                   int64(0),
		"SELECT count(*) FROM host_calls":                              int64(0),
		"SELECT count(*) FROM launches WHERE host_duration_ns IS NULL": one(t, old, "SELECT count(*) FROM launches"),
	} {
		if got := one(t, old, q); got != want {
			t.Errorf("before format 1.15: %s\n got %v, want %v", q, got, want)
		}
	}
}

// A recording with learned write sets (format 1.11), as SQL sees it: carried states join the
// state they were carried from and hold its hash; the unknown one has none; the miss names the
// launches whose carried states of its allocation may be stale.
func TestWriteSetTables(t *testing.T) {
	db := load(t, testrec.WriteSets)
	for q, want := range map[string]any{
		"SELECT group_concat(carried || ':' || count, ' ') FROM (SELECT carried, count(*) AS count FROM memory_states GROUP BY carried ORDER BY carried)": ":10 learned:2 proved:3",
		// Every carried state with a hash holds the hash of the state it names.
		`SELECT count(*) FROM memory_states c JOIN memory_states f ON f.launch_seq = c.carried_from AND f.point = 'after'
			JOIN regions rc ON rc.launch_seq = c.launch_seq AND rc.region = c.region
			JOIN regions rf ON rf.launch_seq = f.launch_seq AND rf.region = f.region AND rf.allocation_id = rc.allocation_id
			WHERE c.hash = f.hash`: int64(4),
		"SELECT launch_seq || ':' || region || ' ' || coalesce(hash, 'no hash') || ' ' || coalesce(carried_from, 'from a lost state') FROM memory_states WHERE unknown": "9:0 no hash from a lost state",
		"SELECT name || ' [' || param_offsets || '] ' || since_seq || '..' || audit_seq || ' allocation ' || allocation_id FROM write_set_misses":                       "step(float const*, float*) [0] 4..7 allocation 3",
		// The states a miss says may be stale: X's carried states after since_seq, up to the audit.
		`SELECT group_concat(m.launch_seq) FROM memory_states m JOIN regions r ON r.launch_seq = m.launch_seq AND r.region = m.region
			JOIN write_set_misses w ON r.allocation_id = w.allocation_id AND m.launch_seq > w.since_seq AND m.launch_seq < w.audit_seq
			WHERE m.carried = 'learned'`: "5,6",
		"SELECT memory_write_sets || ' ' || memory_audit_every FROM processes":                            "learned 3",
		"SELECT regions_carried_unknown || ' ' || write_set_audits || ' ' || write_set_misses FROM stats": "1 1 1",
	} {
		if got := one(t, db, q); got != want {
			t.Errorf("%s: %v, want %v", q, got, want)
		}
	}
}

// The probe tables of a recording where rank 0 ran with --probe: its kernels, its launches
// (one with records, CTA 7 missing; one skipped) and the CTAs that ran; rank 1, recorded
// without, has no rows.
func TestProbeTables(t *testing.T) {
	db := load(t, testrec.Probe)
	for q, want := range map[string]any{
		"SELECT group_concat(process) FROM (SELECT DISTINCT process FROM probe_kernels UNION SELECT process FROM probe_launches UNION SELECT process FROM probe_ctas)": "gpu-box-4242",
		"SELECT group_concat(probe, '|') FROM processes":                                                                   testrec.ProbeRecorded,
		"SELECT count(*) FROM processes WHERE probe IS NULL":                                                               int64(1),
		"SELECT name || ' ' || instrumented || ' ' || count || ' ' || counted FROM probe_kernels WHERE kernel_id = 3":      "triton_poi_fused_add_mul_0 1 global-store 2",
		"SELECT reason FROM probe_kernels WHERE NOT instrumented":                                                          "no PTX for its module (only Triton's is kept)",
		"SELECT ctas || ' ' || missing || ' ' || kernel_id FROM probe_launches WHERE skipped IS NULL":                      "256 1 3",
		"SELECT launch_seq || ' ' || ctas || ': ' || skipped FROM probe_launches WHERE skipped IS NOT NULL":                "12 0: captured into a CUDA graph: its replays run without probes",
		"SELECT count(*) FROM probe_ctas":                                                                                  int64(255),
		"SELECT count(*) FROM probe_ctas WHERE cta = 7":                                                                    int64(0),
		"SELECT cta || ' ' || x || ',' || y || ',' || z || ' sm ' || sm FROM probe_ctas ORDER BY duration_ns DESC LIMIT 1": "200 200,0,0 sm 68",
		"SELECT max(end_ns) - min(start_ns) FROM probe_ctas":                                                               int64(3254),
		"SELECT sum(count) FROM probe_ctas":                                                                                int64(16701),
		"SELECT count(*) FROM probe_ctas c JOIN launches l ON l.process = c.process AND l.seq = c.launch_seq":              int64(255),
	} {
		if got := one(t, db, q); got != want {
			t.Errorf("%s: %v, want %v", q, got, want)
		}
	}
}

func TestEveryActivityJoined(t *testing.T) {
	db := load(t, testrec.Good)
	if n := one(t, db, "SELECT count(*) FROM gpu_activity WHERE launch_seq IS NULL"); n != int64(0) {
		t.Errorf("%v activities without a launch", n)
	}
	// The join must agree with the launches table: same kernel, and graph
	// kernels lead to captured launches made at capture time.
	mismatched := one(t, db, `SELECT count(*) FROM gpu_activity a JOIN launches l ON l.process = a.process AND l.seq = a.launch_seq
		WHERE l.name != a.name OR l.captured != a.via_graph OR l.python_line IS NOT a.python_line`)
	if mismatched != int64(0) {
		t.Errorf("%v activities joined to the wrong launch", mismatched)
	}
	replays := one(t, db, `SELECT count(*) FROM gpu_activity a JOIN graph_launches g ON g.process = a.process AND g.seq = a.graph_launch_seq
		WHERE a.via_graph = 1 AND g.correlation_id = a.correlation_id`)
	if replays != int64(8) {
		t.Errorf("%v graph kernels joined to their replay, want 8", replays)
	}
	line := one(t, db, `SELECT DISTINCT python_line FROM gpu_activity WHERE via_graph = 1 AND name LIKE 'triton%'`)
	if line != "/home/ada/train.py:33 capture_step" {
		t.Errorf("graph kernel's Python line %v, want the capturing line", line)
	}
}

func TestValues(t *testing.T) {
	db := load(t, testrec.Good)
	for q, want := range map[string]any{
		"SELECT demangled FROM kernels WHERE kernel_id = 4 AND process = 'gpu-box-4242'":            "add_kernel(float*, float const*, float const*, int)",
		"SELECT identity FROM kernels WHERE kernel_id = 3 AND process = 'gpu-box-4242'":             "d50c73c24bf89bc5",
		"SELECT rank FROM processes WHERE process = 'gpu-box-4243'":                                 int64(1),
		"SELECT cc FROM devices WHERE process = 'gpu-box-4243'":                                     "9.0",
		"SELECT count(*) FROM launches WHERE cluster_x IS NULL":                                     int64(20),
		"SELECT DISTINCT python_line FROM launches WHERE api = 652 AND NOT captured":                "/home/ada/.venv/lib/python3.12/site-packages/torch/nn/modules/linear.py:125 Linear.forward",
		"SELECT count(*) FROM launches WHERE callstack_id IS NULL":                                  int64(2),
		"SELECT length(params) FROM launches WHERE seq = 1 AND process = 'gpu-box-4242'":            int64(16),
		"SELECT sum(size) FROM kernel_params WHERE kernel_id = 2 AND process = 'gpu-box-4242'":      int64(36),
		"SELECT count(*) FROM frames WHERE kind = 'native' AND line IS NULL AND offset IS NOT NULL": int64(12),
		"SELECT launches FROM stats WHERE process = 'gpu-box-4242'":                                 int64(14),
		"SELECT complete + truncated * 2 FROM processes WHERE process = 'gpu-box-4242'":             int64(1),
		"SELECT count(*) FROM graph_nodes WHERE launch_seq IS NULL":                                 int64(6),
	} {
		if got := one(t, db, q); got != want {
			t.Errorf("%s = %#v, want %#v", q, got, want)
		}
	}
}

// TestMemory checks the memory tables against what testrec's Memory variant
// records: rank 0 in snapshot mode (gemm launches), rank 1 in hash mode.
func TestMemory(t *testing.T) {
	db := load(t, testrec.Memory)
	for q, want := range map[string]any{
		"SELECT memory_mode || ' ' || memory_snapshot_kernels FROM processes WHERE process = 'gpu-box-4242'":         "snapshot gemm",
		"SELECT memory_chunk_bytes FROM processes WHERE process = 'gpu-box-4243'":                                    int64(65536),
		"SELECT group_concat(kind || ':' || (free_ns IS NULL), ' ') FROM allocations WHERE process = 'gpu-box-4243'": "mem_alloc:0 mem_alloc:1 mem_alloc_async:0 mem_alloc:1",
		// The weights were freed and allocated again, larger, at the same address.
		"SELECT count(DISTINCT address) || ' ' || count(*) FROM allocations WHERE kind = 'mem_alloc' AND process = 'gpu-box-4242'": "2 3",
		"SELECT group_concat(memory_status || '/' || region_count, ' ') FROM launches WHERE process = 'gpu-box-4242' AND seq >= 7": "snapshot/2 snapshot/2 skipped_ring_too_small/1 hash/1 skipped_capture/1 skipped_capture/1 hash/1 skipped_stopped/1",
		"SELECT param_offsets FROM regions WHERE process = 'gpu-box-4242' AND launch_seq = 7 AND region = 0":                       "0,8",
		// Every region belongs to an allocation that was live when the launch was made.
		`SELECT count(*) FROM regions r JOIN launches l ON l.process = r.process AND l.seq = r.launch_seq
			LEFT JOIN allocations a ON a.process = r.process AND a.allocation_id = r.allocation_id
			WHERE a.address != r.address OR a.size != r.size OR l.host_ns < a.alloc_ns OR l.host_ns > coalesce(a.free_ns, l.host_ns)`: int64(0),
		// Hash mode: one AFTER state per launch that ran with memory ops.
		"SELECT count(DISTINCT launch_seq) || ' ' || count(*) FROM memory_states WHERE process = 'gpu-box-4243'": "12 14",
		"SELECT group_concat(DISTINCT point) FROM memory_states WHERE process = 'gpu-box-4243'":                  "after",
		// Snapshot: before and after; only chunks not stored yet crossed PCIe.
		"SELECT group_concat(point || ':' || chunks_transferred || '/' || chunks, ' ') FROM memory_states WHERE process = 'gpu-box-4242' AND launch_seq = 7 AND region = 0": "before:17/17 after:1/17",
		"SELECT lost_reason FROM memory_states WHERE lost AND process = 'gpu-box-4242'":                                                                                     "memory capture stopped before the GPU completed it",
		"SELECT count(*) FROM memory_states WHERE lost = 0 AND (hash IS NULL OR length(hash) != 32)":                                                                        int64(0),
		// The same kernel on the same data gives the same hash in both ranks.
		`SELECT count(*) FROM memory_states a JOIN memory_states b ON a.launch_seq = b.launch_seq AND a.point = b.point AND a.region = b.region
			WHERE a.process = 'gpu-box-4242' AND b.process = 'gpu-box-4243' AND a.hash = b.hash`: int64(11),
		// The gemm's write changed only the first chunk of the weights.
		`SELECT group_concat(a.chunk) FROM memory_chunks a JOIN memory_chunks b ON b.process = a.process AND b.launch_seq = a.launch_seq
			AND b.region = a.region AND b.chunk = a.chunk AND b.point = 'after'
			WHERE a.process = 'gpu-box-4242' AND a.launch_seq = 8 AND a.point = 'before' AND a.hash != b.hash`: "0",
		"SELECT sum(chunks) FROM memory_states":                                                        one(t, db, "SELECT count(*) FROM memory_chunks"),
		"SELECT max(offset) FROM memory_chunks WHERE region = 0 AND launch_seq = 9":                    int64(47 << 16),
		"SELECT memory_stopped FROM stats WHERE process = 'gpu-box-4242'":                              "chunk store: write pack: no space left on device",
		"SELECT memory_states_lost || ' ' || memory_stopped FROM stats WHERE process = 'gpu-box-4243'": "0 ",
	} {
		if got := one(t, db, q); got != want {
			t.Errorf("%s = %#v, want %#v", q, got, want)
		}
	}
	good := load(t, testrec.Good)
	if got := one(t, good, "SELECT count(*) FROM launches WHERE memory_status IS NULL AND snapshot_selected IS NULL AND region_count IS NULL"); got != int64(28) {
		t.Errorf("without memory capture, %v of 28 launches have NULL memory columns", got)
	}
	if got := one(t, good, "SELECT count(*) FROM processes WHERE memory_mode IS NULL AND memory_staging_bytes IS NULL"); got != int64(2) {
		t.Errorf("without memory capture, %v of 2 processes have NULL memory columns", got)
	}
}

// TestLostStateOfUnknownLaunch: a lost state still gets a row when the
// recording lacks its launch.
func TestLostStateOfUnknownLaunch(t *testing.T) {
	db := loadBatches(t, &pb.Batch{Process: &pb.Process{Pid: 1}},
		&pb.Batch{Memory: []*pb.MemoryState{{LaunchSeq: 9, Point: pb.MemoryState_AFTER, Lost: true, LostReason: "gone"}}})
	if got := one(t, db, "SELECT launch_seq || point || coalesce(region, 'none') || lost || lost_reason FROM memory_states"); got != "9afternone1gone" {
		t.Errorf("lost state row %v", got)
	}
}

func TestWarnings(t *testing.T) {
	for v, want := range map[testrec.Variant]string{
		testrec.Good:       "",
		testrec.Truncated:  "gpu-box-4242: recording truncated",
		testrec.Incomplete: "gpu-box-4242: recording incomplete",
		testrec.Lossy:      "gpu-box-4242: lost or failed while recording, so missing here: launches_dropped 3",
	} {
		db := load(t, v)
		got := strings.Join(db.Warnings, "\n")
		if (want == "") != (got == "") || !strings.HasPrefix(got, want) {
			t.Errorf("%s: warnings %q, want %q...", v, got, want)
		}
	}
}

func TestAbsentRankIsNull(t *testing.T) {
	db := loadBatches(t, &pb.Batch{Process: &pb.Process{Pid: 1}})
	if got := one(t, db, "SELECT rank IS NULL AND world_size IS NULL AND end_ns IS NULL FROM processes"); got != int64(1) {
		t.Errorf("absent rank and end must be NULL")
	}
}

// loadBatches loads a recording of one process that wrote batches.
func loadBatches(t *testing.T, batches ...*pb.Batch) *DB {
	t.Helper()
	db, err := Load(context.Background(), testrec.OpenBatches(t, batches...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestSQLError(t *testing.T) {
	db := load(t, testrec.Good)
	err := db.Query(context.Background(), "SELECT nope FROM launches", &collect{})
	if err == nil || !strings.Contains(err.Error(), "no such column: nope") {
		t.Fatalf("error %v, want SQLite's message", err)
	}
}

// Training steps: launches.step counts the torch.optim step() calls that ended before each
// launch call, graph launches included.
func TestSteps(t *testing.T) {
	const optim = "/venv/lib/python3.12/site-packages/torch/optim/"
	py := func(file, fn string) *pb.Frame {
		return &pb.Frame{Kind: pb.Frame_PYTHON, File: file, Function: fn, Line: 1}
	}
	b := &pb.Batch{
		Process: &pb.Process{Pid: 1},
		Callstacks: []*pb.Callstack{
			{Id: 1, Frames: []*pb.Frame{py("/home/u/train.py", "main")}},
			{Id: 2, Frames: []*pb.Frame{py(optim+"adamw.py", "step"), py("/home/u/train.py", "main")}},
		},
	}
	stacks := []uint64{1, 0, 2, 2, 1, 0, 2, 1}
	for i, cs := range stacks {
		b.Launches = append(b.Launches, &pb.Launch{Seq: uint64(i + 1), CallstackId: cs})
	}
	b.GraphLaunches = []*pb.GraphLaunch{{Seq: 9, CallstackId: 1}}
	db := loadBatches(t, b)
	c := run(t, db, "SELECT step FROM launches ORDER BY seq")
	want := []int64{0, 0, 0, 0, 1, 1, 1, 2}
	for i, r := range c.rows {
		if r[0] != want[i] {
			t.Fatalf("launch %d: step %v, want %v", i+1, r[0], want[i])
		}
	}
	if got := one(t, db, "SELECT step FROM graph_launches"); got != int64(2) {
		t.Errorf("graph launch after two steps: step %v", got)
	}
}

// SQLite's message reaches the user without the driver's category and result code.
func TestSQLErrorPlain(t *testing.T) {
	db := load(t, testrec.Good)
	err := db.Query(context.Background(), "SELEC 1", &collect{})
	if err == nil || err.Error() != `near "SELEC": syntax error` {
		t.Errorf("error %v, want SQLite's message alone", err)
	}
	err = db.Query(context.Background(), "WITH x AS (SELECT 1) DELETE FROM launches", &collect{})
	if !errors.Is(err, ErrNotReading) || strings.Contains(err.Error(), "(23)") {
		t.Errorf("error %v, want a refusal without SQLite's code", err)
	}
}

// A recording with step digests (format 1.12), as SQL sees it: a row per allocation of each
// digest, joined to the allocation and the line that made it; NCCL's allocation in none.
func TestDigestTable(t *testing.T) {
	set := testrec.Open(t, testrec.Digests)
	db, err := Load(context.Background(), set)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := one(t, db, "SELECT count(*) FROM digests"); n != int64(5*3) {
		t.Errorf("%v digest rows, want 15 (5 steps, 3 allocations)", n)
	}
	if n := one(t, db, "SELECT count(*) FROM digests d JOIN allocations a USING (process, allocation_id) WHERE a.owner = 'nccl'"); n != int64(0) {
		t.Errorf("%v digest rows of NCCL's allocation", n)
	}
	if n := one(t, db, "SELECT count(DISTINCT c.python_line) FROM digests d JOIN allocations a USING (process, allocation_id) "+
		"JOIN callstacks c ON c.process = a.process AND c.callstack_id = a.callstack_id"); n != int64(3) {
		t.Errorf("digested allocations made at %v lines, want 3", n)
	}
}

// torn_states lists the state a kernel of another stream, reaching the same allocation, ran
// beside while gpurr took it: none when nothing overlapped.
func TestTornStatesTable(t *testing.T) {
	for _, overlap := range []bool{true, false} {
		db, err := Load(context.Background(), testrec.OpenBatches(t, testrec.TornBatches(overlap)...))
		if err != nil {
			t.Fatal(err)
		}
		want := int64(0)
		if overlap {
			want = 1
			if got := one(t, db, "SELECT launch_seq || ' ' || point || ' ' || other_seq FROM torn_states"); got != "1 after 2" {
				t.Errorf("torn state %v, want launch 1's after state, torn by launch 2", got)
			}
		}
		if n := one(t, db, "SELECT count(*) FROM torn_states"); n != want {
			t.Errorf("overlap %v: %v torn states, want %d", overlap, n, want)
		}
		db.Close()
	}
}
