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

// Every table is described whole: a name unique in its set, what a row
// is, columns with unique names, a type and a meaning, the process column
// first, and keys that name its columns.
func TestDescriptions(t *testing.T) {
	for set, tables := range map[string][]*Table{"Query": Query, "Export": Export} {
		names := map[string]bool{}
		for _, tb := range tables {
			if names[tb.Name] || tb.Name == "" || tb.Doc == "" {
				t.Errorf("%s: table %q: a second one of the name, or no name or description", set, tb.Name)
			}
			names[tb.Name] = true
			columns := map[string]bool{}
			for _, c := range tb.Columns {
				if columns[c.Name] || c.Doc == "" || c.Type.String() == "invalid" {
					t.Errorf("%s.%s.%s: a second column of the name, or no description or type", set, tb.Name, c.Name)
				}
				columns[c.Name] = true
			}
			for _, k := range tb.Key {
				if !columns[k] {
					t.Errorf("%s.%s: key %s is no column", set, tb.Name, k)
				}
			}
			first := []string{"process"}
			if set == "Export" {
				first = append(first, "pid")
			}
			for i, name := range first {
				if tb.Columns[i].Name != name {
					t.Errorf("%s.%s: column %d is %s, want %s", set, tb.Name, i, tb.Columns[i].Name, name)
				}
			}
		}
	}
	if !slices.Contains(Query, MemoryChunks) {
		t.Error("MemoryChunks is not a Query table")
	}
}

// flatten fills every table of both sets from a process and returns the
// rows, each as its values written with %v, NULL as "NULL".
func flatten(t *testing.T, p *recording.Process) map[*Table][]string {
	t.Helper()
	rows := map[*Table][]string{}
	_, err := Flatten(p, Options{Tables: all, Row: func(tb *Table, values []Value) error {
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

// A column holds NULL only where its description says it may: the SQLite
// tables would not mind, but the Parquet columns are optional only there.
func TestNullsAsDescribed(t *testing.T) {
	for _, v := range []testrec.Variant{testrec.Good, testrec.Lossy, testrec.Incomplete, testrec.Truncated, testrec.Memory, testrec.Autograd, testrec.Probe} {
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
		{exportActivity.Table, "launch_seq", []string{"1", "2"}},
		{memoryStates.Table, "address", []string{"4096", "4096"}},
		{exportRegions.Table, "address", []string{"4096", "4096"}},
		{exportRegions.Table, "point", []string{"after", "before"}},
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
