package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/internal/replay"
	"github.com/gpurr/gpurr/internal/termsafe"
)

type replayOptions struct {
	launch     uint64
	all        bool
	from       uint64
	repeat     int
	grid       string
	block      string
	smem       int64
	module     string
	ptx        string // --ptx: "" not given, recordedPTX, else a PTX file
	dtype      string
	atol, rtol float64
	elements   int
	device     int
	process    string
	format     string
}

func newReplayCmd() *cobra.Command {
	var o replayOptions
	cmd := &cobra.Command{
		Use:   "replay REC [--launch SEQ | --all] [--repeat K] [--grid X,Y,Z] [--block X,Y,Z] [--smem N] [--module FILE | --ptx[=FILE]] [--dtype T]",
		Short: "Run a recorded launch again, standalone, and check it bit-exactly",
		Long: `replay runs one launch of a --memory snapshot recording in this process,
without the program: it loads the recorded module, recreates the launch's
regions at their recorded device addresses (moving the parameter words that
point into them when the driver grants other addresses, and saying so),
restores their contents from just before the launch, launches with the
recorded parameter bytes and shape, and compares every region with its
contents from just after the launch.

--grid, --block and --smem change the shape (a grid-stride kernel must still
produce the recorded result); --module runs a cubin, PTX or fatbin holding a
kernel of the same name instead of the recorded code: an A/B of a fix on
the real inputs. --ptx runs the PTX the recording holds of the launch's
module (of each launch's, with --all), compiled by the driver's JIT for
this GPU, instead of its machine code: whether a difference comes from the
compiled SASS, or a replay on a GPU the recorded cubin was not built for.
--ptx=FILE runs that PTX file. --all replays every snapshotted launch, one
line each.

Exit status: 0 bit-exact (or within --atol/--rtol with --dtype, or torn:
differing from a recorded state another stream's kernel wrote while it was
taken, or with --all skipped: a kernel that cannot run alone, such as XLA's
delay kernel), 1 the result differs, 2 the launch could not be replayed,
3 no usable GPU here.`,
		Example: `  gpurr replay run1 --launch 42
  gpurr replay run1 --launch 42 --repeat 50 --block 512
  gpurr replay run1 --launch 42 --module fixed.cubin --dtype f32
  gpurr replay run1 --launch 42 --ptx       # the recorded PTX, JIT-compiled here
  gpurr replay run1 --all
  gpurr replay repro/          # a directory gpurr extract wrote`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := ptxFileAfterBareFlag(cmd, args); err != nil {
				return err
			}
			return positional(1, 1, "one recording")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runReplay(cmd, o, args[0]) },
	}
	f := cmd.Flags()
	launchVar(f, &o.launch, "launch", "launch sequence number (default: the only snapshotted launch)")
	f.BoolVar(&o.all, "all", false, "replay every launch that has snapshots before and after it")
	launchVar(f, &o.from, "from", "with --all: start at this launch (to go on after a fault ended a run)")
	countVar(f, &o.repeat, "repeat", 10, 1, "launches to time; the kernel time printed is their median")
	f.StringVar(&o.grid, "grid", "", "grid shape X[,Y[,Z]] instead of the recorded one")
	f.StringVar(&o.block, "block", "", "block shape X[,Y[,Z]] instead of the recorded one")
	unsetSizeVar(f, &o.smem, "smem", "dynamic shared memory bytes instead of the recorded amount")
	f.StringVar(&o.module, "module", "", "cubin, PTX or fatbin to run instead of the recorded module")
	f.StringVar(&o.ptx, "ptx", "", "run the kernel from PTX, JIT-compiled by the driver for this GPU, instead of the recorded machine code: a bare --ptx (or --ptx="+recordedPTX+") the PTX the recording holds of each launch's module; --ptx=FILE that PTX file")
	f.Lookup("ptx").NoOptDefVal = recordedPTX
	dtypeVar(cmd, &o.dtype, "decode differing regions as one type: f32, f16, bf16, f64, i8, u8, i16, i32, u32 or i64: errors and elements")
	f.Float64Var(&o.atol, "atol", 0, "with --dtype: absolute tolerance")
	f.Float64Var(&o.rtol, "rtol", 0, "with --dtype: relative tolerance (of the recorded value)")
	f.IntVar(&o.elements, "elements", 5, "with --dtype: differing elements to show per region")
	unsetIntVar(f, &o.device, "device", "device ordinal (default: the recorded one)")
	f.StringVar(&o.process, "process", "", "process of a multi-process recording: its directory name, pid or rank")
	f.StringVar(&o.format, "format", "table", "table or json")
	completeValues(cmd, "format", "table", "json")
	return cmd
}

// launchReport is one launch's replay, as --format json writes it.
type launchReport struct {
	Launch     uint64        `json:"launch"`
	Kernel     string        `json:"kernel"`
	Line       string        `json:"line,omitempty"`
	Backward   string        `json:"backward_node,omitempty"` // the autograd node whose backward made the launch; Line is then its forward line
	Status     replay.Status `json:"status"`                  // bit-exact | within-tolerance | torn | skipped | differs | nondeterministic | failed
	Why        string        `json:"why,omitempty"`
	Grid       [3]uint32     `json:"grid"`
	Block      [3]uint32     `json:"block"`
	SharedMem  uint32        `json:"shared_mem"`
	LaunchAs   []string      `json:"attributes,omitempty"` // how it was launched beyond its shape: "cooperative", "cluster 2x1x1"
	Unhonoured []string      `json:"unhonoured,omitempty"` // how the program launched that the recording does not say, so replay could not follow
	Device     string        `json:"device,omitempty"`
	Relocated  int           `json:"relocated_regions"`
	Notes      []string      `json:"notes,omitempty"`
	Code       string        `json:"code,omitempty"`          // what code ran when not the recorded machine code: "PTX from the recording, for compute_90, JIT-compiled by the driver for sm_90"
	Fresh      bool          `json:"fresh_context,omitempty"` // it faulted and lost the CUDA context; the launches after it ran in a fresh one
	After      uint64        `json:"after_fault,omitempty"`   // it ran in a fresh context after this launch's fault
	MedianUs   float64       `json:"median_us"`
	Repeats    int           `json:"repeats"`
	Regions    []regionJSON  `json:"regions,omitempty"`
	regionsOf  *replay.Case
	results    []replay.RegionResult
}

// regionJSON is a region's outcome in --format json. Errors are strings
// ("NaN" is not a JSON number).
type regionJSON struct {
	Index             int      `json:"index"`
	Address           string   `json:"address"`
	ReplayedAt        string   `json:"replayed_at,omitempty"` // where it lived in the replay, when not at Address
	Size              uint64   `json:"size"`
	Identical         bool     `json:"identical"`
	Chunks            int      `json:"chunks"`
	Missing           int      `json:"chunks_missing,omitempty"`
	DifferingChunks   int      `json:"differing_chunks"`
	FirstDiff         int64    `json:"first_diff"`
	DifferingElements int      `json:"differing_elements,omitempty"`
	Outside           int      `json:"outside_tolerance,omitempty"`
	MaxAbs            string   `json:"max_abs,omitempty"`
	MaxRel            string   `json:"max_rel,omitempty"`
	Elements          []string `json:"elements,omitempty"`
}

// newLaunchReport describes a replay's outcome for the table and --format json.
func newLaunchReport(oc replay.Outcome, check replay.Check) launchReport {
	rep := launchReport{Launch: oc.Launch, Kernel: oc.Kernel, Status: oc.Status, Why: oc.Why, Device: oc.Device,
		Relocated: oc.Relocated, Notes: oc.Notes, Code: oc.Code, Fresh: oc.FreshContext, After: oc.AfterFault, regionsOf: oc.Case}
	if c := oc.Case; c != nil {
		rep.Line, rep.Backward = c.Line, c.Launch.GetAutograd().GetBackwardNode()
		cfg := oc.Config
		rep.Grid = [3]uint32{cfg.Grid.X, cfg.Grid.Y, cfg.Grid.Z}
		rep.Block = [3]uint32{cfg.Block.X, cfg.Block.Y, cfg.Block.Z}
		rep.SharedMem = cfg.SharedMem
		rep.LaunchAs, rep.Unhonoured = cfg.Attributes(), oc.Unhonoured
	}
	if res := oc.Result; res != nil {
		rep.results, rep.Regions, rep.Repeats = res.Regions, regionsJSON(oc.Case, oc.Addresses, res.Regions, check), len(res.Times)
		rep.MedianUs = float64(res.Median()) / float64(time.Microsecond)
	}
	return rep
}

func regionsJSON(c *replay.Case, addresses []uint64, results []replay.RegionResult, check replay.Check) []regionJSON {
	var out []regionJSON
	for _, r := range results {
		reg := c.Regions[r.Index]
		j := regionJSON{Index: r.Index, Address: fmt.Sprintf("0x%x", reg.Address), Size: reg.Size, Identical: r.Identical,
			Chunks: r.Chunks, Missing: r.Missing, DifferingChunks: r.DifferingChunks, FirstDiff: r.FirstDiff,
			DifferingElements: r.DifferingElements, Outside: r.Outside}
		if at := addresses[r.Index]; at != reg.Address {
			j.ReplayedAt = fmt.Sprintf("0x%x", at)
		}
		if check.Type != nil && !r.Identical {
			j.MaxAbs, j.MaxRel = strconv.FormatFloat(r.MaxAbs, 'g', -1, 64), strconv.FormatFloat(r.MaxRel, 'g', -1, 64)
		}
		for _, e := range r.Elements {
			j.Elements = append(j.Elements, fmt.Sprintf("[%d] replay %g recorded %g", e.Index, e.A, e.B))
		}
		out = append(out, j)
	}
	return out
}

func runReplay(cmd *cobra.Command, o replayOptions, path string) error {
	out := cmd.OutOrStdout()
	if err := checkFormat("replay", o.format, "table", "json"); err != nil {
		return err
	}
	if o.all && o.launch != 0 {
		return usageErrorf("replay: say --launch SEQ or --all, not both")
	}
	if o.from != 0 && !o.all {
		return usageErrorf("replay: --from goes with --all")
	}
	check, err := replayCheck("replay", o.dtype, o.atol, o.rtol, o.elements)
	if err != nil {
		return err
	}
	shape, err := parseShape(o.grid, o.block, o.smem)
	if err != nil {
		return err
	}
	if cmd.Flags().Changed("ptx") && o.ptx == "" {
		return usageErrorf("replay: --ptx= names no file: give --ptx=FILE, or a bare --ptx for the PTX the recording holds")
	}
	if o.module != "" && o.ptx != "" {
		return usageErrorf("replay: say --module FILE or --ptx, not both")
	}
	ptxFile, err := readPTXFlag(o.ptx)
	if err != nil {
		return err
	}
	var module []byte
	if o.module != "" {
		if module, err = moduleInput.read("replay", o.module); err != nil {
			return err
		}
		// Said before a GPU is looked for, in words the driver's INVALID_IMAGE does not have.
		kind := replay.ModuleKind(module)
		if kind == "ELF file that is not a cubin" || kind == "unknown image" && !bytes.Contains(module, []byte(".version")) {
			return usageErrorf("replay: --module %s is no cubin, PTX or fatbin (%s, %d bytes)", o.module, kind, len(module))
		}
	}
	src, err := openReplaySource(cmd, path, o.process)
	if err != nil {
		return err
	}
	defer src.Close()
	seqs, err := pickLaunches("replay", src, o.launch, o.all, o.from)
	if err != nil {
		return err
	}
	var first *replay.Case
	if !o.all {
		// Say what the recording lacks before looking for a GPU.
		if first, err = src.Case(seqs[0]); err != nil {
			return usageErrorf("replay: %v", err)
		}
		if o.ptx == recordedPTX {
			if _, err := src.RecordedPTX(first); err != nil {
				return usageErrorf("replay: %v", err)
			}
		}
	}
	if err := cuda.Init(); err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("replay: no usable GPU: %v", err)}
	}
	var reports []launchReport
	exit := exitOK
	req := replay.Request{Options: replay.Options{Module: module, PTX: ptxFile, Device: o.device}, RecordedPTX: o.ptx == recordedPTX,
		Shape: shape.apply, Repeat: o.repeat, Check: check}
	if o.all && o.ptx != "" && o.format == "table" {
		from := "the recording of each launch's module"
		if ptxFile != nil {
			from = ptxFile.From
		}
		termsafe.Fprintf(out, "code: PTX from %s, JIT-compiled by the driver for this GPU\n", from)
	}
	report := func(oc replay.Outcome) {
		rep := newLaunchReport(oc, check)
		reports = append(reports, rep)
		exit = max(exit, statusExit(oc.Status))
		if o.format == "table" {
			if o.all {
				printReplayLine(out, rep)
			} else {
				printReplayReport(out, rep, check)
			}
		}
		if oc.FreshContext {
			msg := freshContextMessage(oc)
			if o.format == "table" {
				termsafe.Fprintln(out, msg)
			}
			fmt.Fprintln(cmd.ErrOrStderr(), msg)
		}
	}
	var rest []uint64
	if first != nil {
		report(src.Replay(seqs[0], first, req))
	} else {
		rest = src.ReplayAll(seqs, req, report)
	}
	if len(rest) > 0 {
		// The driver refused a fresh context in this process (after a trap, cuDevicePrimaryCtxRetain
		// returns the fault again: H200, CUDA 13.0): a new process gets one.
		faulted := &reports[len(reports)-1]
		faulted.Fresh = true
		msg := fmt.Sprintf("replay: launch %d faulted and left the CUDA context unusable, and this process could make no other; the launches after it run in a fresh context of a new gpurr process",
			faulted.Launch)
		if o.format == "table" {
			termsafe.Fprintln(out, msg)
		}
		fmt.Fprintln(cmd.ErrOrStderr(), msg)
		more, err := replayInNewProcess(cmd, path, rest[0])
		if err != nil {
			msg := fmt.Sprintf("replay: %v; %d launches were not replayed: go on with gpurr replay %s --all --from %d", err, len(rest), path, rest[0])
			if o.format == "table" {
				termsafe.Fprintln(out, msg)
			}
			fmt.Fprintln(cmd.ErrOrStderr(), msg)
			exit = max(exit, exitFailure)
		}
		for _, rep := range more {
			if rep.After == 0 {
				rep.After = faulted.Launch
			}
			reports = append(reports, rep)
			exit = max(exit, statusExit(rep.Status))
			if o.format == "table" {
				printReplayLine(out, rep)
			}
		}
	}
	if o.format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"launches": reports}); err != nil {
			return err
		}
	} else if o.all {
		printReplaySummary(out, reports)
	}
	if len(reports) == 1 && (reports[0].Status == replay.StatusFailed || reports[0].Status == replay.StatusSkipped) {
		return usageErrorf("replay: launch %d: %s", reports[0].Launch, reports[0].Why)
	}
	return exitWith(exit)
}

// replayInNewProcess replays the launches from seq on with --all in a new gpurr process, with
// the flags this one was given, and returns its reports. Its stderr is this one's; a fault there
// that this driver cannot recover from in-process goes on in yet another, so every launch is
// replayed or said why not.
func replayInNewProcess(cmd *cobra.Command, path string, from uint64) ([]launchReport, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("no new process to go on in: %v", err)
	}
	child := exec.Command(exe, replayFromArgs(cmd.Flags(), path, from)...)
	child.Stderr = cmd.ErrOrStderr()
	var stdout bytes.Buffer
	child.Stdout = &stdout
	runErr := child.Run()
	var got struct {
		Launches []launchReport `json:"launches"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || len(got.Launches) == 0 {
		if runErr == nil {
			runErr = fmt.Errorf("it replayed nothing")
		}
		return nil, fmt.Errorf("the new process to go on in failed: %v", runErr)
	}
	return got.Launches, nil
}

// replayFromArgs are the arguments of a replay of path's launches from seq on, as JSON, with
// the flags given to this one (flags), which choose how each launch is replayed.
func replayFromArgs(flags *pflag.FlagSet, path string, from uint64) []string {
	args := []string{"replay", path}
	flags.Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "all", "from", "format", "launch":
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				args = append(args, "--"+f.Name+"="+v)
			}
			return
		}
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	return append(args, "--all", "--from", strconv.FormatUint(from, 10), "--format", "json")
}

// recordedPTX is --ptx's value when given bare: the PTX the recording holds.
const recordedPTX = "recorded"

// readPTXFlag reads --ptx=FILE, which must be PTX text; nil for no --ptx or a bare one.
func readPTXFlag(flag string) (*replay.ModulePTX, error) {
	if flag == "" || flag == recordedPTX {
		return nil, nil
	}
	text, err := ptxInput.read("replay", flag)
	if err != nil {
		return nil, err
	}
	if kind := replay.ModuleKind(text); !strings.HasPrefix(kind, "PTX") {
		return nil, usageErrorf("replay: --ptx %s is no PTX text (%s): give a cubin or fat binary with --module", flag, kind)
	}
	return replay.TextPTX(text, flag), nil
}

// ptxFileAfterBareFlag refuses a file written after --ptx as its own word (--ptx fix.ptx): the
// parser takes --ptx bare, for the recorded PTX, and the file for a second recording.
func ptxFileAfterBareFlag(cmd *cobra.Command, args []string) error {
	f := cmd.Flags().Lookup("ptx")
	if !f.Changed || f.Value.String() != f.NoOptDefVal || len(args) < 2 {
		return nil
	}
	file := args[len(args)-1]
	for _, a := range args {
		if st, err := os.Stat(a); err == nil && !st.IsDir() {
			file = a
		}
	}
	return usageErrorf("replay: --ptx %s: give a PTX file with = (--ptx=%s); a bare --ptx runs the PTX the recording holds", file, file)
}

// statusExit is the exit status a launch's replay calls for (docs/replay.md's table): a
// launch that cannot run is exit 2, one that differs 1; a torn one is not judged.
func statusExit(s replay.Status) int {
	switch s {
	case replay.StatusFailed:
		return exitUsage
	case replay.StatusDiffers, replay.StatusNondeterministic:
		return exitFound
	}
	return exitOK
}

// freshContextMessage says that launch oc faulted, losing the CUDA context,
// and that the launches after it go on in a fresh one.
func freshContextMessage(oc replay.Outcome) string {
	return fmt.Sprintf("replay: launch %d faulted and left the CUDA context unusable; the launches after it run in a fresh context", oc.Launch)
}

// shapeOverride is what --grid, --block and --smem change.
type shapeOverride struct {
	grid, block *cuda.Dim3
	smem        int64 // -1: recorded
}

func (s shapeOverride) apply(cfg cuda.LaunchConfig) cuda.LaunchConfig {
	if s.grid != nil {
		cfg.Grid = *s.grid
	}
	if s.block != nil {
		cfg.Block = *s.block
	}
	if s.smem >= 0 {
		cfg.SharedMem = uint32(s.smem)
	}
	return cfg
}

func parseShape(grid, block string, smem int64) (shapeOverride, error) {
	s := shapeOverride{smem: smem}
	for _, f := range []struct {
		flag, text string
		dst        **cuda.Dim3
	}{{"--grid", grid, &s.grid}, {"--block", block, &s.block}} {
		if f.text == "" {
			continue
		}
		d, err := parseDim3(f.text, ",")
		if err != nil {
			return s, usageErrorf("replay: %s: %v", f.flag, err)
		}
		*f.dst = &d
	}
	if smem > 1<<31 {
		return s, usageErrorf("replay: --smem %d is more than any GPU has", smem)
	}
	return s, nil
}

func printReplayReport(w io.Writer, rep launchReport, check replay.Check) {
	termsafe.Fprintf(w, "launch %d: %s\n", rep.Launch, rep.Kernel)
	switch {
	case rep.Backward != "" && rep.Line != "":
		termsafe.Fprintf(w, "  at %s (backward of %s)\n", rep.Line, rep.Backward)
	case rep.Backward != "":
		termsafe.Fprintf(w, "  backward of %s\n", rep.Backward)
	case rep.Line != "":
		termsafe.Fprintf(w, "  at %s\n", rep.Line)
	}
	if (rep.Status == replay.StatusFailed || rep.Status == replay.StatusSkipped) && rep.Device == "" {
		return // the error line says it all
	}
	how := ""
	if len(rep.LaunchAs) > 0 {
		how = "  " + strings.Join(rep.LaunchAs, ", ")
	}
	termsafe.Fprintf(w, "  grid %d,%d,%d  block %d,%d,%d  shared memory %d%s  on %s\n",
		rep.Grid[0], rep.Grid[1], rep.Grid[2], rep.Block[0], rep.Block[1], rep.Block[2], rep.SharedMem, how, rep.Device)
	if rep.Code != "" {
		termsafe.Fprintf(w, "  code: %s\n", rep.Code)
	}
	for _, n := range rep.Notes {
		termsafe.Fprintf(w, "  note: %s\n", n)
	}
	if rep.Status == replay.StatusFailed {
		termsafe.Fprintf(w, "  failed: %s\n", rep.Why)
		return
	}
	for i, r := range rep.results {
		reg := rep.regionsOf.Regions[r.Index]
		at := ""
		if moved := rep.Regions[i].ReplayedAt; moved != "" {
			at = " (at " + moved + ")"
		}
		termsafe.Fprintf(w, "  region %d  0x%x%s  %s  %s\n", r.Index, reg.Address, at, info.FormatBytes(reg.Size), regionVerdict(r, check))
		for _, e := range r.Elements {
			termsafe.Fprintf(w, "      [%d] replay %g, recorded %g (abs %g, rel %.3g)\n", e.Index, e.A, e.B, e.Abs, e.Rel)
		}
	}
	termsafe.Fprintf(w, "  kernel time: %.2f µs (median of %d)\n", rep.MedianUs, rep.Repeats)
	switch rep.Status {
	case replay.StatusExact:
		termsafe.Fprintln(w, "result: bit-exact")
	case replay.StatusWithin:
		termsafe.Fprintf(w, "result: within tolerance (atol %g, rtol %g)\n", check.Atol, check.Rtol)
	case replay.StatusTorn:
		termsafe.Fprintf(w, "result: torn, not judged: %s\n", rep.Why)
	default:
		termsafe.Fprintf(w, "result: DIFFERS: %s\n", rep.Why)
	}
}

func regionVerdict(r replay.RegionResult, check replay.Check) string {
	var v string
	if r.Identical {
		v = "identical"
	} else {
		v = fmt.Sprintf("DIFFERS from byte 0x%x, %d of %d chunks", r.FirstDiff, r.DifferingChunks, r.Chunks)
		if check.Type != nil {
			v += fmt.Sprintf("; %s: %d elements differ, %d outside tolerance, max abs %g, max rel %.3g",
				check.Type.Name, r.DifferingElements, r.Outside, r.MaxAbs, r.MaxRel)
		}
	}
	if r.Missing > 0 {
		v += fmt.Sprintf(" (%d chunks not compared: dropped while recording)", r.Missing)
	}
	return v
}

func printReplayLine(w io.Writer, rep launchReport) {
	var what string
	switch rep.Status {
	case replay.StatusExact, replay.StatusWithin:
		what = fmt.Sprintf("%-16s %9.2f µs", rep.Status, rep.MedianUs)
	default:
		what = fmt.Sprintf("%-16s %s", rep.Status, rep.Why)
	}
	line := rep.Line
	if line == "" {
		line = "-"
	}
	termsafe.Fprintf(w, "%6d  %-48.48s  %-28.28s  %s\n", rep.Launch, rep.Kernel, line, what)
}

func printReplaySummary(w io.Writer, reports []launchReport) {
	counts := map[replay.Status]int{}
	for _, r := range reports {
		counts[r.Status]++
	}
	var parts []string
	for _, s := range []replay.Status{replay.StatusExact, replay.StatusWithin, replay.StatusTorn, replay.StatusSkipped, replay.StatusDiffers, replay.StatusNondeterministic, replay.StatusFailed} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	termsafe.Fprintf(w, "%s replayed: %s\n", info.Count(len(reports), "launch"), strings.Join(parts, ", "))
}
