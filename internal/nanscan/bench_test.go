package nanscan

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/testrec"
)

// BenchmarkNanMillion scans recordings of 1 million launches, reporting
// the time and the peak live heap: the scan streams, so the heap stays far
// below the records' size.
//
//   - snapshots: every launch snapshotted before and after (the chunks are
//     few, so the time is reading the records), no NaN anywhere; beside it,
//     the peak of Process.Load, which gpurr nan used before it streamed.
//   - gpu-counts: hash mode with the GPU's NaN counts (--nan-scan), a NaN
//     planted 10 launches from the end: one pass for the first launch with
//     counts, then a read to that launch for its kernel and callstack.
func BenchmarkNanMillion(b *testing.B) {
	const n = 1_000_000
	for _, c := range []struct {
		name  string
		big   testrec.Big
		types string
		want  func(*Finding, Stats) bool
	}{
		{"snapshots", testrec.Big{Launches: n, Snapshot: true}, "f32",
			func(f *Finding, st Stats) bool { return f == nil && st.Launches == n }},
		{"gpu-counts", testrec.Big{Launches: n, NanAt: n - 10}, "f32,bf16",
			func(f *Finding, st Stats) bool {
				return f != nil && f.Launch.GetSeq() == n-10 && f.Regions[0].Counts[0].NaN == 3 && st.Launches == n-10
			}},
	} {
		b.Run(c.name, func(b *testing.B) {
			p, err := testrec.WriteBig(filepath.Join(b.TempDir(), c.name), c.big)
			if err != nil {
				b.Fatal(err)
			}
			types, err := dtype.ParseList(c.types)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				runtime.GC()
				stop := testrec.PeakLiveHeap()
				t0 := time.Now()
				found, st, err := Scan(p, types, Options{Explicit: false})
				if err != nil || !c.want(found, st) {
					b.Fatalf("scan: %v, found %+v, %+v", err, found, st)
				}
				b.ReportMetric(time.Since(t0).Seconds(), "s/scan")
				b.ReportMetric(stop(), "MB-peak-live")
				b.ReportMetric(float64(p.Size)/(1<<20), "MB-events")
				if !c.big.Snapshot {
					continue
				}
				runtime.GC()
				stop = testrec.PeakLiveHeap()
				d, err := p.Load()
				if err != nil || len(d.Launches) != n {
					b.Fatal(err)
				}
				b.ReportMetric(stop(), "MB-peak-live-Load")
				runtime.KeepAlive(d)
			}
		})
	}
}
