package race

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/instrument"
	"github.com/gpurr/gpurr/internal/ptx"
)

// The modules a hunt JITs: with no points, the PTX as gpurr parses and prints it (what the
// plain replays and the race.roundtrip GPU test run); with points, the seed variable declared
// once and one nanosleep per point; a point past the kernel's is an error.
func TestReplayRunnerModules(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "kernels", "ptx", "demo.ptx"))
	if err != nil {
		t.Fatal(err)
	}
	// demo.ptx targets sm_80; delays placed by cluster need sm_90.
	parsed, err := ptx.Parse([]byte(strings.Replace(string(src), ".target sm_80", ".target sm_90", 1)))
	if err != nil {
		t.Fatal(err)
	}
	sel, _ := instrument.ParseSelection("barrier,global-load")
	const kernel = "gpurr_demo_reduce"
	points := len(instrument.Points(parsed.Function(kernel), sel))
	if points < 2 {
		t.Fatalf("%s has %d points, want 2 or more", kernel, points)
	}
	r := &ReplayRunner{PTX: []byte(parsed.String()), Kernel: kernel, Selection: sel,
		Delay: instrument.Delay{Nanoseconds: 1000, Fraction: 0.5, Placement: instrument.PerCluster}}
	plain, err := r.module(nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(plain) != parsed.String() {
		t.Error("the plain module is not the PTX as printed")
	}
	delayed, err := r.module([]int{0, points - 1})
	if err != nil {
		t.Fatal(err)
	}
	text := string(delayed)
	if n := strings.Count(text, "nanosleep"); n != 2 {
		t.Errorf("%d nanosleeps for 2 points", n)
	}
	if n := strings.Count(text, ".global .align 4 .u32 "+instrument.DelaySeedSymbol+";"); n != 1 {
		t.Errorf("the seed variable is declared %d times", n)
	}
	if _, err := r.module([]int{points}); err == nil || !strings.Contains(err.Error(), "no point") {
		t.Errorf("a point past the kernel's: %v", err)
	}
}
