package info

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func summarizeVariant(t *testing.T, v testrec.Variant) *Report {
	t.Helper()
	set := testrec.Open(t, v)
	r, err := Summarize(set, set.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestProblems(t *testing.T) {
	for v, want := range map[testrec.Variant]string{
		testrec.Good:       "",
		testrec.Incomplete: "incomplete",
		testrec.Truncated:  "truncated",
		testrec.Lossy:      "launches_dropped activities_dropped callstacks_failed modules_failed errors ring_bytes_dropped",
		testrec.Memory:     "errors memory_states_lost memory_stopped skipped_ring_too_small",
		testrec.Hang:       "incomplete errors hang",
	} {
		r := summarizeVariant(t, v)
		if got := strings.Join(r.Processes[0].Problems(), " "); got != want {
			t.Errorf("%s: problems %q, want %q", v, got, want)
		}
		if got := r.Processes[1].Problems(); len(got) != 0 {
			t.Errorf("%s: the whole rank has problems %q", v, got)
		}
	}
}

// TestEveryLossCounted sets each loss counter alone: a counter added to
// Stats later must show up without a change here.
func TestEveryLossCounted(t *testing.T) {
	fields := (&pb.Stats{}).ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := string(fd.Name())
		if fd.Kind() != protoreflect.Uint64Kind {
			continue // memory_stopped, text: a problem of its own (TestMemoryProblems)
		}
		s := &pb.Stats{}
		s.ProtoReflect().Set(fd, protoreflect.ValueOfUint64(7))
		got := losses(s)
		isLoss := strings.HasSuffix(name, "_dropped") || strings.HasSuffix(name, "_failed") || name == "errors"
		if isLoss != (len(got) == 1) {
			t.Errorf("%s: losses %v", name, got)
		}
	}
}

func TestMemorySummary(t *testing.T) {
	r := summarizeVariant(t, testrec.Memory)
	snap, hash := r.Processes[0].Memory, r.Processes[1].Memory
	if snap == nil || hash == nil || snap.Mode != "snapshot" || hash.Mode != "hash" {
		t.Fatalf("memory summaries %+v, %+v", snap, hash)
	}
	want := []Counter{{"hash", 8}, {"snapshot", 2}, {"skipped_capture", 2}, {"skipped_ring_too_small", 1}, {"skipped_stopped", 1}}
	if !slices.Equal(snap.Launches, want) {
		t.Errorf("snapshot rank launches %v, want %v", snap.Launches, want)
	}
	if snap.MemoryLaunches != 10 || snap.MemorySkipped != 4 || snap.Snapshots != 4 || snap.ChunksTransferred != 20 || snap.ChunksTotal != 72 {
		t.Errorf("snapshot rank counters %+v", snap)
	}
	if len(snap.LostReasons) != 1 || snap.LostReasons[0].Value != 1 {
		t.Errorf("lost reasons %v", snap.LostReasons)
	}
	if got := hash.problems(); len(got) != 0 {
		t.Errorf("hash rank has problems %v", got)
	}
	if summarizeVariant(t, testrec.Good).Processes[0].Memory != nil {
		t.Errorf("a recording without memory capture has a memory summary")
	}
}

// TestMemoryProblems: every memory status that means a launch should have
// been captured and was not is a problem; skipping stream capture, launches
// without regions and launches after a stop (the stop is the problem) are not.
func TestMemoryProblems(t *testing.T) {
	for status, want := range map[pb.MemoryPlan_Status]string{
		pb.MemoryPlan_HASH:                   "",
		pb.MemoryPlan_SNAPSHOT:               "",
		pb.MemoryPlan_SKIPPED_CAPTURE:        "",
		pb.MemoryPlan_SKIPPED_NO_REGIONS:     "",
		pb.MemoryPlan_SKIPPED_STOPPED:        "",
		pb.MemoryPlan_SKIPPED_RING_TOO_SMALL: "skipped_ring_too_small",
		pb.MemoryPlan_SKIPPED_RING_FULL:      "skipped_ring_full",
		pb.MemoryPlan_SKIPPED_ERROR:          "skipped_error",
	} {
		d := &recording.Data{
			Process:  &pb.Process{Memory: &pb.MemoryConfig{Mode: "hash"}},
			Launches: []*pb.Launch{{Seq: 1, Memory: &pb.MemoryPlan{Status: status}}},
			Stats:    &pb.Stats{},
			End:      &pb.End{},
		}
		p := summarize("p", d, optimizerSteps(t))
		if got := strings.Join(p.Problems(), " "); got != want {
			t.Errorf("%v: problems %q, want %q", status, got, want)
		}
		var out strings.Builder
		p.write(&textWriter{w: &out})
		if loud := strings.Contains(out.String(), "!! MEMORY NOT CAPTURED: 1 launch "); loud != (want != "") {
			t.Errorf("%v: report says\n%s", status, out.String())
		}
	}
	d := &recording.Data{
		Process: &pb.Process{Memory: &pb.MemoryConfig{Mode: "snapshot"}},
		Memory:  []*pb.MemoryState{{LaunchSeq: 1, Lost: true}},
		Stats:   &pb.Stats{MemoryStatesLost: 1, MemoryStopped: "fatal"},
		End:     &pb.End{},
	}
	p := summarize("p", d, optimizerSteps(t))
	if got := strings.Join(p.Problems(), " "); got != "memory_states_lost memory_stopped" {
		t.Errorf("problems %q", got)
	}
	var out strings.Builder
	p.write(&textWriter{w: &out})
	for _, line := range []string{"  !! MEMORY CAPTURE STOPPED: fatal; 0 launches made after it without memory states\n",
		"  !! MEMORY STATES LOST: 1 enqueued on the GPU but never recorded (no reason given: 1)\n"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("report lacks %q:\n%s", line, out.String())
		}
	}
}

// Copy states (format 1.17) are counted, and those lost are a problem, by reason.
func TestCopyStatesCounted(t *testing.T) {
	d := &recording.Data{
		Process: &pb.Process{Memory: &pb.MemoryConfig{Mode: "hash"}},
		CopyStates: []*pb.MemoryState{{LaunchSeq: 1, Point: pb.MemoryState_COPY, Regions: []*pb.RegionState{{}}},
			{LaunchSeq: 2, Point: pb.MemoryState_COPY, Lost: true, LostReason: "memory capture had stopped"}},
		Stats: &pb.Stats{},
		End:   &pb.End{},
	}
	p := summarize("p", d, optimizerSteps(t))
	if got := strings.Join(p.Problems(), " "); got != "copy_states_lost" {
		t.Errorf("problems %q, want copy_states_lost", got)
	}
	var out strings.Builder
	p.write(&textWriter{w: &out})
	for _, line := range []string{"    copies       1 state of what copies and memsets wrote, 1 lost\n",
		"  !! COPY STATES LOST: 1 state of copies and memsets into device memory not taken (memory capture had stopped: 1): readers take what they wrote for unknown\n"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("report lacks %q:\n%s", line, out.String())
		}
	}
}

func TestTotals(t *testing.T) {
	r := summarizeVariant(t, testrec.Lossy)
	if r.Total == nil || r.Total.Processes != 2 || r.Total.WithProblems != 1 || r.Total.Kernels != 4 {
		t.Fatalf("total %+v", r.Total)
	}
	p := r.Processes[1]
	if r.Total.Launches != r.Processes[0].Launches+p.Launches || p.Launches != 12 || p.Captured != 2 || p.GraphLaunches != 2 {
		t.Errorf("launch counts: total %+v, rank 1 %d eager %d captured %d graph", r.Total, p.Launches, p.Captured, p.GraphLaunches)
	}
	if p.TopByCount[0].Runs != 6 || !strings.HasPrefix(p.TopByTime[0].Name, "sm90_xmma_gemm") {
		t.Errorf("top kernels: by count %+v, by time %+v", p.TopByCount[0], p.TopByTime[0])
	}
}

func TestShorten(t *testing.T) {
	long := strings.Repeat("k", 100)
	if got := shorten(long, 80); len(got) != 80 || !strings.HasSuffix(got, "...") {
		t.Errorf("shorten = %q", got)
	}
	if got := shorten(strings.Repeat("µ", 50), 80); !strings.HasSuffix(got, "µ...") {
		t.Errorf("shorten split a rune: %q", got)
	}
	if got := shorten("", 80); got != "(unknown kernel)" {
		t.Errorf("shorten empty = %q", got)
	}
}

func TestFormats(t *testing.T) {
	for ns, want := range map[uint64]string{0: "0ns", 999: "999ns", 1500: "1.5µs", 2_345_000: "2.35ms", 3_000_000_000: "3.000s"} {
		if got := formatNS(ns); got != want {
			t.Errorf("formatNS(%d) = %q, want %q", ns, got, want)
		}
	}
	for n, want := range map[uint64]string{12: "12 B", 36 << 10: "36.0 KiB", 85_520_809_984: "79.6 GiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestAutograd: backward kernels count at the forward line whose backward
// they compute; the summary counts backward launches and linked ones, or
// says why none is linked; none of it is a problem.
func TestAutograd(t *testing.T) {
	r := summarizeVariant(t, testrec.Autograd)
	linked, unlinked := r.Processes[0], r.Processes[1]
	if a := linked.Autograd; a == nil || !a.Linked || a.BackwardLaunches != 6 || a.BackwardLinked != 5 || a.TorchVersion != "2.11.0+cu130" {
		t.Errorf("linked process: autograd %+v", a)
	}
	if a := unlinked.Autograd; a == nil || a.Linked || a.BackwardLaunches != 0 || !strings.Contains(a.Reason, "not verified") {
		t.Errorf("unlinked process: autograd %+v", a)
	}
	for _, p := range r.Processes {
		if len(p.Problems()) != 0 {
			t.Errorf("%s: problems %v", p.Name, p.Problems())
		}
	}
	// The Linear layer's forward gemm and its two backward gemms (41.5 µs
	// each) count at its line, the three eager gemms before them too.
	i := slices.IndexFunc(linked.TopLines, func(u LineUse) bool { return u.Line == "/home/ada/train.py:25 Model.forward" })
	if i < 0 || linked.TopLines[i].Runs != 6 || linked.TopLines[i].BackwardRuns != 2 || linked.TopLines[i].BackwardGPUTimeNS != 83_000 {
		t.Errorf("top lines %+v", linked.TopLines)
	}
	for _, u := range unlinked.TopLines {
		if u.BackwardRuns != 0 {
			t.Errorf("unlinked process: line %q has backward runs", u.Line)
		}
	}
	if a := summarizeVariant(t, testrec.Good).Processes[0].Autograd; a != nil {
		t.Errorf("a process without torch: autograd %+v", a)
	}
}

// TestDamagedAutograd: backward launches whose forward callstack the
// recording lacks count as not linked and at no forward line.
func TestDamagedAutograd(t *testing.T) {
	d := &recording.Data{
		Process:    &pb.Process{Autograd: &pb.AutogradInfo{Linked: true}},
		Callstacks: []*pb.Callstack{{Id: 5, Frames: []*pb.Frame{{Kind: pb.Frame_PYTHON, File: "model.py", Line: 3, Function: "f"}}}},
		Launches: []*pb.Launch{
			{Seq: 1, CorrelationId: 1, Autograd: &pb.Autograd{BackwardNode: "MmBackward0", ForwardCallstackId: 99}},
			{Seq: 2, CorrelationId: 2, Autograd: &pb.Autograd{BackwardNode: "MmBackward0", ForwardCallstackId: 5}},
		},
		Activities: []*pb.KernelActivity{{CorrelationId: 1, StartNs: 10, EndNs: 20}, {CorrelationId: 2, StartNs: 30, EndNs: 50}},
	}
	p := summarize("p", d, optimizerSteps(t))
	if a := p.Autograd; a.BackwardLaunches != 2 || a.BackwardLinked != 1 {
		t.Errorf("autograd %+v", a)
	}
	if len(p.TopLines) != 1 || p.TopLines[0].Line != "model.py:3 f" || p.TopLines[0].BackwardGPUTimeNS != 20 {
		t.Errorf("top lines %+v", p.TopLines)
	}
}

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		noun string
		want string
	}{{1, "process", "1 process"}, {2, "process", "2 processes"}, {0, "launch", "0 launches"},
		{1, "launch", "1 launch"}, {3, "kernel", "3 kernels"}, {2, "problem", "2 problems"}} {
		if got := Count(c.n, c.noun); got != c.want {
			t.Errorf("Count(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}

func TestModulesWithPTX(t *testing.T) {
	d := &recording.Data{Process: &pb.Process{Pid: 1}, Stats: &pb.Stats{},
		Modules: []*pb.Module{{Sha256: "a", Size: 1024, Ptx: "triton-cache"}, {Sha256: "b", Size: 2048}}}
	p := summarize("box-1", d, optimizerSteps(t))
	if p.Modules != 2 || p.ModulesWithPTX != 1 {
		t.Fatalf("%d modules, %d with PTX; want 2 and 1", p.Modules, p.ModulesWithPTX)
	}
	var b strings.Builder
	if err := (&Report{Recording: "r", Processes: []*Process{p}}).WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "modules      2, 3.0 KiB; 1 with their PTX kept (gpurr race)") {
		t.Errorf("report:\n%s", b.String())
	}
}

// Sampled GPU timing: the process says so, counts the launches made between windows, and the
// text says which share of the launches the kernel figures rest on.
func TestSampledTiming(t *testing.T) {
	proc := &pb.Process{Pid: 7, Argv: []string{"python", "train.py"}, GpuTiming: true, GpuTimingSample: "20ms/200ms"}
	kernel := &pb.Kernel{Id: 1, Name: "add_kernel"}
	b := &pb.Batch{Process: proc, Kernels: []*pb.Kernel{kernel}}
	for seq := uint64(1); seq <= 4; seq++ {
		l := &pb.Launch{Seq: seq, KernelId: 1, CorrelationId: uint32(seq), HostNs: 100 * seq, Untimed: seq > 1}
		b.Launches = append(b.Launches, l)
		if !l.Untimed {
			b.Activities = append(b.Activities, &pb.KernelActivity{CorrelationId: uint32(seq), Name: "add_kernel", StartNs: 100*seq + 10, EndNs: 100*seq + 20})
		}
	}
	set := testrec.OpenBatches(t, b, &pb.Batch{End: &pb.End{EndNs: 1000, Reason: "exit"}})
	r, err := Summarize(set, set.Dir)
	if err != nil {
		t.Fatal(err)
	}
	p := r.Processes[0]
	if p.TimingSample != "20ms/200ms" || p.Untimed != 3 || p.Launches != 4 || p.KernelRuns != 1 {
		t.Fatalf("sample %q, %d untimed of %d launches, %d runs", p.TimingSample, p.Untimed, p.Launches, p.KernelRuns)
	}
	var text strings.Builder
	if err := r.WriteTable(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GPU timing sampled (20ms/200ms)", "timed: 10ns over 1 of 4 eager launches, 25% (in windows of 20ms/200ms), scaled to all: ~40ns"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("info lacks %q:\n%s", want, text.String())
		}
	}
	if len(p.Problems()) != 0 {
		t.Errorf("sampling is no problem, yet %v", p.Problems())
	}
}

// A training loop: info counts the optimizer steps its launches went through.
func TestSteps(t *testing.T) {
	optim := &pb.Callstack{Id: 2, Frames: []*pb.Frame{{Kind: pb.Frame_PYTHON, File: "/venv/lib/python3.12/site-packages/torch/optim/adam.py", Function: "step"}}}
	b := &pb.Batch{Process: &pb.Process{Pid: 7}, Callstacks: []*pb.Callstack{{Id: 1}, optim}}
	for i, cs := range []uint64{1, 2, 1, 2, 2, 1, 2} {
		b.Launches = append(b.Launches, &pb.Launch{Seq: uint64(i + 1), CallstackId: cs})
	}
	set := testrec.OpenBatches(t, b, &pb.Batch{End: &pb.End{EndNs: 1000, Reason: "exit"}})
	r, err := Summarize(set, set.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Processes[0]; p.Steps != 3 {
		t.Errorf("%d steps, want 3", p.Steps)
	}
	var text strings.Builder
	if err := r.WriteTable(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "steps        3 training steps (torch.optim step() calls") {
		t.Errorf("info lacks the steps:\n%s", text.String())
	}
}

// optimizerSteps numbers steps by torch.optim optimizer steps.
func optimizerSteps(t *testing.T) *recording.Stepper {
	t.Helper()
	s, err := recording.NewStepper("")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A crafted recording's strings (host, argv, kernel name, NVTX message, Python line, log) reach
// the text report escaped: no ESC, BEL or CR, and no line of the recording's making.
func TestTextEscapesControls(t *testing.T) {
	out := tableOf(t, testrec.HostileBatches()...)
	if strings.ContainsAny(out, "\x1b\x07\r") || strings.Contains(out, "\ngpurr: FORGED") {
		t.Errorf("controls of the recording reach the report:\n%q", out)
	}
	escaped := `\x1b]0;owned\a\r\ngpurr: FORGED\x1b[2J`
	for _, field := range []string{"on box" + escaped, "python train.py" + escaped, "add_kernel" + escaped, "failed" + escaped,
		`step\x1b]N;owned\a\r\ngpurr: FORGED\x1b[NJ`} { // range names fold digits to N
		if !strings.Contains(out, field) {
			t.Errorf("the report lacks %q:\n%s", field, out)
		}
	}
}

// diff, nan and verify write their text reports through TextWriter: a kernel name or range
// from the recording prints escaped, the report's own newlines as they are.
func TestTextWriterEscapes(t *testing.T) {
	var b strings.Builder
	tw := NewTextWriter(&b)
	tw.Printf("  kernel   %s (stream %d)\n", "add"+testrec.Hostile, 7)
	if want := "  kernel   add\\x1b]0;owned\\a\\r\\ngpurr: FORGED\\x1b[2J (stream 7)\n"; b.String() != want {
		t.Errorf("%q, want %q", b.String(), want)
	}
}

// The overhead line says what it measures: a launch's steady cost apart from one-time work
// (module loads, CUDA graph capture) when the agent timed launches apart (format 1.4), and that
// all the callbacks' time over the launches is an upper bound when it did not: 53 ms over 20
// launches of a graph recording is not 2.65 ms a launch.
func TestOverheadSaysWhatItMeasures(t *testing.T) {
	for _, c := range []struct {
		stats      *pb.Stats
		want, lack []string
	}{
		{&pb.Stats{AgentCallbackNs: 53_000_000},
			[]string{"overhead     agent ran 53.00ms on the program's threads in all its callbacks: module loads, CUDA graph capture and other one-time work, with 20 launches",
				"2.65ms per launch made is an upper bound, one-time work included"},
			[]string{"2.65ms per launch ("}},
		{&pb.Stats{AgentCallbackNs: 53_000_000, AgentLaunchNs: 200_000},
			[]string{"overhead     10.0µs per launch, steady (launch callbacks, timed on every 16th launch of a thread); 52.80ms once, in other callbacks (module loads, CUDA graph capture, ...)",
				"53.00ms in all on the program's threads"},
			nil},
	} {
		b := &pb.Batch{Process: &pb.Process{Pid: 7}, Kernels: []*pb.Kernel{{Id: 1, Name: "k"}}}
		for seq := uint64(1); seq <= 12; seq++ {
			b.Launches = append(b.Launches, &pb.Launch{Seq: seq, KernelId: 1, CorrelationId: uint32(seq), HostNs: 100 * seq, Captured: seq > 8})
		}
		for seq := uint64(13); seq <= 20; seq++ {
			b.GraphLaunches = append(b.GraphLaunches, &pb.GraphLaunch{Seq: seq, CorrelationId: uint32(seq), HostNs: 100 * seq})
		}
		text := tableOf(t, b, &pb.Batch{Stats: c.stats, End: &pb.End{EndNs: 5000, Reason: "exit"}})
		for _, want := range c.want {
			if !strings.Contains(text, want) {
				t.Errorf("info lacks %q:\n%s", want, text)
			}
		}
		for _, lack := range c.lack {
			if strings.Contains(text, lack) {
				t.Errorf("info says %q:\n%s", lack, text)
			}
		}
	}
}

// tableOf is info's text report of a recording of one process that wrote batches.
func tableOf(t *testing.T, batches ...*pb.Batch) string {
	t.Helper()
	set := testrec.OpenBatches(t, batches...)
	r, err := Summarize(set, set.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := r.WriteTable(&text); err != nil {
		t.Fatal(err)
	}
	return text.String()
}
