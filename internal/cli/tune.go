package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/replay"
	"github.com/gpurr/gpurr/internal/termsafe"
	"github.com/gpurr/gpurr/internal/tune"
)

type tuneOptions struct {
	launch     uint64
	grid       string
	block      string
	search     string
	seed       uint64
	repeat     int
	dtype      string
	atol, rtol float64
	csv, chart string
	force      bool
	device     int
	process    string
}

func newTuneCmd() *cobra.Command {
	var o tuneOptions
	cmd := &cobra.Command{
		Use:   "tune REC --launch SEQ --block 64,128,256,512,1024 [--grid ...] [--search grid|random:N]",
		Short: "Search launch shapes of a recorded launch on its real inputs",
		Long: `tune replays a snapshotted launch (as gpurr replay does) with every
combination of the --grid and --block sizes given, times each with CUDA
events (median of --repeat launches), and keeps only the shapes whose output
matches the recording: bit for bit, or within --atol/--rtol with --dtype.
The recorded shape is measured in the same run as the baseline. It writes a
CSV and an SVG chart and prints the fastest verified shape with its speedup.
--csv - or --chart - writes that file to stdout; the report then goes to
stderr.

Sizes are separated by commas; a 2-D or 3-D size is written 16x16 or
8x8x4. --search random:N measures N shapes picked at random from the
combinations (with --seed).`,
		Example: `  gpurr tune run1 --launch 42 --block 64,128,256,512,1024
  gpurr tune run1 --launch 42 --block 128,256 --grid 132,264,528 --csv t.csv --chart t.svg
  gpurr tune run1 --launch 42 --block 32x4,32x8,64x4 --dtype bf16 --rtol 1e-2`,
		Args: positional(1, 1, "one recording"),
		RunE: func(cmd *cobra.Command, args []string) error { return runTune(cmd, o, args[0]) },
	}
	f := cmd.Flags()
	launchVar(f, &o.launch, "launch", "launch sequence number (default: the only snapshotted launch)")
	f.StringVar(&o.grid, "grid", "", "grid sizes to try, e.g. 132,264,528 (default: the recorded grid)")
	f.StringVar(&o.block, "block", "", "block sizes to try, e.g. 64,128,256,512,1024 (default: the recorded block)")
	f.StringVar(&o.search, "search", "grid", "grid (every combination) or random:N")
	completeValues(cmd, "search", "grid", "random:")
	f.Uint64Var(&o.seed, "seed", 1, "with --search random:N: the seed")
	countVar(f, &o.repeat, "repeat", 10, 1, "timed launches per shape")
	dtypeVar(cmd, &o.dtype, "compare outputs as elements of this one type (needed for --atol/--rtol)")
	f.Float64Var(&o.atol, "atol", 0, "with --dtype: absolute tolerance")
	f.Float64Var(&o.rtol, "rtol", 0, "with --dtype: relative tolerance (of the recorded value)")
	outputVar(f, &o.csv, "csv", "", "tune.csv", "CSV file of every shape measured")
	outputVar(f, &o.chart, "chart", "", "tune.svg", "SVG chart of the measurements")
	f.BoolVar(&o.force, "force", false, "replace the --csv and --chart files when they exist")
	unsetIntVar(f, &o.device, "device", "device ordinal (default: the recorded one)")
	f.StringVar(&o.process, "process", "", "process of a multi-process recording: its directory name, pid or rank")
	return cmd
}

func runTune(cmd *cobra.Command, o tuneOptions, path string) error {
	out, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if o.grid == "" && o.block == "" {
		return usageErrorf("tune: give --block and/or --grid sizes to try")
	}
	grids, err := parseDims("--grid", o.grid)
	if err != nil {
		return err
	}
	blocks, err := parseDims("--block", o.block)
	if err != nil {
		return err
	}
	sample := 0
	switch {
	case o.search == "grid":
	case strings.HasPrefix(o.search, "random:"):
		n, err := strconv.Atoi(strings.TrimPrefix(o.search, "random:"))
		if sample = n; err != nil || sample < 1 {
			return usageErrorf("tune: --search %q: want random:N with N of 1 or more", o.search)
		}
	default:
		return usageErrorf("tune: --search %q: want grid or random:N", o.search)
	}
	if cmd.Flags().Changed("seed") && sample == 0 {
		return usageErrorf("tune: --seed picks the shapes of --search random:N; a grid search measures every shape")
	}
	check, err := replayCheck("tune", o.dtype, o.atol, o.rtol, 0)
	if err != nil {
		return err
	}
	// The outputs are checked before the search, which may take long, not after it.
	if o.csv == o.chart {
		return usageErrorf("tune: --csv and --chart are both %s: name two files", o.csv)
	}
	csvOut, err := createFlagOutput("tune", "--csv", o.csv, out, o.force, path)
	if err != nil {
		return err
	}
	defer csvOut.Abort()
	chartOut, err := createFlagOutput("tune", "--chart", o.chart, out, o.force, path)
	if err != nil {
		return err
	}
	defer chartOut.Abort()
	if csvOut.sameFile(chartOut) {
		return usageErrorf("tune: --csv %s and --chart %s are one file: name two files", o.csv, o.chart)
	}
	src, c, err := openCase(cmd, path, o.process, o.launch)
	if err != nil {
		return err
	}
	defer src.Close()
	configs := tune.Space(c.Recorded(), grids, blocks)
	if sample > 0 {
		configs = tune.Sample(configs, sample, o.seed)
	}
	if err := cuda.Init(); err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("tune: no usable GPU: %v", err)}
	}
	s, err := replay.NewSession(c, replay.Options{Device: o.device})
	if err != nil {
		return usageErrorf("tune: launch %d: %v", c.Seq, err)
	}
	defer s.Close()
	for _, n := range s.Notes {
		fmt.Fprintf(stderr, "tune: note: %s\n", n)
	}
	termsafe.Fprintf(tuneReport(o, out, stderr), "tune: launch %d: %s, %d shapes on %s (%s)\n", c.Seq, c.Name, len(configs), s.Device.Name, s.Device.Arch())
	progress := tuneProgress(len(configs))
	start := time.Now()
	trials, runErr := tune.Run(s, configs, o.repeat, check, progress)
	return finishTune(out, stderr, o, c, tuneRun{trials, time.Since(start), runErr}, csvOut, chartOut)
}

// tuneRun is what a search measured: the trials, in elapsed, and why it stopped early, if it
// did (err).
type tuneRun struct {
	trials  []tune.Trial
	elapsed time.Duration
	err     error
}

// tuneReport is where tune's report goes: stdout, unless --csv or --chart is stdout (-),
// which then carries that file alone, as with the other verbs' -o -.
func tuneReport(o tuneOptions, stdout, stderr io.Writer) io.Writer {
	if o.csv == "-" || o.chart == "-" {
		return stderr
	}
	return stdout
}

// finishTune writes the files and the report of a search of c's shapes.
func finishTune(stdout, stderr io.Writer, o tuneOptions, c *replay.Case, r tuneRun, csvOut, chartOut *output) error {
	out, trials, elapsed, runErr := tuneReport(o, stdout, stderr), r.trials, r.elapsed, r.err
	if len(trials) == 0 || !trials[0].Verified {
		why := "it did not run"
		if len(trials) > 0 {
			why = trials[0].Why
		}
		return usageErrorf("tune: the recorded shape does not reproduce the recording (%s): nothing to verify other shapes against; try gpurr replay --launch %d", why, c.Seq)
	}
	if err := writeTuneFiles(c, trials, csvOut, chartOut); err != nil {
		return err
	}
	verified := 0
	for _, t := range trials {
		if t.Verified {
			verified++
		}
	}
	fmt.Fprintf(out, "measured %d shapes in %.2f s (%.0f shapes/s): %d verified, %d rejected; wrote %s and %s\n",
		len(trials), elapsed.Seconds(), float64(len(trials))/elapsed.Seconds(), verified, len(trials)-verified,
		tuneFileName("the CSV", o.csv), tuneFileName("the chart", o.chart))
	best, _ := tune.Best(trials)
	base := trials[0]
	fmt.Fprintf(out, "recorded: %s  %.2f µs\n", base.Label(), float64(base.Median)/1e3)
	fmt.Fprintf(out, "fastest verified: %s  %.2f µs  (%.2fx the recorded shape)\n", best.Label(), float64(best.Median)/1e3, float64(base.Median)/float64(best.Median))
	if runErr != nil {
		if errors.Is(runErr, tune.ErrContextLost) {
			return usageErrorf("tune: stopped early: %v", runErr)
		}
		return usageErrorf("tune: %v", runErr)
	}
	return nil
}

// tuneFileName names where --csv or --chart (what) went in the report.
func tuneFileName(what, path string) string {
	if path == "-" {
		return what + " to standard output"
	}
	return path
}

// parseDims reads a comma-separated list of sizes, each X, XxY or XxYxZ.
func parseDims(flag, list string) ([]cuda.Dim3, error) {
	if list == "" {
		return nil, nil
	}
	var out []cuda.Dim3
	for _, item := range strings.Split(list, ",") {
		d, err := parseDim3(item, "x")
		if err != nil {
			return nil, usageErrorf("tune: %s: %v", flag, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func tuneProgress(total int) func(int) {
	if total < 8 || !term.IsTerminal(int(os.Stderr.Fd())) {
		return nil
	}
	bar := progressbar.NewOptions(total, progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription("tuning"), progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
	return func(done int) { bar.Set(done) }
}

func writeTuneFiles(c *replay.Case, trials []tune.Trial, csvOut, chartOut *output) error {
	if err := tune.WriteCSV(csvOut, trials); err != nil {
		return usageErrorf("tune: %v", err)
	}
	if err := tune.WriteSVG(chartOut, fmt.Sprintf("gpurr tune: launch %d, %s", c.Seq, c.Name), trials); err != nil {
		return usageErrorf("tune: %v", err)
	}
	if err := csvOut.Commit(); err != nil {
		return err
	}
	return chartOut.Commit()
}
