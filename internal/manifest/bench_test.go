package manifest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// BenchmarkManifestMillion writes the manifest of a recording of 1 million
// launches, then verifies a second recording (differing at one launch)
// against it, reporting the time and peak heap of each.
func BenchmarkManifestMillion(b *testing.B) {
	const n = 1_000_000
	tmp := b.TempDir()
	good, err := testrec.WriteBig(filepath.Join(tmp, "good"), testrec.Big{Launches: n})
	if err != nil {
		b.Fatal(err)
	}
	other, err := testrec.WriteBig(filepath.Join(tmp, "other"), testrec.Big{Launches: n, DifferAt: 777_777})
	if err != nil {
		b.Fatal(err)
	}
	set, err := recording.Open(good.Dir)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(tmp, "m.json")
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		stop := testrec.PeakLiveHeap()
		t0 := time.Now()
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		sum, err := Write(f, set)
		if err != nil || f.Close() != nil || sum.Launches != n {
			b.Fatalf("write: %v, %+v", err, sum)
		}
		b.ReportMetric(time.Since(t0).Seconds(), "s/manifest")
		b.ReportMetric(stop(), "MB-peak-live/manifest")

		runtime.GC()
		stop = testrec.PeakLiveHeap()
		t0 = time.Now()
		m, err := Open(path, ReadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		run, err := diff.Scan(other)
		if err != nil {
			b.Fatal(err)
		}
		var first uint64
		res, err := m.Verify(run, m.Processes[0], Options{Window: 32}, func(mm *Mismatch) error {
			first = mm.Actual.Launch.GetSeq()
			return nil
		})
		m.Close()
		if err != nil || first != 777_777 || res.Matched != n {
			b.Fatalf("verify: %v, first %d, %+v", err, first, res)
		}
		b.ReportMetric(time.Since(t0).Seconds(), "s/verify")
		b.ReportMetric(stop(), "MB-peak-live/verify")
		if st, err := os.Stat(path); err == nil {
			b.ReportMetric(float64(st.Size())/(1<<20), "MB-manifest")
		}
	}
}
