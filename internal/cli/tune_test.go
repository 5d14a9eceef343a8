package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/replay"
	"github.com/gpurr/gpurr/internal/tune"
)

// tune --csv - (or --chart -) writes that file alone to stdout and its report to stderr, as
// other verbs do with -o -; before, the report's lines came first on stdout, in the CSV. With
// both files named, the report stays on stdout. The search needs a GPU: this is what tune
// does with the trials it measured.
func TestTuneDataOnStdout(t *testing.T) {
	shape := func(block uint32) cuda.LaunchConfig {
		return cuda.LaunchConfig{Grid: cuda.Dim3{X: 64, Y: 1, Z: 1}, Block: cuda.Dim3{X: block, Y: 1, Z: 1}}
	}
	c := &replay.Case{Seq: 2, Name: "saxpy"}
	run := tuneRun{trials: []tune.Trial{
		{Config: shape(256), Recorded: true, Median: 20 * time.Microsecond, Repeats: 10, Verified: true},
		{Config: shape(128), Median: 10 * time.Microsecond, Repeats: 10, Verified: true},
		{Config: shape(1024), Median: 5 * time.Microsecond, Repeats: 1, Why: "output differs at byte 0"},
	}, elapsed: time.Second}
	var csv, svg bytes.Buffer
	if err := tune.WriteCSV(&csv, run.trials); err != nil {
		t.Fatal(err)
	}
	if err := tune.WriteSVG(&svg, "gpurr tune: launch 2, saxpy", run.trials); err != nil {
		t.Fatal(err)
	}
	report := []string{
		"measured 3 shapes in 1.00 s (3 shapes/s): 2 verified, 1 rejected; wrote ",
		"recorded: grid 64 block 256  20.00 µs\n",
		"fastest verified: grid 64 block 128  10.00 µs  (2.00x the recorded shape)\n",
	}
	dir := t.TempDir()
	for _, k := range []struct {
		csv, chart string
		stdout     string // all of it
		wrote      string
	}{
		{"-", filepath.Join(dir, "a.svg"), csv.String(), "wrote the CSV to standard output and " + filepath.Join(dir, "a.svg")},
		{filepath.Join(dir, "b.csv"), "-", svg.String(), "wrote " + filepath.Join(dir, "b.csv") + " and the chart to standard output"},
		{filepath.Join(dir, "c.csv"), filepath.Join(dir, "c.svg"), "", "wrote " + filepath.Join(dir, "c.csv") + " and " + filepath.Join(dir, "c.svg")},
	} {
		var stdout, stderr bytes.Buffer
		o := tuneOptions{csv: k.csv, chart: k.chart}
		csvOut, err := createFlagOutput("tune", "--csv", o.csv, &stdout, false)
		if err != nil {
			t.Fatal(err)
		}
		chartOut, err := createFlagOutput("tune", "--chart", o.chart, &stdout, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := finishTune(&stdout, &stderr, o, c, run, csvOut, chartOut); err != nil {
			t.Fatalf("--csv %s --chart %s: %v", k.csv, k.chart, err)
		}
		reportTo := &stderr
		if k.stdout == "" { // both are files: the report is stdout
			reportTo = &stdout
			if b, err := os.ReadFile(k.csv); err != nil || string(b) != csv.String() {
				t.Errorf("--csv %s holds %q (%v), want the CSV", k.csv, b, err)
			}
		} else if stdout.String() != k.stdout {
			t.Errorf("--csv %s --chart %s: stdout is not the file alone:\n%s", k.csv, k.chart, stdout.String())
		}
		for _, want := range append(report, k.wrote) {
			if !strings.Contains(reportTo.String(), want) {
				t.Errorf("--csv %s --chart %s: the report lacks %q:\nstdout:\n%s\nstderr:\n%s", k.csv, k.chart, want, stdout.String(), stderr.String())
			}
		}
		if reportTo == &stdout && stderr.Len() > 0 {
			t.Errorf("--csv %s --chart %s: stderr %q, want nothing", k.csv, k.chart, stderr.String())
		}
	}
}
