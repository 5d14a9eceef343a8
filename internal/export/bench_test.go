package export

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// BenchmarkExportMillion exports a generated hash-mode recording of 1
// million launches with their kernels and region hashes.
func BenchmarkExportMillion(b *testing.B) {
	const n = 1_000_000
	tmp := b.TempDir()
	p, err := testrec.WriteBig(filepath.Join(tmp, "rec"), testrec.Big{Launches: n, Activities: true})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		st, err := Parquet(filepath.Join(tmp, "pq", string(rune('a'+i))), []*recording.Process{p})
		if err != nil {
			b.Fatal(err)
		}
		if st.Rows["launches"] != n || st.Rows["gpu_activity"] != n || st.Rows["region_hashes"] != 2*n {
			b.Fatalf("rows %v", st.Rows)
		}
		b.ReportMetric(time.Since(t0).Seconds(), "s/export")
	}
}
