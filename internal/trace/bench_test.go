package trace

import (
	"io"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// countingWriter counts what a trace writes, without keeping it: the
// benchmark measures the writer, not the disk.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(b []byte) (int, error) {
	c.n += int64(len(b))
	return len(b), nil
}

// peakHeap samples the live heap every 10 ms until stop is closed.
func peakHeap(stop <-chan struct{}, peak *uint64, done chan<- struct{}) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		metrics.Read(s)
		*peak = max(*peak, s[0].Value.Uint64())
		select {
		case <-stop:
			close(done)
			return
		case <-tick.C:
		}
	}
}

// BenchmarkTraceMillion writes the timeline of a generated recording of
// 1 million launches and their kernels (the target: under 10 s on
// a 2-core machine, in memory that does not grow with the recording), in
// both formats. It reports seconds per trace, the output's size and the
// largest live heap seen while writing.
func BenchmarkTraceMillion(b *testing.B) {
	const n = 1_000_000
	p, err := testrec.WriteBig(filepath.Join(b.TempDir(), "rec"), testrec.Big{Launches: n, Activities: true})
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range []Format{Chrome, Perfetto} {
		b.Run(f.String(), func(b *testing.B) {
			for range b.N {
				runtime.GC()
				var peak uint64
				stop, done := make(chan struct{}), make(chan struct{})
				go peakHeap(stop, &peak, done)
				t0 := time.Now()
				var w countingWriter
				st, err := Write(io.Writer(&w), f, []*recording.Process{p}, Options{})
				if err != nil {
					b.Fatal(err)
				}
				secs := time.Since(t0).Seconds()
				close(stop)
				<-done
				if st.Kernels != n || st.Flows != n {
					b.Fatalf("stats %+v", st)
				}
				b.ReportMetric(secs, "s/trace")
				b.ReportMetric(float64(w.n)/1e6, "MB-out")
				b.ReportMetric(float64(peak)/1e6, "MB-peak-heap")
			}
		})
	}
}
