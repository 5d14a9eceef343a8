package demo

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/recording"
)

func TestLaunchCount(t *testing.T) {
	if Launches != 20 {
		t.Errorf("Launches = %d; the doc and bundled recording expect 20", Launches)
	}
}

// TestCompute pins the host computation: a change to the workload changes
// these sums, and then the bundled recording must be regenerated.
func TestCompute(t *testing.T) {
	want := []uint64{wantSum0, wantSum1}
	for s := range Streams {
		e := Compute(s)
		for i, v := range e.Y {
			if v < 0 || v >= 1<<24 || v != float32(int32(v)) {
				t.Fatalf("stream %d: y[%d] = %v is not an exact small integer", s, i, v)
			}
		}
		if e.Sum != want[s] {
			t.Errorf("stream %d: sum = %d, want %d", s, e.Sum, want[s])
		}
	}
}

const (
	wantSum0 = 502693888
	wantSum1 = 502464512
)

func TestBundled(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	if !HasBundled() {
		if err := ExtractBundled(dir); !errors.Is(err, ErrNoBundled) {
			t.Fatalf("ExtractBundled without a recording = %v", err)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Error("ExtractBundled created a directory for nothing")
		}
		t.Skip("no bundled recording in this build (internal/demo/bundled/README.md says how to make it)")
	}
	if err := ExtractBundled(dir); err != nil {
		t.Fatal(err)
	}
	set, err := recording.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range set.Processes {
		d, err := p.Load()
		if err != nil {
			t.Fatal(err)
		}
		n += len(d.Launches)
	}
	if n != Launches {
		t.Errorf("bundled recording has %d launches, the workload makes %d", n, Launches)
	}
	if err := ExtractBundled(dir); err == nil {
		t.Error("extracting over an existing recording succeeded")
	}
}

func TestRunWorkload(t *testing.T) {
	if _, err := cuda.Probe(); err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	var out bytes.Buffer
	n, err := RunWorkload(&out)
	t.Log(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatal(err)
	}
	if n != Launches {
		t.Errorf("RunWorkload launched %d kernels, want %d", n, Launches)
	}
}
