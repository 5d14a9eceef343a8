package export

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// BenchmarkExportMillion exports a generated hash-mode recording of 1
// million launches with their kernels and memory states. It reports
// seconds per export (wall and CPU: the CPU time varies less on a shared
// machine) and the largest live heap seen while exporting, which must not
// grow with the recording.
func BenchmarkExportMillion(b *testing.B) {
	const n = 1_000_000
	tmp := b.TempDir()
	p, err := testrec.WriteBig(filepath.Join(tmp, "rec"), testrec.Big{Launches: n, Activities: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		runtime.GC()
		stop := testrec.PeakLiveHeap()
		t0, c0 := time.Now(), testrec.CPUTime()
		st, err := Parquet(filepath.Join(tmp, "pq", string(rune('a'+i))), []*recording.Process{p})
		if err != nil {
			b.Fatal(err)
		}
		secs, cpu := time.Since(t0).Seconds(), (testrec.CPUTime() - c0).Seconds()
		peak := stop()
		if st.Rows["launches"] != n || st.Rows["gpu_activity"] != n || st.Rows["memory_states"] != 2*n {
			b.Fatalf("rows %v", st.Rows)
		}
		b.ReportMetric(secs, "s/export")
		b.ReportMetric(cpu, "cpu-s/export")
		b.ReportMetric(peak, "MB-peak-live-heap")
	}
}
