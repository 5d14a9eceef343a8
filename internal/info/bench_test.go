package info

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// BenchmarkInfoMillion summarizes generated recordings of 100,000 and 1 million launches and
// their kernels (testrec.WriteBig, as trace's and diff's benchmarks read), and of 1 million
// launches without GPU timing (whose calls wait for kernels that never come, in the join's
// bounded window), reporting seconds per summary and the largest live heap seen meanwhile:
// info must not hold memory that grows with the recording. Run it with -bench InfoMillion
// -benchtime 1x.
func BenchmarkInfoMillion(b *testing.B) {
	for _, c := range []struct {
		n     int
		timed bool
	}{{100_000, true}, {1_000_000, true}, {1_000_000, false}} {
		name := fmt.Sprint(c.n)
		if !c.timed {
			name += "-untimed"
		}
		b.Run(name, func(b *testing.B) {
			n := c.n
			dir := filepath.Join(b.TempDir(), "rec")
			if _, err := testrec.WriteBig(dir, testrec.Big{Launches: n, Activities: c.timed}); err != nil {
				b.Fatal(err)
			}
			set, err := recording.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var peak float64
			for range b.N {
				stop := testrec.PeakLiveHeap()
				r, err := Summarize(set, dir)
				peak = max(peak, stop())
				if err != nil {
					b.Fatal(err)
				}
				runs := 0
				if c.timed {
					runs = n
				}
				if p := r.Processes[0]; p.Launches != n || p.KernelRuns != runs || p.UnlinkedRuns != 0 {
					b.Fatalf("%d launches, %d runs, %d unlinked", p.Launches, p.KernelRuns, p.UnlinkedRuns)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/info")
			b.ReportMetric(peak, "MB-peak-live-heap")
		})
	}
}
