package query

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// countRows counts a query's rows.
type countRows struct{ n int }

func (c *countRows) Columns([]string) error { return nil }
func (c *countRows) Row([]any) error        { c.n++; return nil }

// FuzzLoad feeds arbitrary bytes to the loader as a process's events file: the tables load
// from whatever records the bytes hold, or the error is one line naming the file; every table
// can then be read, memory_chunks too.
func FuzzLoad(f *testing.F) {
	for _, v := range []testrec.Variant{testrec.Good, testrec.Memory, testrec.Autograd, testrec.Truncated} {
		dir := f.TempDir()
		if err := testrec.Write(dir, v); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, testrec.Name(0), recording.EventsFile))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	dir := f.TempDir()
	path := filepath.Join(dir, recording.EventsFile)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		set, err := recording.Open(dir)
		if err != nil {
			return // the reader's own fuzz target holds its errors to one line
		}
		db, err := Load(context.Background(), set)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") {
				t.Fatalf("error is not one line: %q", msg)
			}
			return
		}
		defer db.Close()
		for _, table := range []string{"launches", "kernels", "callstacks", "gpu_activity", "memory_states", "memory_chunks", "stats"} {
			if err := db.Query(context.Background(), "SELECT * FROM "+table, &countRows{}); err != nil {
				t.Fatalf("SELECT * FROM %s: %v", table, err)
			}
		}
	})
}
