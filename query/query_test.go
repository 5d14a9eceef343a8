package query

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
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
	db := load(t, testrec.Good)
	for _, table := range Schema() {
		c := run(t, db, "SELECT name, type FROM pragma_table_info('"+table.Name+"')")
		if len(c.rows) != len(table.Columns) {
			t.Fatalf("%s has %d columns, schema says %d", table.Name, len(c.rows), len(table.Columns))
		}
		for i, col := range table.Columns {
			if c.rows[i][0] != col.Name || c.rows[i][1] != col.Type {
				t.Errorf("%s column %d is %v %v, schema says %s %s", table.Name, i, c.rows[i][0], c.rows[i][1], col.Name, col.Type)
			}
			if col.Doc == "" {
				t.Errorf("%s.%s has no description", table.Name, col.Name)
			}
		}
		if n := one(t, db, "SELECT count(*) FROM "+table.Name); n == int64(0) {
			t.Errorf("table %s is empty for the synthetic recording", table.Name)
		}
		if n := one(t, db, "SELECT count(DISTINCT process) FROM "+table.Name); n != int64(testrec.Ranks) {
			t.Errorf("table %s holds %v processes, want %d", table.Name, n, testrec.Ranks)
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

func TestWarnings(t *testing.T) {
	for v, want := range map[testrec.Variant]string{
		testrec.Good:       "",
		testrec.Truncated:  "gpu-box-4242: recording truncated",
		testrec.Incomplete: "gpu-box-4242: recording incomplete",
	} {
		db := load(t, v)
		got := strings.Join(db.Warnings, "\n")
		if (want == "") != (got == "") || !strings.HasPrefix(got, want) {
			t.Errorf("%s: warnings %q, want %q...", v, got, want)
		}
	}
}

func TestAbsentRankIsNull(t *testing.T) {
	dir := t.TempDir()
	w, err := recording.Create(dir, "solo", &pb.Batch{Process: &pb.Process{Pid: 1}})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	set, err := recording.Open(filepath.Join(dir, "solo"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := Load(context.Background(), set)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := one(t, db, "SELECT rank IS NULL AND world_size IS NULL AND end_ns IS NULL FROM processes"); got != int64(1) {
		t.Errorf("absent rank and end must be NULL")
	}
}

func TestSQLError(t *testing.T) {
	db := load(t, testrec.Good)
	err := db.Query(context.Background(), "SELECT nope FROM launches", &collect{})
	if err == nil || !strings.Contains(err.Error(), "no such column: nope") {
		t.Fatalf("error %v, want SQLite's message", err)
	}
}
