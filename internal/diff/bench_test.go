package diff

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// writeBig writes a generated hash-mode recording of n launches; the
// launch at differAt (1-based) gets a different region hash.
func writeBig(b *testing.B, dir string, n, differAt int) *recording.Process {
	p, err := testrec.WriteBig(dir, testrec.Big{Launches: n, DifferAt: differAt})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkDiffMillion: Scan both recordings and Align them, 1 million
// launches each (the target: under 10 s on a 2-core machine).
func BenchmarkDiffMillion(b *testing.B) {
	const n = 1_000_000
	tmp := b.TempDir()
	pa := writeBig(b, filepath.Join(tmp, "a"), n, 0)
	pb_ := writeBig(b, filepath.Join(tmp, "b"), n, 777_777)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		ra, err := Scan(pa)
		if err != nil {
			b.Fatal(err)
		}
		rb, err := Scan(pb_)
		if err != nil {
			b.Fatal(err)
		}
		res := Align(ra, rb)
		if res.First == nil || ra.Launches[res.First.A].Seq != 777_777 || res.Matched != n {
			b.Fatalf("first %v matched %d", res.First, res.Matched)
		}
		b.ReportMetric(time.Since(t0).Seconds(), "s/diff")
	}
}
