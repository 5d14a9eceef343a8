package info

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpurr/gpurr/internal/termsafe"
)

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // C++ names are full of <, > and &
	return enc.Encode(r)
}

// WriteTable writes the report for people: a block per process, problems
// first and loud.
func (r *Report) WriteTable(w io.Writer) error {
	tw := &textWriter{w: w}
	tw.printf("recording %s: %s\n", r.Recording, Count(len(r.Processes), "process"))
	var idle []*Process
	for _, p := range r.Processes {
		// A process that loaded CUDA but launched nothing (torchrun's launcher) gets a line,
		// not a block, unless its recording has problems.
		if len(r.Processes) > 1 && p.Launches+p.GraphLaunches+p.Captured == 0 && len(p.Problems()) == 0 {
			idle = append(idle, p)
			continue
		}
		tw.printf("\n")
		p.write(tw)
	}
	for _, p := range idle {
		tw.printf("\n%s  %spid %d on %s: no kernel launches (a launcher, such as torchrun's; --format json has its details)\n",
			p.Name, p.rankText(), p.PID, p.Host)
	}
	if t := r.Total; t != nil {
		tw.printf("\ntotal        %d processes: %d eager launches, %d captured, %d graph launches; %d kernel runs, %s on the GPU; %d distinct kernels\n",
			t.Processes, t.Launches, t.Captured, t.GraphLaunches, t.KernelRuns, formatNS(t.GPUTimeNS), t.Kernels)
		if t.WithProblems > 0 {
			tw.printf("!! %d of %d processes have problems (marked !! above)\n", t.WithProblems, t.Processes)
		}
	}
	return tw.err
}

// textWriter keeps the first write error, so the report reads as prints. The strings among
// the arguments of printf come from the recording: they are printed made safe for a
// terminal (termsafe.Fprintf), as those of the tables are (termsafe.String).
type textWriter struct {
	w   io.Writer
	err error
}

func (t *textWriter) printf(format string, args ...any) {
	if t.err == nil {
		_, t.err = termsafe.Fprintf(t.w, format, args...)
	}
}

// TextWriter is textWriter for the reports of other packages (diff, nan, verify): lines
// written with Printf, the first write error kept for Err.
type TextWriter struct{ textWriter }

// NewTextWriter writes lines to w.
func NewTextWriter(w io.Writer) *TextWriter { return &TextWriter{textWriter{w: w}} }

// Printf writes a formatted line (or part), unless a write has failed.
func (t *TextWriter) Printf(format string, args ...any) { t.printf(format, args...) }

// Err is the first write error, nil when none.
func (t *TextWriter) Err() error { return t.err }

func (t *textWriter) field(name, format string, args ...any) {
	t.printf("  %-12s %s\n", name, fmt.Sprintf(format, args...))
}

func (p *Process) write(t *textWriter) {
	if p.Damaged != "" {
		t.printf("%s\n  !! DAMAGED: %s; the other processes are read\n", p.Name, p.Damaged)
		return
	}
	t.printf("%s  %spid %d (parent %d) on %s\n", p.Name, p.rankText(), p.PID, p.PPID, p.Host)
	p.writeProblems(t)
	t.field("command", "%s", strings.Join(p.Argv, " "))
	if p.Python != "" {
		t.field("python", "%s", p.Python)
	}
	timing := onOff(p.GPUTiming)
	if p.TimingSerial {
		timing = "serial (kernels ran one at a time)"
	}
	if p.TimingSample != "" {
		timing = "sampled (" + p.TimingSample + ")"
	}
	if p.TimingSteps != "" {
		timing = "by steps (" + p.TimingSteps + "; windows of " + p.TimingSample + " before a first step)"
	}
	t.field("recorder", "gpurr agent %s, CUDA driver %d, CUPTI %s, callstacks %s, GPU timing %s", p.AgentVersion, p.DriverVersion, p.CuptiPath, p.CallstackMode, timing)
	if p.KernelFilter != "" {
		t.field("kernels", "only those matching %q (%d launches filtered out, by design)", p.KernelFilter, p.LaunchesFiltered)
	}
	if p.CUPTIClient {
		dropped := ""
		if p.CUPTIClientDropped > 0 {
			dropped = fmt.Sprintf(", %d of its kinds NOT passed on (see the log)", p.CUPTIClientDropped)
		}
		t.field("profiler", "the program's own CUPTI client (torch.profiler or another) shared gpurr's subscription: %s passed on to it%s (the log names it)",
			Count(p.CUPTIClientRecords, "activity record"), dropped)
	}
	for _, d := range p.Devices {
		t.field(fmt.Sprintf("device %d", d.Ordinal), "%s, cc %s, %d SMs, %s, %s", d.Name, d.CC, d.SMs, FormatBytes(d.MemoryBytes), d.UUID)
	}
	t.field("span", "%s, first to last timestamp", formatNS(p.SpanNS))
	t.field("launches", "%d eager, %d captured into graphs, %d graph launches", p.Launches, p.Captured, p.GraphLaunches)
	if p.GraphBuilt+p.ConditionalNodes+p.MemoryNodes > 0 {
		t.field("graph API", "%s", p.graphAPI())
	}
	if p.DeviceLaunchModules > 0 {
		t.field("device launches", "%s whose kernels launch kernels from the device (dynamic parallelism): CUPTI does not see those launches, whose kernels' runs are not linked to one",
			Count(p.DeviceLaunchModules, "module"))
	}
	switch {
	case p.StepRange != "" && p.Steps == 0:
		t.field("steps", "none: no NVTX range matches the step range %q, every launch is step 0", p.StepRange)
	case p.StepRange != "":
		t.field("steps", "%s (NVTX ranges matching %q; gpurr query's launches.step numbers them)", Count(p.Steps, "training step"), p.StepRange)
	case p.Steps > 0:
		t.field("steps", "%s (torch.optim step() calls; gpurr query's launches.step numbers them)", Count(p.Steps, "training step"))
	}
	linked := "all linked to their launch"
	if p.UnlinkedRuns > 0 {
		linked = fmt.Sprintf("%d not linked to a launch (filtered, dropped or unknown)", p.UnlinkedRuns)
	}
	t.field("GPU", "%d kernel runs, %s; %s", p.KernelRuns, formatNS(p.GPUTimeNS), linked)
	if p.TimingSample != "" && p.Untimed > 0 {
		t.field("", "%s", p.timedShare())
	}
	t.field("kernels", "%d distinct", p.Kernels)
	if p.ModulesWithPTX > 0 {
		t.field("modules", "%d, %s; %d with their PTX kept (gpurr race)", p.Modules, FormatBytes(p.ModuleBytes), p.ModulesWithPTX)
	} else {
		t.field("modules", "%d, %s", p.Modules, FormatBytes(p.ModuleBytes))
	}
	if n := len(p.ModulesMissing); n > 0 {
		t.field("", "%s not in %s/ (deleted, or left out when the recording was copied): replay, extract, tune, race and probe need a launch's module",
			Count(n, "image"), "modules")
	}
	t.field("callstacks", "%d", p.Callstacks)
	p.Autograd.write(t)
	p.XLA.write(t)
	p.Ranges.writeField(t)
	p.Probes.write(t)
	p.Copies.write(t)
	p.writeOverhead(t)
	// Backpressure is counted as the agent's time, but it is the GPU or the writer being behind,
	// which a GPU-bound program would have waited for elsewhere anyway.
	if m := p.Memory; m != nil && p.AgentNS > 0 && m.StagingWaitNS > p.AgentNS/10 {
		if m.StagingWaitNS < p.AgentNS {
			t.field("", "of that, %s waiting for %s (the GPU or the writer behind: memory capture's backpressure)",
				formatNS(m.StagingWaitNS), m.waitedFor())
		} else {
			// The wait is counted whole, the time in launch callbacks from a sample of them.
			t.field("", "nearly all of that waiting for %s (%s in all; the GPU or the writer behind: memory capture's backpressure)",
				m.waitedFor(), formatNS(m.StagingWaitNS))
		}
	}
	p.AgentParts.write(t, p.Launches+p.Captured+p.GraphLaunches)
	p.Memory.write(t)
	writeKernels(t, "top kernels by count", p.TopByCount)
	writeKernels(t, "top kernels by GPU time", p.TopByTime)
	writeLines(t, p.TopLines)
	p.Copies.writeTop(t)
	p.Ranges.writeTop(t)
}

// writeOverhead says what the agent cost the program's threads: a launch's steady cost, and
// apart from it the one-time work (module loads, which copy megabytes of code, CUDA graph
// capture's node callbacks, allocations), which a short program's launches would otherwise
// seem to cost milliseconds each.
func (p *Process) writeOverhead(t *textWriter) {
	calls := p.Launches + p.Captured + p.GraphLaunches
	if calls == 0 || p.AgentNS == 0 {
		return
	}
	if p.AgentLaunchNS > 0 { // format 1.4: launches timed apart
		t.field("overhead", "%s per launch, steady (launch callbacks, timed on every 16th launch of a thread); %s once, in other callbacks (module loads, CUDA graph capture, ...)",
			formatNS(p.AgentLaunchNS/uint64(calls)), formatNS(p.AgentNS-min(p.AgentLaunchNS, p.AgentNS)))
		t.field("", "%s in all on the program's threads; CUPTI's own work not included", formatNS(p.AgentNS))
		return
	}
	t.field("overhead", "agent ran %s on the program's threads in all its callbacks: module loads, CUDA graph capture and other one-time work, with %s (CUPTI's own work not included)",
		formatNS(p.AgentNS), Count(calls, "launch"))
	t.field("", "no launch was timed apart (format 1.4 times every 16th launch of a thread), so a launch's steady cost is not known: %s per launch made is an upper bound, one-time work included",
		formatNS(p.AgentNS/uint64(calls)))
}

// writeLines writes the top lines; where some ran in backward, with a
// column of the GPU time of their backward kernels, which count at the
// forward line whose backward they compute.
func writeLines(t *textWriter, lines []LineUse) {
	if len(lines) == 0 || t.err != nil {
		return
	}
	backward := slices.ContainsFunc(lines, func(u LineUse) bool { return u.BackwardRuns > 0 })
	title, head := "graph replays count at their capture line", ""
	if backward {
		title, head = title+", backward kernels at their forward line", "in backward\t"
	}
	t.printf("\n  top lines of the program by GPU time (%s)\n", title)
	tab := tabwriter.NewWriter(t.w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tab, "    runs\tGPU time\t%s  line\n", head)
	for _, u := range lines {
		back := ""
		if backward {
			back = "-\t"
			if u.BackwardRuns > 0 {
				back = formatNS(u.BackwardGPUTimeNS) + "\t"
			}
		}
		fmt.Fprintf(tab, "    %d\t%s\t%s  %s\n", u.Runs, formatNS(u.GPUTimeNS), back, termsafe.String(shortenPath(u.Line, 100)))
	}
	t.err = tab.Flush()
}

// write says whether backward launches name their forward line: how many
// do, or why none does. Neither is a problem of the recording.
func (a *Autograd) write(t *textWriter) {
	if a == nil {
		return
	}
	torch := "torch " + cmp.Or(a.TorchVersion, "(version unknown)")
	switch {
	case !a.Linked:
		t.field("autograd", "not linked (%s): backward kernels are not attributed to their forward lines", cmp.Or(a.Reason, torch))
	case a.BackwardLaunches == 0:
		t.field("autograd", "%s: no launch ran in backward", torch)
	case a.BackwardLinked == a.BackwardLaunches:
		t.field("autograd", "%s: %d launches ran in backward, all linked to their forward line", torch, a.BackwardLaunches)
	default:
		t.field("autograd", "%s: %d launches ran in backward, %d linked to their forward line, %d not (no forward launch found for their node)",
			torch, a.BackwardLaunches, a.BackwardLinked, a.BackwardLaunches-a.BackwardLinked)
	}
}

// shortenPath keeps the end of a "file:line function" text, where the
// file name and line are, when it is too long.
func shortenPath(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return "..." + string(r[len(r)-n+3:])
	}
	return s
}

func (p *Process) rankText() string {
	if p.Rank == nil {
		return ""
	}
	s := fmt.Sprintf("rank %d", *p.Rank)
	if p.WorldSize != nil {
		s += fmt.Sprintf(" of %d", *p.WorldSize)
	}
	if p.LocalRank != nil {
		s += fmt.Sprintf(" (local %d)", *p.LocalRank)
	}
	return s + "  "
}

func (p *Process) writeProblems(t *textWriter) {
	switch {
	case p.Truncated:
		t.printf("  !! TRUNCATED: the events file ends inside a frame (the program was killed mid-write); below is what was written\n")
	case !p.Complete:
		t.printf("  !! INCOMPLETE: no end record (the program was killed, or is still running)\n")
	}
	if len(p.Losses) > 0 {
		var parts []string
		for _, c := range p.Losses {
			parts = append(parts, fmt.Sprintf("%s %d", c.Name, c.Value))
		}
		t.printf("  !! LOST OR FAILED: %s\n", strings.Join(parts, ", "))
	}
	for _, f := range p.Files {
		t.printf("  !! FILE MISSING OR DAMAGED: %s\n", f)
	}
	p.Memory.writeProblems(t)
	p.Hang.write(t)
	p.Chunks.write(t)
	if len(p.Errors) > 0 {
		t.printf("  !! last errors in the agent's log:\n")
		for _, e := range p.Errors {
			t.printf("       +%s  %s\n", formatNS(e.AtNS), e.Message)
		}
	}
	if len(p.Problems()) == 0 {
		t.field("status", "complete (%s), nothing lost", p.EndReason)
	}
}

func writeKernels(t *textWriter, title string, uses []KernelUse) {
	if len(uses) == 0 || t.err != nil {
		return
	}
	t.printf("\n  %s\n", title)
	tab := tabwriter.NewWriter(t.w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tab, "    runs\tlaunches\tGPU time\t  kernel\n")
	for _, u := range uses {
		fmt.Fprintf(tab, "    %d\t%d\t%s\t  %s\n", u.Runs, u.Launches, formatNS(u.GPUTimeNS), termsafe.String(u.Name))
	}
	t.err = tab.Flush()
}

// formatNS writes a duration with three or four significant digits.
func formatNS(ns uint64) string {
	d := time.Duration(ns)
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", ns)
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(ns)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(ns)/1e6)
	default:
		return fmt.Sprintf("%.3fs", float64(ns)/1e9)
	}
}

// FormatBytes writes a byte count with a binary prefix: 512 B, 4.0 MiB.
func FormatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, prefix := float64(n)/unit, 0
	for v >= unit && prefix < 4 {
		v /= unit
		prefix++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[prefix])
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// fewShown is how many items Few lists: a job of thousands of ranks gets a count of the
// rest, not a line of tens of kilobytes.
const fewShown = 8

// Few joins the first few of items with sep, and a count of the rest: "a, b, c, and 9 more".
func Few(items []string, sep string) string {
	if len(items) > fewShown {
		items = append(items[:fewShown:fewShown], fmt.Sprintf("and %d more", len(items)-fewShown))
	}
	return strings.Join(items, sep)
}

// SeqList writes launch numbers, comma-separated: the first max of them, then "...".
func SeqList(seqs []uint64, max int) string {
	var parts []string
	for i, s := range seqs {
		if i == max {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, strconv.FormatUint(s, 10))
	}
	return strings.Join(parts, ", ")
}

// Count writes n and the noun, plural unless n is 1: "1 process", "3 launches".
func Count[N ~int | ~int64 | ~uint64 | ~uint32](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	switch {
	case strings.HasSuffix(noun, "ss"), strings.HasSuffix(noun, "ch"), strings.HasSuffix(noun, "sh"), strings.HasSuffix(noun, "x"):
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// write says where a launch's agent time went, per launch made, and what
// callstacks seen for the first time cost.
func (a *AgentParts) write(t *textWriter, calls int) {
	if a == nil || calls <= 0 {
		return
	}
	per := func(ns uint64) string { return formatNS(ns / uint64(calls)) }
	line := fmt.Sprintf("callstacks %s, autograd context %s, ring %s", per(a.StackNS), per(a.AutogradNS), per(a.RingNS))
	if a.MemoryNS > 0 {
		line += fmt.Sprintf(", memory capture %s (launching its hash kernels %s)", per(a.MemoryNS), per(a.MemoryLaunchNS))
	}
	line += " per launch"
	if a.StacksNew > 0 {
		line += fmt.Sprintf("; %d callstacks met for the first time took %s (%s each)", a.StacksNew, formatNS(a.StackNewNS), formatNS(a.StackNewNS/a.StacksNew))
	}
	t.field("agent time", "%s", line)
}

func (x *XLA) write(t *textWriter) {
	if x == nil {
		return
	}
	switch {
	case x.Error != "":
		t.field("XLA", "%s: XLA's kernels show no lines", x.Error)
	case x.Modules > 0:
		t.field("XLA", "%d optimized modules dumped; %d launches at the lines XLA's metadata gives", x.Modules, x.Lines)
	}
	if x.Compile > 0 {
		t.field("compile", "%d launches made while XLA compiled and autotuned (launches.compile; diff and nan leave them out)", x.Compile)
	}
}

// timedShare says which share of the eager launches sampled GPU timing timed, and how the GPU
// time above scales to all of them.
func (p *Process) timedShare() string {
	timed := p.Launches - p.Untimed
	where := "in windows of " + p.TimingSample
	if len(p.TimedSteps) > 0 {
		where = "steps " + stepList(p.TimedSteps)
	}
	share := fmt.Sprintf("%d of %d eager launches, %.0f%%", timed, p.Launches, 100*float64(timed)/float64(p.Launches))
	if p.GPUTimeScaledNS == 0 {
		return fmt.Sprintf("timed: %s (%s); kernel times and counts above are of those", share, where)
	}
	return fmt.Sprintf("timed: %s over %s (%s), scaled to all: ~%s; kernel times and counts are of the timed ones",
		formatNS(p.GPUTimeNS), share, where, formatNS(p.GPUTimeScaledNS))
}

// stepList writes sorted step numbers as runs, "0-2, 10, 20"; past eight runs, the first
// seven, an ellipsis and the last.
func stepList(steps []int) string {
	var runs []string
	for i := 0; i < len(steps); {
		j := i
		for j+1 < len(steps) && steps[j+1] == steps[j]+1 {
			j++
		}
		if j == i {
			runs = append(runs, strconv.Itoa(steps[i]))
		} else {
			runs = append(runs, fmt.Sprintf("%d-%d", steps[i], steps[j]))
		}
		i = j + 1
	}
	if len(runs) > 8 {
		runs = append(runs[:7:7], "...", runs[len(runs)-1])
	}
	return strings.Join(runs, ", ")
}
