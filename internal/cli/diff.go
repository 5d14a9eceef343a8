package cli

import (
	"cmp"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/info"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

type diffOptions struct {
	dtype     string
	elements  int
	unmatched int
	frames    int
}

func newDiffCmd() *cobra.Command {
	var o diffOptions
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Find the first kernel launch where two runs' device memory parts ways",
		Long: `diff aligns the kernel launches of two recordings of the same program
(process by process: by rank, else in order; stream by stream, streams by
the thread they belong to, threads by the order they were created; by kernel) and
reports the first launch after which a region of device memory differs: the
kernel, both launches, both callstacks down to the Python line, the regions
and the first differing chunk. With snapshots on both sides and --dtype, it
decodes the first differing elements. Launches present in one run only (an
extra warm-up) are skipped over and listed.

Comparing what the runs computed needs memory capture on both (gpurr record
--memory hash, or snapshot); without it diff warns and compares what they
launched: the first launch one run made and the other did not.
Exit status: 0 when the runs agree, 1 when they part ways, 2 on bad input.`,
		Example: `  gpurr record --memory hash -o run1 -- python train.py
  gpurr record --memory hash -o run2 -- python train.py
  gpurr diff run1 run2
  gpurr diff --dtype bf16 snap1 snap2`,
		Args: positional(2, 2, "two recordings"),
		RunE: func(cmd *cobra.Command, args []string) error { return runDiff(cmd, o, args[0], args[1]) },
	}
	f := cmd.Flags()
	f.StringVar(&o.dtype, "dtype", "", "decode differing memory as f32, f16, bf16, f64, i8, u8, i16, i32, u32 or i64 (needs snapshots on both sides)")
	completeValues(cmd, "dtype", dtype.Names()...)
	f.IntVar(&o.elements, "elements", 8, "differing elements to show per region (with --dtype)")
	f.IntVar(&o.unmatched, "unmatched", 5, "launches present in one run only to list by name (all are counted)")
	f.IntVar(&o.frames, "frames", 6, "Python frames of each callstack to show, innermost first")
	addStepRangeFlag(cmd)
	return cmd
}

func runDiff(cmd *cobra.Command, o diffOptions, pathA, pathB string) error {
	out := cmd.OutOrStdout()
	if o.elements < 0 || o.unmatched < 0 || o.frames < 0 {
		return usageErrorf("diff: --elements, --unmatched and --frames take a count of 0 or more")
	}
	var dt *dtype.Type
	if o.dtype != "" {
		var err error
		if dt, err = dtype.Parse(o.dtype); err != nil {
			return usageErrorf("diff: --dtype: %v", err)
		}
	}
	setA, err := openRecording(cmd, pathA)
	if err != nil {
		return err
	}
	setB, err := openRecording(cmd, pathB)
	if err != nil {
		return err
	}
	setA, setB = launching(cmd, setA), launching(cmd, setB)
	procsA, procsB := recordingProcs(setA), recordingProcs(setB)
	pairs, warnings := pairProcesses(pathA, procsA, pathB, procsB)
	for _, w := range warnings {
		warnf(cmd, "%s", w)
	}
	if len(pairs) == 0 {
		return noPairs("diff", setA.Dir, procsA, setB.Dir, procsB)
	}
	type divergence struct {
		label string
		at    int64
	}
	var diverged []divergence
	var unread []string
	for _, ij := range pairs {
		pp := [2]*recording.Process{setA.Processes[ij[0]], setB.Processes[ij[1]]}
		a, err := diff.Scan(pp[0])
		var b *diff.Run
		if err == nil {
			b, err = diff.ScanSized(pp[1], len(a.Launches))
		}
		if err != nil {
			// A damaged process does not hide the other pairs: they are compared, and the
			// command ends with this one's error.
			if len(pairs) == 1 {
				return usageErrorf("diff: %v", err)
			}
			fmt.Fprintf(out, "%s vs %s: not compared: %v\n", pp[0].Name, pp[1].Name, err)
			unread = append(unread, fmt.Sprintf("%s vs %s", pp[0].Name, pp[1].Name))
			continue
		}
		launchesOnly := false // a run without memory capture: only what was launched is compared
		for i, r := range []*diff.Run{a, b} {
			if i == 1 && r.Process.Dir == a.Process.Dir {
				break // a run compared with itself: its warnings once
			}
			if r.Mode == "" {
				launchesOnly = true
				warnf(cmd, "%s was recorded without memory capture: comparing what the runs launched, not what they computed (record both with --memory hash for that)", r.Process.Dir)
			}
			if !r.Complete {
				warnf(cmd, "%s is incomplete; comparing what it holds", r.Process.Dir)
			}
			if none := r.Steps.NoneMatched(); none != "" {
				warnf(cmd, "%s: %s", r.Process.Dir, none)
			}
		}
		res := diff.Align(a, b)
		label := fmt.Sprintf("%s vs %s", pp[0].Name, pp[1].Name)
		if launchesOnly {
			if at, parted, err := reportLaunchDivergence(out, o, label, a, b, res); err != nil {
				return usageErrorf("diff: %v", err)
			} else if parted {
				diverged = append(diverged, divergence{rankLabel(pp[0], label), at})
			}
			writeAlike(out, a, b)
			reportUnmatched(out, o.unmatched, "A", "B", a, b, res)
			continue
		}
		if res.Compared == 0 {
			return usageErrorf("diff: %s and %s: no matched launch has memory states on both sides (%d matched)", pp[0].Name, pp[1].Name, res.Matched)
		}
		if res.First == nil {
			fmt.Fprintf(out, "%s: the runs agree: %d launches compared after they ran (%d matched)\n", label, res.Compared, res.Matched)
			writeCarryNotes(out, res, carrySide{"A", a, 0}, carrySide{"B", b, 0})
		} else {
			at, err := reportDivergence(out, o, dt, label, a, b, res)
			if err != nil {
				return usageErrorf("diff: %v", err)
			}
			writeCarryNotes(out, res, carrySide{"A", a, a.Launches[res.First.A].Seq}, carrySide{"B", b, b.Launches[res.First.B].Seq})
			diverged = append(diverged, divergence{rankLabel(pp[0], label), at})
		}
		writeAlike(out, a, b)
		reportUnmatched(out, o.unmatched, "A", "B", a, b, res)
	}
	if len(diverged) > 1 {
		// Ranks wait on each other's collectives: the rank that parted ways first in time is
		// where to look; the others may only have received its bad values.
		first := slices.MinFunc(diverged, func(x, y divergence) int { return cmp.Compare(x.at, y.at) })
		fmt.Fprintf(out, "%d of %s part ways; first in time: %s (wall clock of A)\n",
			len(diverged), info.Count(len(pairs), "pair"), first.label)
	}
	if len(unread) > 0 {
		return usageErrorf("diff: %s could not be read (%s); the others are compared above", info.Count(len(unread), "pair"), fewNames(unread))
	}
	if len(diverged) > 0 {
		return exitWith(exitFound)
	}
	return nil
}

// procName is what pairing needs of a process, of a recording or of a
// manifest.
type procName struct {
	name string
	rank *int32
	argv []string
}

func recordingProcs(set *recording.Set) []procName {
	out := make([]procName, len(set.Processes))
	for i, p := range set.Processes {
		out[i] = procName{p.Name, p.Info.Rank, p.Info.GetArgv()}
	}
	return out
}

// pairProcesses matches the processes of two recordings (or a recording
// and a manifest), as indices: rank with the same rank, and the processes
// without a rank in order among themselves; processes that share a rank (a
// child that inherited its parent's RANK) pair in order within it. It warns
// when the command lines differ, and names each side's processes that pair
// with none: they are not compared.
func pairProcesses(whereA string, a []procName, whereB string, b []procName) (pairs [][2]int, warnings []string) {
	byRank := map[int32][]int{}
	var unrankedB []int
	for j, q := range b {
		if q.rank != nil {
			byRank[*q.rank] = append(byRank[*q.rank], j)
		} else {
			unrankedB = append(unrankedB, j)
		}
	}
	pairedB := make([]bool, len(b))
	// Programs of A and B that differ, in the order first met; the warning of the first pair
	// that ran them, and how many pairs did.
	var programs [][2]string
	firstWarning, pairsAlike := map[[2]string]string{}, map[[2]string]int{}
	var onlyA []procName
	for i, p := range a {
		queue := unrankedB
		if p.rank != nil {
			queue = byRank[*p.rank]
		}
		if len(queue) == 0 {
			onlyA = append(onlyA, p)
			continue
		}
		j := queue[0]
		if p.rank != nil {
			byRank[*p.rank] = queue[1:]
		} else {
			unrankedB = queue[1:]
		}
		pairedB[j] = true
		q := b[j]
		if progA, progB := program(p.argv), program(q.argv); progA != progB {
			key := [2]string{progA, progB}
			if _, ok := firstWarning[key]; !ok {
				programs = append(programs, key)
				firstWarning[key] = fmt.Sprintf("%s ran %q, %s ran %q: different programs? aligning what can be aligned",
					p.name, strings.Join(p.argv, " "), q.name, strings.Join(q.argv, " "))
			}
			pairsAlike[key]++
		}
		pairs = append(pairs, [2]int{i, j})
	}
	// Every rank of a job runs the same program: one line for all pairs that differ alike.
	for _, key := range programs {
		w := firstWarning[key]
		if n := pairsAlike[key] - 1; n > 0 {
			w += fmt.Sprintf(" (and %s alike)", info.Count(n, "more pair"))
		}
		warnings = append(warnings, w)
	}
	var onlyB []procName
	for j, q := range b {
		if !pairedB[j] {
			onlyB = append(onlyB, q)
		}
	}
	for _, side := range []struct {
		where, other string
		procs        []procName
	}{{whereA, whereB, onlyA}, {whereB, whereA, onlyB}} {
		if len(side.procs) > 0 {
			warnings = append(warnings, fmt.Sprintf("%s: %s with no counterpart in %s, not compared: %s",
				side.where, info.Count(len(side.procs), "process"), side.other, procList(side.procs)))
		}
	}
	return pairs, warnings
}

// procList names processes with their ranks, as fewNames lists them.
func procList(procs []procName) string {
	parts := make([]string, len(procs))
	for i, p := range procs {
		rank := "no rank"
		if p.rank != nil {
			rank = fmt.Sprintf("rank %d", *p.rank)
		}
		parts[i] = fmt.Sprintf("%s (%s)", p.name, rank)
	}
	return fewNames(parts)
}

// noPairs is the error of a diff or verify where no process of one side pairs with one of the
// other: it names each side's processes and their ranks, and how processes pair.
func noPairs(verb, whereA string, a []procName, whereB string, b []procName) error {
	list := func(procs []procName) string {
		if len(procs) == 0 {
			return "no process that made kernel launches"
		}
		return procList(procs)
	}
	return usageErrorf("%s: no processes to compare: %s has %s; %s has %s (processes pair by torchrun rank, those without one in order)",
		verb, whereA, list(a), whereB, list(b))
}

// program is what a command line runs, without the arguments it runs it with: the executable,
// and for a Python interpreter the script or module. Runs of one program with other arguments
// (a seed, a flag) are what diff is for; different programs deserve a warning.
func program(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	exe := strings.TrimRight(filepath.Base(argv[0]), "0123456789.")
	if exe != "python" {
		return argv[0]
	}
	for i := 1; i < len(argv); i++ {
		switch a := argv[i]; {
		case a == "-m" || a == "-c":
			if i+1 < len(argv) {
				return argv[0] + " " + a + " " + argv[i+1]
			}
		case a == "-W" || a == "-X": // options with a value
			i++
		case !strings.HasPrefix(a, "-"):
			return argv[0] + " " + a
		}
	}
	return argv[0]
}

// launching keeps the processes of set that made kernel launches: a
// launcher (torchrun's agent) that loaded CUDA but launched nothing has
// nothing to compare. Each one left out is said on stderr.
func launching(cmd *cobra.Command, set *recording.Set) *recording.Set {
	kept := &recording.Set{Dir: set.Dir, Damaged: set.Damaged}
	for _, p := range set.Processes {
		// A recording that cannot be read is kept: its pair says so, and the others are compared.
		has, err := p.HasLaunches()
		if err == nil && !has && len(set.Processes) > 1 {
			warnf(cmd, "leaving out %s: it made no kernel launches (a launcher, such as torchrun's)", p.Dir)
			continue
		}
		kept.Processes = append(kept.Processes, p)
	}
	return kept
}

// reportDivergence describes the first launch where a and b part ways; it returns when A made
// that launch, in wall-clock nanoseconds, to order the divergences of several ranks.
// rankLabel names a pair by its rank where it has one.
func rankLabel(p *recording.Process, label string) string {
	if r := p.Info.Rank; r != nil {
		return fmt.Sprintf("rank %d (%s)", *r, label)
	}
	return label
}

// writeStep says in which training step a matched pair of launches ran, when the runs went
// through steps (optimizer steps, or the ranges --step-range names).
func writeStep(w io.Writer, a *diff.Run, la diff.Launch, b *diff.Run, lb diff.Launch) {
	na, nb := a.Steps.Steps(), b.Steps.Steps()
	unit := a.Steps.Unit()
	if u := b.Steps.Unit(); u != unit {
		unit = fmt.Sprintf("A's %s, B's %s", unit, u)
	}
	switch {
	case na == 0 && nb == 0:
	case la.Step == lb.Step:
		fmt.Fprintf(w, "  step     %d of A's %d and B's %d (%s ended before it)\n", la.Step, na, nb, unit)
	default:
		fmt.Fprintf(w, "  step     %d of A's %d, %d of B's %d (%s ended before it)\n", la.Step, na, lb.Step, nb, unit)
	}
}

// writeRange names the NVTX range a launch of each run was made in, by its path; nothing when
// neither was made in one.
func writeRange(w io.Writer, a *recording.Process, la *pb.Launch, b *recording.Process, lb *pb.Launch) error {
	pa, err := recording.RangePath(a, la.GetRangeId())
	if err != nil {
		return err
	}
	pathB, err := recording.RangePath(b, lb.GetRangeId())
	if err != nil {
		return err
	}
	switch {
	case pa == pathB && pa != "":
		fmt.Fprintf(w, "  range    %s\n", pa)
	case pa != pathB:
		fmt.Fprintf(w, "  range    %s in A, %s in B\n", cmp.Or(pa, "(none)"), cmp.Or(pathB, "(none)"))
	}
	return nil
}

// reportLaunchDivergence compares what two runs launched, for recordings without memory
// states: of the launches one run made and the other did not, the one made earliest into its
// run, with where it came from. It returns that launch's wall-clock time and whether the runs
// part ways.
func reportLaunchDivergence(w io.Writer, o diffOptions, label string, a, b *diff.Run, res *diff.Result) (int64, bool, error) {
	if len(res.OnlyA) == 0 && len(res.OnlyB) == 0 {
		fmt.Fprintf(w, "%s: the runs launch the same kernels, stream by stream: %s matched (memory not compared)\n",
			label, info.Count(res.Matched, "launch"))
		return 0, false, nil
	}
	type lone struct {
		name, other string
		run         *diff.Run
		launch      diff.Launch
		side        *diff.Side
		into        int64 // ns since its process started
	}
	var first *lone
	for _, c := range []struct {
		name, other string
		run         *diff.Run
		idx         []int
	}{{"A", "B", a, res.OnlyA}, {"B", "A", b, res.OnlyB}} {
		if len(c.idx) == 0 {
			continue
		}
		l := c.run.Launches[c.idx[0]]
		side, err := diff.ReadLaunch(c.run.Process, l.Seq)
		if err != nil {
			return 0, false, err
		}
		into := int64(side.Launch.GetHostNs()) - int64(c.run.Process.Info.GetStartNs())
		if first == nil || into < first.into {
			first = &lone{c.name, c.other, c.run, l, side, into}
		}
	}
	at := first.run.Process.Info.GetStartUnixNs() + first.into
	fmt.Fprintf(w, "%s: the runs part ways in what they launch: launch %d of %s has no counterpart in %s\n", label, first.launch.Seq, first.name, first.other)
	fmt.Fprintf(w, "  kernel   %s (stream %d)\n", first.run.KernelName(first.launch), first.launch.Stream)
	if n := first.run.Steps.Steps(); n > 0 {
		fmt.Fprintf(w, "  step     %d of %s's %d (%s ended before it)\n", first.launch.Step, first.name, n, first.run.Steps.Unit())
	}
	if path, err := recording.RangePath(first.run.Process, first.side.Launch.GetRangeId()); err != nil {
		return 0, false, err
	} else if path != "" {
		fmt.Fprintf(w, "  range    %s\n", path)
	}
	writeOrigin(w, first.name, first.side.Launch, first.side.Callstack, first.side.Forward, o.frames)
	fmt.Fprintf(w, "  %s matched (memory not compared)\n", info.Count(res.Matched, "launch"))
	return at, true, nil
}

func reportDivergence(w io.Writer, o diffOptions, dt *dtype.Type, label string, a, b *diff.Run, res *diff.Result) (int64, error) {
	la, lb := a.Launches[res.First.A], b.Launches[res.First.B]
	sa, err := diff.ReadLaunch(a.Process, la.Seq)
	if err != nil {
		return 0, err
	}
	proc := a.Process.Info
	at := proc.GetStartUnixNs() + int64(sa.Launch.GetHostNs()) - int64(proc.GetStartNs())
	sb, err := diff.ReadLaunch(b.Process, lb.Seq)
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(w, "%s: the runs part ways at launch %d of A and %d of B: the memory after it differs\n", label, la.Seq, lb.Seq)
	fmt.Fprintf(w, "  kernel   %s (stream %d)\n", a.KernelName(la), la.Stream)
	writeStep(w, a, la, b, lb)
	if err := writeRange(w, a.Process, sa.Launch, b.Process, sb.Launch); err != nil {
		return 0, err
	}
	writeOrigin(w, "A", sa.Launch, sa.Callstack, sa.Forward, o.frames)
	writeOrigin(w, "B", sb.Launch, sb.Callstack, sb.Forward, o.frames)
	regions, err := diff.Differences(sa, sb, dt, o.elements)
	if err != nil {
		return 0, err
	}
	for _, r := range regions {
		fmt.Fprintf(w, "  region %d %s\n", r.Index, regionText(r, "A", "B"))
		for _, e := range r.Elements {
			fmt.Fprintf(w, "    [%d] A %s  B %s  abs %.3g  rel %.3g\n", e.Index, elemText(e.A, e.BitsA, e.IsReal), elemText(e.B, e.BitsB, e.IsReal), e.Abs, e.Rel)
		}
		if r.Note != "" {
			fmt.Fprintf(w, "    (%s)\n", r.Note)
		}
	}
	fmt.Fprintf(w, "  %d launches matched, %d compared; %d of them differ after they ran, this one first\n", res.Matched, res.Compared, res.Differ)
	return at, nil
}

// regionText describes a region that differs, or whose state is unknown on a side; nameA and
// nameB name the sides in the report.
func regionText(r diff.RegionDiff, nameA, nameB string) string {
	reg := cmp.Or(r.A, r.B)
	where := ""
	if reg != nil {
		where = fmt.Sprintf("(%s, parameter offset %s)", info.FormatBytes(reg.GetSize()), info.JoinOffsets(reg.GetParamOffsets()))
	}
	switch {
	case r.UnknownA || r.UnknownB:
		side := nameA
		switch {
		case r.UnknownA && r.UnknownB:
			side = "both"
		case r.UnknownB:
			side = nameB
		}
		return fmt.Sprintf("%s: not compared: its state is unknown in %s (carried from a state that was lost)", where, side)
	case r.A != nil && r.B != nil && r.A.GetSize() != r.B.GetSize():
		return fmt.Sprintf("%s: sizes differ, %s %d %s %d bytes; %d of %d chunks differ", where, nameA, r.A.GetSize(), nameB, r.B.GetSize(), r.DifferentChunks, r.Chunks)
	case r.FirstChunk >= 0:
		return fmt.Sprintf("%s: %d of %d chunks differ, the first at byte 0x%x (chunk %d)", where, r.DifferentChunks, r.Chunks, r.ElementsOff, r.FirstChunk)
	}
	return where
}

func elemText(v float64, bits uint64, real bool) string {
	if real {
		return fmt.Sprintf("%.9g", v)
	}
	return fmt.Sprintf("%d (0x%x)", int64(v), bits)
}

// writeOrigin writes where a launch came from, under label (A, B, at):
// the Python frames of its callstack, innermost first, at most n. For a
// launch made inside an autograd node's backward, a first line names the
// node and the forward line whose backward it computes, and the frames
// are the forward launch's (forward; nil when the recording has none, and
// then the launch's own, usually none: autograd's engine thread runs no
// Python).
func writeOrigin(w io.Writer, label string, l *pb.Launch, own, forward *pb.Callstack, n int) {
	var lines []string
	stack := own
	if node := l.GetAutograd().GetBackwardNode(); node != "" && forward != nil {
		lines = append(lines, fmt.Sprintf("backward of %s, forward at %s", node, cmp.Or(recording.Line(forward), "(no Python frame)")))
		stack = forward
	} else if node != "" {
		lines = append(lines, fmt.Sprintf("backward of %s (its forward line was not found)", node))
	}
	frames := pythonFrames(stack, n)
	if len(frames) == 0 {
		frames = nativeFrames(stack, n) // a C++ or CUDA program's own code
	}
	if len(frames) == 0 && n > 0 {
		frames = []string{"(no callstack recorded)"}
	}
	for i, line := range append(lines, frames...) {
		if i == 0 {
			fmt.Fprintf(w, "  %-8s %s\n", label, line)
		} else {
			fmt.Fprintf(w, "           %s\n", line)
		}
	}
}

// pythonFrames are a callstack's Python frames, innermost first, as text.
func pythonFrames(c *pb.Callstack, n int) []string {
	var out []string
	for _, f := range c.GetFrames() {
		if f.GetKind() == pb.Frame_PYTHON && len(out) < n {
			out = append(out, recording.FrameText(f))
		}
	}
	return out
}

// nativeFrames are a callstack's native frames outside the CUDA driver and NVIDIA's libraries
// (the program's own code, libtorch), innermost first, as text (library+offset function), at
// most n.
func nativeFrames(c *pb.Callstack, n int) []string {
	var out []string
	for _, f := range c.GetFrames() {
		if f.GetKind() != pb.Frame_NATIVE || len(out) == n {
			continue
		}
		if lib := filepath.Base(f.GetFile()); strings.HasPrefix(lib, "libcuda.so") || strings.HasPrefix(lib, "libcudart") ||
			strings.HasPrefix(lib, "libcupti") || strings.HasPrefix(lib, "libnvidia-") {
			continue
		}
		text := filepath.Base(f.GetFile()) + fmt.Sprintf("+0x%x", f.GetOffset())
		if f.GetFunction() != "" {
			text += " " + f.GetFunction()
		}
		out = append(out, text)
	}
	return out
}

// carrySide is a run as writeCarryNotes names it, with the launch of it reported as where the
// runs part ways (0 when they agree).
type carrySide struct {
	name  string
	run   *diff.Run
	first uint64
}

// shownMisses is how many write set misses a report names per run.
const shownMisses = 3

// writeCarryNotes says what a comparison's answer rests on when runs were recorded with write
// sets (format 1.11), a line each: matched launches not compared because a region's state was
// unknown; runs whose learned write sets carried regions unhashed; and each audit that found
// such a region changed where a difference may hide: before the launch reported, or anywhere
// when the runs agree.
func writeCarryNotes(w io.Writer, res *diff.Result, sides ...carrySide) {
	if res.Unknown > 0 {
		fmt.Fprintf(w, "  %s with states on both sides not compared: a region's state after it is unknown (carried from a state that was lost)\n",
			info.Count(res.Unknown, "matched launch"))
	}
	var learned []string
	every := uint32(0)
	for _, s := range sides {
		if s.run.WriteSets == "learned" {
			learned = append(learned, s.name)
			every = max(every, s.run.AuditEvery)
		}
	}
	if len(learned) > 0 {
		audited := ""
		if every > 0 {
			audited = fmt.Sprintf(" (audited every %s launch of a kernel)", info.Ordinal(every))
		}
		fmt.Fprintf(w, "  this answer rests on learned write sets (%s): regions a kernel's earlier launches never changed were carried, not hashed%s\n",
			strings.Join(learned, " and "), audited)
	}
	for _, s := range sides {
		misses := s.run.Uncertain(s.first)
		for i, m := range misses {
			if i == shownMisses {
				fmt.Fprintf(w, "  uncertain: in %s %d more audits found writes unseen (gpurr query: write_set_misses)\n", s.name, len(misses)-shownMisses)
				break
			}
			where := "the first divergence may be in"
			if s.first == 0 {
				where = "a difference may hide in"
			}
			fmt.Fprintf(w, "  uncertain: in %s an audit at launch %d found a write unseen since launch %d: %s launches %d..%d\n",
				s.name, m.GetAuditSeq(), m.GetSinceSeq(), where, m.GetSinceSeq()+1, m.GetAuditSeq())
		}
	}
}

// writeAlike says, when threads of a run launch alike (diff.Run.AlikeThreads), that their
// streams were paired by the order the threads were created, and nothing else.
func writeAlike(w io.Writer, a, b *diff.Run) {
	if n := max(a.AlikeThreads(), b.AlikeThreads()); n > 1 {
		fmt.Fprintf(w, "  %d threads launch alike (same kernel and callstack): paired by the order they were created\n", n)
	}
}

// reportUnmatched lists the launches present in one run only, up to limit
// of each run by name.
func reportUnmatched(w io.Writer, limit int, nameA, nameB string, a, b *diff.Run, res *diff.Result) {
	for _, side := range []struct {
		name string
		run  *diff.Run
		idx  []int
	}{{nameA, a, res.OnlyA}, {nameB, b, res.OnlyB}} {
		if len(side.idx) == 0 {
			continue
		}
		fmt.Fprintf(w, "  %s only in %s:", info.Count(len(side.idx), "launch"), side.name)
		for _, i := range side.idx[:min(len(side.idx), limit)] {
			l := side.run.Launches[i]
			fmt.Fprintf(w, "\n    %d %s", l.Seq, side.run.KernelName(l))
		}
		if len(side.idx) > limit {
			fmt.Fprintf(w, "\n    ...")
		}
		fmt.Fprintln(w)
	}
}
