package tables

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Every table is described whole: a unique name, what a row is, columns
// with unique names, a type and a meaning, the process column first, and
// keys that name its columns.
func TestDescriptions(t *testing.T) {
	names := map[string]bool{}
	for _, tb := range Query {
		if names[tb.Name] || tb.Name == "" || tb.Doc == "" {
			t.Errorf("table %q: a second one of the name, or no name or description", tb.Name)
		}
		names[tb.Name] = true
		columns := map[string]bool{}
		for _, c := range tb.Columns {
			if columns[c.Name] || c.Doc == "" || c.Type < Int64 || c.Type > Binary {
				t.Errorf("%s.%s: a second column of the name, or no description or type", tb.Name, c.Name)
			}
			columns[c.Name] = true
		}
		for _, k := range tb.Key {
			if !columns[k] {
				t.Errorf("%s: key %s is no column", tb.Name, k)
			}
		}
		if tb.Columns[0].Name != "process" {
			t.Errorf("%s: column 0 is %s, want process", tb.Name, tb.Columns[0].Name)
		}
	}
	if !slices.Contains(Query, MemoryChunks) {
		t.Error("MemoryChunks is not a Query table")
	}
}

// flatten fills every table from a process and returns the
// rows, each as its values written with %v, NULL as "NULL".
func flatten(t *testing.T, p *recording.Process) map[*Table][]string {
	t.Helper()
	rows := map[*Table][]string{}
	_, err := Flatten(p, Options{Tables: Query, Row: func(tb *Table, values []Value) error {
		if len(values) != len(tb.Columns) {
			t.Fatalf("%s: %d values for %d columns", tb.Name, len(values), len(tb.Columns))
		}
		cells := make([]string, len(values))
		for i, v := range values {
			if v.IsNull() && !tb.Columns[i].Null {
				t.Errorf("%s: %s.%s is NULL, but its description says it never is", p.Name, tb.Name, tb.Columns[i].Name)
			}
			cells[i] = fmt.Sprint(v.Any())
			if v.IsNull() {
				cells[i] = "NULL"
			}
		}
		rows[tb] = append(rows[tb], strings.Join(cells, " "))
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// A column holds NULL only where its description says it may: SQLite
// declares the others NOT NULL, and Parquet requires them.
func TestNullsAsDescribed(t *testing.T) {
	for _, v := range []testrec.Variant{testrec.Good, testrec.Lossy, testrec.Incomplete, testrec.Truncated, testrec.Memory, testrec.Autograd, testrec.Probe, testrec.WriteSets} {
		for _, p := range testrec.Open(t, v).Processes {
			flatten(t, p)
		}
	}
}

// write records one process that wrote batches.
func write(t *testing.T, batches ...*pb.Batch) *recording.Process {
	t.Helper()
	return testrec.OpenBatches(t, batches...).Processes[0]
}

// column is the value of one column in each row of a table.
func column(rows map[*Table][]string, tb *Table, name string) []string {
	i := slices.IndexFunc(tb.Columns, func(c Column) bool { return c.Name == name })
	var out []string
	for _, r := range rows[tb] {
		out = append(out, strings.Split(r, " ")[i])
	}
	return out
}

// Records that come apart are joined as a whole recording would join
// them: a kernel read before its launch call, a graph kernel before its
// replay, and a snapshot's AFTER state before its BEFORE state.
func TestStreamingJoins(t *testing.T) {
	regions := []*pb.Region{{Address: 0x1000, Size: 64, AllocationId: 1}}
	p := write(t,
		&pb.Batch{Process: &pb.Process{Pid: 1, Memory: &pb.MemoryConfig{Mode: "snapshot"}}},
		&pb.Batch{
			Kernels:    []*pb.Kernel{{Id: 1, Name: "_Z1kv"}},
			Activities: []*pb.KernelActivity{{CorrelationId: 10, Name: "_Z1kv", StartNs: 5, EndNs: 9}, {CorrelationId: 20, GraphId: 3, GraphNodeId: 30, Name: "_Z1kv"}},
		},
		&pb.Batch{
			Launches: []*pb.Launch{
				{Seq: 1, KernelId: 1, CorrelationId: 10, Regions: regions, Memory: &pb.MemoryPlan{Status: pb.MemoryPlan_SNAPSHOT}},
				{Seq: 2, KernelId: 1, CorrelationId: 11, Captured: true, GraphNodeId: 30},
			},
			GraphNodes:    []*pb.GraphNode{{NodeId: 30, GraphId: 3, LaunchSeq: 2}},
			GraphLaunches: []*pb.GraphLaunch{{Seq: 3, CorrelationId: 20}},
			Memory:        []*pb.MemoryState{{LaunchSeq: 1, Point: pb.MemoryState_AFTER, Regions: []*pb.RegionState{{Hash: make([]byte, 16)}}}},
		},
		&pb.Batch{Memory: []*pb.MemoryState{{LaunchSeq: 1, Point: pb.MemoryState_BEFORE, Regions: []*pb.RegionState{{Hash: make([]byte, 16)}}}}},
	)
	rows := flatten(t, p)
	for _, c := range []struct {
		tb   *Table
		col  string
		want []string
	}{
		{gpuActivity.Table, "launch_seq", []string{"1", "2"}}, // in the order their calls came
		{gpuActivity.Table, "graph_launch_seq", []string{"NULL", "3"}},
		{memoryStates.Table, "address", []string{"4096", "4096"}},
		{memoryStates.Table, "point", []string{"after", "before"}},
	} {
		if got := column(rows, c.tb, c.col); !slices.Equal(got, c.want) {
			t.Errorf("%s.%s = %v, want %v", c.tb.Name, c.col, got, c.want)
		}
	}
}

// Frames reads no further than asked: a second pass over a recording that
// is still being written sees what the first saw.
func TestFrames(t *testing.T) {
	p := write(t, &pb.Batch{Process: &pb.Process{Pid: 1}}, &pb.Batch{Log: []*pb.LogEntry{{Message: "a"}}}, &pb.Batch{Log: []*pb.LogEntry{{Message: "b"}}})
	var got []string
	res, err := Flatten(p, Options{Tables: []*Table{logs.Table}, Frames: 2, Row: func(_ *Table, v []Value) error {
		got = append(got, v[3].Str())
		return nil
	}})
	if err != nil || res.Frames != 2 || !slices.Equal(got, []string{"a"}) {
		t.Errorf("%+v, %v: rows %v", res, err, got)
	}
}

// A probe result whose launch the recording lost: its CTAs' rows have no coordinates, its
// launch row no kernel; a probe kernel of a kernel never described has no name.
func TestProbeWithoutLaunch(t *testing.T) {
	set := testrec.OpenBatches(t, &pb.Batch{Process: &pb.Process{Pid: 1, Probe: "k:entry,exit"}},
		&pb.Batch{ProbeKernels: []*pb.ProbeKernel{{KernelId: 9, Instrumented: true}},
			Probes: []*pb.ProbeResult{{LaunchSeq: 5, Ctas: testrec.ProbeBuffer(2, recording.ProbeCTA{Index: 1, Start: 10, End: 40, SM: 3})}}})
	rows := flatten(t, set.Processes[0])
	for tb, want := range map[*Table][]string{
		probeKernels.Table:  {"solo 9 NULL 1 NULL NULL 0"},
		probeLaunches.Table: {"solo 5 NULL 2 1 NULL"},
		probeCTAs.Table:     {"solo 5 1 NULL NULL NULL 10 40 30 3 0"},
	} {
		if !slices.Equal(rows[tb], want) {
			t.Errorf("%s: %q, want %q", tb.Name, rows[tb], want)
		}
	}
}

// A recording with write sets (format 1.11): each region state says whether it was carried and
// from which launch; the one carried from a lost state has no hash, as a lost state has none;
// the audit's miss is a row of its own, with its kernel's name.
func TestWriteSets(t *testing.T) {
	p := testrec.Open(t, testrec.WriteSets).Processes[0]
	flatten(t, p) // NULLs as described
	rows := map[*Table][]map[string]string{}
	_, err := Flatten(p, Options{Tables: Query, Row: func(tb *Table, values []Value) error {
		row := map[string]string{}
		for i, v := range values {
			row[tb.Columns[i].Name] = fmt.Sprint(v.Any())
			if v.IsNull() {
				row[tb.Columns[i].Name] = "NULL"
			}
		}
		rows[tb] = append(rows[tb], row)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, r := range rows[memoryStates.Table] {
		hash := "hash"
		if r["hash"] == "NULL" {
			hash = "NULL"
		}
		states = append(states, fmt.Sprintf("%s:%s %s %s %q %s %s", r["launch_seq"], r["region"], r["lost"], hash, r["carried"], r["carried_from"], r["unknown"]))
	}
	want := []string{
		`1:0 0 hash "" NULL 0`,
		`2:0 0 hash "proved" 1 0`, `2:1 0 hash "" NULL 0`,
		`3:0 0 hash "proved" 1 0`, `3:1 0 hash "" NULL 0`,
		`4:0 0 hash "" NULL 0`, `4:1 0 hash "" NULL 0`,
		`5:0 0 hash "learned" 4 0`, `5:1 0 hash "" NULL 0`,
		`6:0 0 hash "learned" 4 0`, `6:1 0 hash "" NULL 0`,
		`7:0 0 hash "" NULL 0`, `7:1 0 hash "" NULL 0`,
		`8:0 1 NULL "NULL" NULL 0`,
		`9:0 0 NULL "proved" NULL 1`, `9:1 0 hash "" NULL 0`,
	}
	if !slices.Equal(states, want) {
		t.Errorf("memory_states:\n%s\nwant\n%s", strings.Join(states, "\n"), strings.Join(want, "\n"))
	}
	ms := rows[memoryStates.Table]
	if ms[14]["chunks"] != "NULL" || ms[15]["chunks"] != "1" || ms[1]["chunks"] != "NULL" || ms[0]["chunks"] != "2" || ms[1]["hash"] != ms[0]["hash"] {
		t.Errorf("memory_states: the unknown or carried state's chunks are not NULL, or a carried state's hash not its source's")
	}
	if m := rows[writeSetMisses.Table]; len(m) != 1 || fmt.Sprint(m[0]) != "map[allocation_id:3 audit_seq:7 kernel_id:3 name:step(float const*, float*) param_offsets:0 process:gpu-box-4242 since_seq:4]" {
		t.Errorf("write_set_misses %v", m)
	}
	for col, want := range map[string]string{"regions_carried_proved": "3", "regions_carried_learned": "2", "regions_carried_unknown": "1",
		"bytes_carried": fmt.Sprint(3*128<<10 + 2*64<<10), "write_set_audits": "1", "write_set_misses": "1"} {
		if got := rows[stats.Table][0][col]; got != want {
			t.Errorf("stats.%s = %s, want %s", col, got, want)
		}
	}
	if r := rows[processes.Table][0]; r["memory_write_sets"] != "learned" || r["memory_audit_every"] != "3" {
		t.Errorf("processes: write sets %s, audit every %s", r["memory_write_sets"], r["memory_audit_every"])
	}
}

// Step digests (format 1.12): a row per allocation of each digest, with its counts when the
// digest counted NaN; a lost digest, and one that counted nothing, have NULLs there.
func TestDigests(t *testing.T) {
	set := testrec.OpenBatches(t, &pb.Batch{Process: &pb.Process{Pid: 1, Memory: &pb.MemoryConfig{Mode: "digest", Digests: true}}},
		&pb.Batch{Digests: []*pb.MemoryState{
			{LaunchSeq: 7, Point: pb.MemoryState_DIGEST, Step: 0, DigestOf: "all", Regions: []*pb.RegionState{{Hash: make([]byte, 16)}},
				DigestRegions: []*pb.Region{{Address: 4096, Size: 64, AllocationId: 3}}},
			{LaunchSeq: 9, Point: pb.MemoryState_DIGEST, Step: 1, DigestOf: "optimizer", Regions: []*pb.RegionState{{Hash: make([]byte, 16), NanCount: []uint64{2}, InfCount: []uint64{0}}},
				DigestRegions: []*pb.Region{{Address: 4096, Size: 64, AllocationId: 3}}},
			{LaunchSeq: 11, Point: pb.MemoryState_DIGEST, Step: 2, Lost: true},
		}})
	rows := flatten(t, set.Processes[0])
	want := []string{"solo 0 7 all 3 4096 64 00000000000000000000000000000000 NULL NULL 0",
		"solo 1 9 optimizer 3 4096 64 00000000000000000000000000000000 2 0 0",
		"solo 2 11  NULL NULL NULL NULL NULL NULL 1"}
	if !slices.Equal(rows[digests.Table], want) {
		t.Errorf("digests: %q, want %q", rows[digests.Table], want)
	}
}

// Copy states (format 1.17) are a row per allocation each copy wrote, a lost one's without a
// hash; allocations say whether gpurr cleared them and where they lie among the launches.
func TestCopyStates(t *testing.T) {
	set := testrec.OpenBatches(t, &pb.Batch{Process: &pb.Process{Pid: 1, Memory: &pb.MemoryConfig{Mode: "hash"}},
		Allocations: []*pb.Allocation{{Id: 3, Kind: pb.Allocation_MEM_ALLOC_ASYNC, Address: 4096, Size: 64, Cleared: true, LaunchSeq: 2},
			{Id: 4, Kind: pb.Allocation_MEM_ALLOC, Address: 8192, Size: 64}}},
		&pb.Batch{CopyStates: []*pb.MemoryState{
			{LaunchSeq: 5, Point: pb.MemoryState_COPY, CorrelationId: 41, Regions: []*pb.RegionState{{Hash: make([]byte, 16), NanCount: []uint64{1}, InfCount: []uint64{0}}},
				CopyRegions: []*pb.Region{{Address: 4096, Size: 64, AllocationId: 3}}},
			{LaunchSeq: 5, Point: pb.MemoryState_COPY, CorrelationId: 42, Lost: true, LostReason: "memory capture had stopped",
				CopyRegions: []*pb.Region{{Address: 8192, Size: 64, AllocationId: 4}}},
		}})
	rows := flatten(t, set.Processes[0])
	want := []string{"solo 5 41 3 4096 64 00000000000000000000000000000000 0 1 0 0 NULL",
		"solo 5 42 4 8192 64 NULL 0 NULL NULL 1 memory capture had stopped"}
	if !slices.Equal(rows[copyStatesTable.Table], want) {
		t.Errorf("copy_states: %q, want %q", rows[copyStatesTable.Table], want)
	}
	var cleared []string
	for _, r := range rows[allocations.Table] {
		f := strings.Fields(r)
		cleared = append(cleared, strings.Join(f[len(f)-2:], " "))
	}
	if want := []string{"1 2", "0 NULL"}; !slices.Equal(cleared, want) {
		t.Errorf("allocations' cleared and launch_seq: %q, want %q (rows %q)", cleared, want, rows[allocations.Table])
	}
}
