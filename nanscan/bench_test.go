package nanscan

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/gpurr/gpurr/dtype"
	"github.com/gpurr/gpurr/internal/testrec"
)

// BenchmarkNanMillion scans a snapshot recording of 1 million launches
// (every launch snapshotted before and after; the chunks are few, so the
// time is reading the records) that holds no NaN, reporting the time and
// the peak live heap: the scan streams, so the heap stays far below the
// records' size (reported beside it: the peak of Process.Load).
func BenchmarkNanMillion(b *testing.B) {
	const n = 1_000_000
	p, err := testrec.WriteBig(filepath.Join(b.TempDir(), "snap"), testrec.Big{Launches: n, Snapshot: true})
	if err != nil {
		b.Fatal(err)
	}
	f32, err := dtype.Parse("f32")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		stop := testrec.PeakLiveHeap()
		t0 := time.Now()
		found, st, err := Scan(p, []*dtype.Type{f32})
		if err != nil || found != nil || st.Launches != n {
			b.Fatalf("scan: %v, found %v, %+v", err, found, st)
		}
		b.ReportMetric(time.Since(t0).Seconds(), "s/scan")
		b.ReportMetric(stop(), "MB-peak-live")
		b.ReportMetric(float64(p.Size)/(1<<20), "MB-events")

		// For scale: what reading the whole recording into memory holds
		// (gpurr nan did that before it streamed).
		runtime.GC()
		stop = testrec.PeakLiveHeap()
		d, err := p.Load()
		if err != nil || len(d.Launches) != n {
			b.Fatal(err)
		}
		b.ReportMetric(stop(), "MB-peak-live-Load")
		runtime.KeepAlive(d)
	}
}
