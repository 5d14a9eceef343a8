package query

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/gpurr/gpurr/internal/tables"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// A statement sees the same rows whether Load filled only the tables it names, filled every
// table, or filled others and left its tables to the statement (fillTables): for every table,
// and a join of four, of recordings damaged, cut short, with memory capture, write sets and
// probes, and of a generated recording of several frames. The warnings are the same too.
func TestLoadNamedTables(t *testing.T) {
	ctx := context.Background()
	sets := map[string]*recording.Set{}
	for _, v := range []testrec.Variant{testrec.Good, testrec.Corrupt, testrec.Empty, testrec.Truncated, testrec.Memory,
		testrec.WriteSets, testrec.Probe, testrec.StepRange} {
		sets[string(v)] = testrec.Open(t, v)
	}
	big := filepath.Join(t.TempDir(), "big")
	if _, err := testrec.WriteBig(big, testrec.Big{Launches: 5000, Activities: true, NanAt: 4500}); err != nil {
		t.Fatal(err)
	}
	set, err := recording.Open(big)
	if err != nil {
		t.Fatal(err)
	}
	sets["big"] = set
	var statements []string
	for _, table := range tables.Query {
		statements = append(statements, "SELECT * FROM "+table.Name)
	}
	statements = append(statements, `SELECT * FROM launches l JOIN gpu_activity a ON a.process = l.process AND a.launch_seq = l.seq
		JOIN memory_states m ON m.process = l.process AND m.launch_seq = l.seq LEFT JOIN nan_counts n USING (process, launch_seq, region)`)
	for name, set := range sets {
		whole, err := Load(ctx, set)
		if err != nil {
			t.Fatal(err)
		}
		defer whole.Close()
		other, err := Load(ctx, set, "SELECT 1")
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if !slices.Equal(whole.Warnings, other.Warnings) {
			t.Errorf("%s: warnings %q, loading no table %q", name, whole.Warnings, other.Warnings)
		}
		for _, q := range statements {
			only, err := Load(ctx, set, q)
			if err != nil {
				t.Fatal(err)
			}
			want := run(t, whole, q)
			for how, db := range map[string]*DB{"loading the tables it names": only, "after a statement that names none": other} {
				if got := run(t, db, q); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: %s, %s: %d rows, want %d", name, q, how, len(got.rows), len(want.rows))
				}
			}
			only.Close()
		}
	}
}

// named is the tables a statement names: as words, in any case, quoted or not, in comments
// too; every table for SQLite's page tables and EXPLAIN, or when no statement is given; never
// memory_chunks, which fillChunks fills.
func TestNamed(t *testing.T) {
	names := func(statements ...string) []string {
		var out []string
		for _, table := range named(statements) {
			out = append(out, table.Name)
		}
		return out
	}
	all := names()
	if len(all) != len(tables.Query)-1 || slices.Contains(all, tables.MemoryChunks.Name) {
		t.Errorf("no statement: %v", all)
	}
	for q, want := range map[string][]string{
		"SELECT count(*) FROM launches":                           {"launches"},
		`SELECT * FROM "LAUNCHES" JOIN [frames] USING (process)`:  {"frames", "launches"},
		"SELECT * FROM probe_launches":                            {"probe_launches"},
		"SELECT 1 -- not stats\n":                                 {"stats"},
		"SELECT count(*) FROM memory_chunks":                      nil,
		"SELECT * FROM main.kernels, processes":                   {"processes", "kernels"},
		"SELECT 1":                                                nil,
		"SELECT count(*) FROM dbstat":                             all,
		"/* plan */ explain SELECT * FROM launches WHERE seq = 1": all,
		"EXPLAIN QUERY PLAN SELECT * FROM launches WHERE seq = 1": all,
	} {
		got := names(q)
		slices.Sort(got)
		want = slices.Clone(want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%q names %v, want %v", q, got, want)
		}
	}
}
