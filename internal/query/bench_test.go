package query

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// BenchmarkQueryMillion loads a generated hash-mode recording of 1 million
// launches, their kernels and memory states into SQLite and runs one
// aggregate over the launches joined to their kernels. It reports the
// seconds to load (wall and CPU), the seconds the statement took, and the
// largest live heap seen while loading (the database is in memory, so
// this grows with the recording; the records read to fill it should not
// add to it).
func BenchmarkQueryMillion(b *testing.B) {
	const n = 1_000_000
	p, err := testrec.WriteBig(filepath.Join(b.TempDir(), "rec"), testrec.Big{Launches: n, Activities: true})
	if err != nil {
		b.Fatal(err)
	}
	set := &recording.Set{Dir: filepath.Dir(p.Dir), Processes: []*recording.Process{p}}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		stop := testrec.PeakLiveHeap()
		t0, c0 := time.Now(), testrec.CPUTime()
		db, err := Load(ctx, set)
		if err != nil {
			b.Fatal(err)
		}
		load, cpu := time.Since(t0).Seconds(), (testrec.CPUTime() - c0).Seconds()
		peak := stop()
		t0 = time.Now()
		var c collect
		if err := db.Query(ctx, `SELECT l.python_line, count(*), sum(a.duration_ns)
			FROM launches l JOIN gpu_activity a ON a.process = l.process AND a.launch_seq = l.seq GROUP BY 1`, &c); err != nil {
			b.Fatal(err)
		}
		stmt := time.Since(t0).Seconds()
		db.Close()
		if len(c.rows) == 0 {
			b.Fatal("no rows")
		}
		b.ReportMetric(load, "s/load")
		b.ReportMetric(cpu, "cpu-s/load")
		b.ReportMetric(stmt, "s/statement")
		b.ReportMetric(peak, "MB-peak-live-heap")
	}
}
