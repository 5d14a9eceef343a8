package demo

import (
	"bytes"
	"errors"
	"math"
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

// TestStoryBundled checks the story's recordings, when this build has them: both runs hold
// every launch of their variant.
func TestStoryBundled(t *testing.T) {
	if !HasStory() {
		t.Skip("no bundled story in this build: scripts/gen-testdata records it on a GPU machine")
	}
	dir := t.TempDir()
	if err := ExtractStory(dir); err != nil {
		t.Fatal(err)
	}
	for _, run := range StoryRuns {
		set, err := recording.Open(filepath.Join(dir, run))
		if err != nil {
			t.Fatal(err)
		}
		d, err := set.Processes[0].Load()
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Launches) != StoryLaunches || d.Process.GetMemory().GetMode() != "snapshot" {
			t.Errorf("run %s: %d launches in %q memory mode, want %d in snapshot mode", run, len(d.Launches), d.Process.GetMemory().GetMode(), StoryLaunches)
		}
	}
}

func TestRunWorkload(t *testing.T) {
	if _, err := cuda.Probe(); err != nil {
		t.Skipf("no CUDA device: %v", err)
	}
	for v, want := range map[Variant]int{Plain: Launches, StoryA: StoryLaunches, StoryB: StoryLaunches} {
		var out bytes.Buffer
		n, err := RunWorkload(&out, v)
		t.Log(strings.TrimSpace(out.String()))
		if err != nil {
			t.Fatalf("variant %q: %v", v, err)
		}
		if n != want {
			t.Errorf("variant %q launched %d kernels, want %d", v, n, want)
		}
	}
}

// The story's runs part ways only on stream 1, and both end with NaN on
// stream 0 where the overflowing saxpy multiplied a zero.
func TestStoryCompute(t *testing.T) {
	a0, a1, b0, b1 := StoryA.compute(0), StoryA.compute(1), StoryB.compute(0), StoryB.compute(1)
	if len(a0.Y) != StoryElements {
		t.Fatalf("story buffers hold %d elements, want %d", len(a0.Y), StoryElements)
	}
	if !sameBits(a0.Y, b0.Y) {
		t.Error("stream 0 differs between the story's runs")
	}
	if sameBits(a1.Y, b1.Y) {
		t.Error("stream 1 is the same in both runs: nothing to find")
	}
	nan, inf := 0, 0
	for _, v := range a0.Y {
		switch {
		case v != v:
			nan++
		case math.IsInf(float64(v), 1):
			inf++
		}
	}
	if nan != StoryElements/1024 || inf != StoryElements-nan {
		t.Errorf("stream 0 ends with %d NaN and %d +Inf, want %d NaN and the rest +Inf", nan, inf, StoryElements/1024)
	}
	for _, v := range a1.Y {
		if v != v || math.IsInf(float64(v), 0) {
			t.Fatal("stream 1 holds a NaN or Inf: only stream 0 overflows")
		}
	}
}

func sameBits(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

func TestParseVariant(t *testing.T) {
	for _, name := range []string{"", "a", "b"} {
		if v, err := ParseVariant(name); err != nil || string(v) != name {
			t.Errorf("ParseVariant(%q) = %q, %v", name, v, err)
		}
	}
	if _, err := ParseVariant("c"); err == nil {
		t.Error("ParseVariant(c) succeeded")
	}
}
