package trace

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/internal/trace/internal/perfettopb"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

var update = flag.Bool("update", false, "rewrite testdata/ from the actual output")

// golden compares got with testdata/name; -update rewrites it.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./trace -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (go test ./trace -update rewrites it):\n%s", path, testrec.LineDiff(string(want), string(got)))
	}
}

func write(t testing.TB, f Format, procs []*recording.Process, o Options) ([]byte, Stats) {
	t.Helper()
	var buf bytes.Buffer
	st, err := Write(&buf, f, procs, o)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), st
}

func validate(t testing.TB, b []byte) (*ChromeFile, ChromeSummary) {
	t.Helper()
	f, sum, err := ValidateChrome(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("invalid Chrome trace: %v", err)
	}
	return f, sum
}

// The synthetic recording has, per rank: 10 eager launches at the start,
// a graph captured at train.py:33 (gemm and triton nodes) and replayed
// twice from train.py:37, then two more launches.
func TestChromeGolden(t *testing.T) {
	set := testrec.Open(t, testrec.Good)
	out, st := write(t, Chrome, set.Processes, Options{})
	golden(t, "good.json", out)
	f, sum := validate(t, out)
	want := Stats{Processes: 2, Calls: 32, Kernels: 32, GraphKernels: 8, Attributed: 8, Flows: 32, Ranges: 6, Selected: 64}
	if st.End <= 0 || st.Shortfalls != nil {
		t.Errorf("timeline end %v, shortfalls %q: want an end and none", st.End, st.Shortfalls)
	}
	if st.End, st.Shortfalls = 0, nil; !reflect.DeepEqual(st, want) {
		t.Errorf("stats %+v, want %+v", st, want)
	}
	if sum.ByCat["graph_kernel"] != 8 || sum.ByCat["kernel"] != 24 || sum.ByCat["launch"] != 28 || sum.ByCat["graph_launch"] != 4 {
		t.Errorf("slices by category %v", sum.ByCat)
	}
	// 12 eager kernels per rank end their own flow; each rank's 2 replays
	// fan out to 2 kernels each.
	if sum.Flows != 28 || sum.FlowEnds != 32 || sum.Processes != 2 {
		t.Errorf("summary %+v", sum)
	}
	for _, e := range f.TraceEvents {
		if e.Cat != "graph_kernel" {
			continue
		}
		line, _ := e.Args["python_line"].(string)
		replay, _ := e.Args["replayed_at"].(string)
		if line != "/home/ada/train.py:33 capture_step" || replay != "/home/ada/train.py:37 replay_step" || !e.FlowIn {
			t.Errorf("graph kernel %q: python_line %q, replayed_at %q, flow_in %v", e.Name, line, replay, e.FlowIn)
		}
	}
}

// perfettoText decodes a Perfetto trace with the pinned protos and writes
// it one packet a line, names resolved through the sequence's interning
// tables; it fails on an id used before it was defined, a slice end with
// no begin on its track, a track event on an undeclared track, or a flow
// that ends where none started.
func perfettoText(t *testing.T, b []byte) string {
	t.Helper()
	var tr perfettopb.Trace
	if err := proto.Unmarshal(b, &tr); err != nil {
		t.Fatalf("the published protos do not decode it: %v", err)
	}
	names, cats, annos := map[uint64]string{}, map[uint64]string{}, map[uint64]string{}
	tracks := map[uint64]string{}
	open := map[uint64]int{}
	flows := map[uint64]bool{}
	var out strings.Builder
	for i, p := range tr.GetPacket() {
		if i == 0 && p.GetSequenceFlags()&uint32(perfettopb.TracePacket_SEQ_INCREMENTAL_STATE_CLEARED) == 0 {
			t.Fatal("first packet does not clear the sequence's incremental state")
		}
		if p.GetTrustedPacketSequenceId() != 1 {
			t.Fatalf("packet %d on sequence %d", i, p.GetTrustedPacketSequenceId())
		}
		for _, e := range p.GetInternedData().GetEventNames() {
			names[e.GetIid()] = e.GetName()
		}
		for _, e := range p.GetInternedData().GetEventCategories() {
			cats[e.GetIid()] = e.GetName()
		}
		for _, e := range p.GetInternedData().GetDebugAnnotationNames() {
			annos[e.GetIid()] = e.GetName()
		}
		if d := p.GetTrackDescriptor(); d != nil {
			name := d.GetName()
			switch {
			case d.GetProcess() != nil:
				name = fmt.Sprintf("process pid=%d %q %q", d.GetProcess().GetPid(), d.GetProcess().GetProcessName(), d.GetProcess().GetCmdline())
			case d.GetThread() != nil:
				name = fmt.Sprintf("thread pid=%d tid=%d %q", d.GetThread().GetPid(), d.GetThread().GetTid(), d.GetThread().GetThreadName())
			default:
				if _, ok := tracks[d.GetParentUuid()]; !ok {
					t.Fatalf("track %x names parent %x, not declared", d.GetUuid(), d.GetParentUuid())
				}
				name = fmt.Sprintf("track parent=%x %q", d.GetParentUuid(), name)
			}
			tracks[d.GetUuid()] = name
			fmt.Fprintf(&out, "track %x %s\n", d.GetUuid(), name)
			continue
		}
		e := p.GetTrackEvent()
		if e == nil {
			continue
		}
		if _, ok := tracks[e.GetTrackUuid()]; !ok {
			t.Fatalf("packet %d: event on undeclared track %x", i, e.GetTrackUuid())
		}
		lookup := func(table map[uint64]string, iid uint64) string {
			s, ok := table[iid]
			if !ok {
				t.Fatalf("packet %d: interned id %d used before it was defined", i, iid)
			}
			return s
		}
		switch e.GetType() {
		case perfettopb.TrackEvent_TYPE_SLICE_END:
			if open[e.GetTrackUuid()] == 0 {
				t.Fatalf("packet %d: slice end without a begin on track %x", i, e.GetTrackUuid())
			}
			open[e.GetTrackUuid()]--
			fmt.Fprintf(&out, "%d end %x\n", p.GetTimestamp(), e.GetTrackUuid())
			continue
		case perfettopb.TrackEvent_TYPE_SLICE_BEGIN:
			open[e.GetTrackUuid()]++
		}
		var args []string
		for _, a := range e.GetDebugAnnotations() {
			v := a.GetStringValue()
			if a.GetStringValue() == "" {
				v = fmt.Sprint(a.GetIntValue())
			}
			args = append(args, lookup(annos, a.GetNameIid())+"="+strings.ReplaceAll(v, "\n", " | "))
		}
		for _, id := range e.GetFlowIds() {
			flows[id] = true
			args = append(args, fmt.Sprintf("flow=%x", id))
		}
		for _, id := range e.GetTerminatingFlowIds() {
			if !flows[id] {
				t.Fatalf("packet %d: flow %x ends before any event started it", i, id)
			}
			args = append(args, fmt.Sprintf("flow_end=%x", id))
		}
		var cs []string
		for _, c := range e.GetCategoryIids() {
			cs = append(cs, lookup(cats, c))
		}
		fmt.Fprintf(&out, "%d %s %x %s [%s] %s\n", p.GetTimestamp(), strings.TrimPrefix(e.GetType().String(), "TYPE_"),
			e.GetTrackUuid(), lookup(names, e.GetNameIid()), strings.Join(cs, ","), strings.Join(args, " "))
	}
	for uuid, n := range open {
		if n != 0 {
			t.Fatalf("track %x: %d slices never end", uuid, n)
		}
	}
	return out.String()
}

func TestPerfettoDecodes(t *testing.T) {
	set := testrec.Open(t, testrec.Good)
	out, st := write(t, Perfetto, set.Processes, Options{})
	text := perfettoText(t, out)
	golden(t, "good.perfetto.txt", []byte(text))
	if st.Kernels != 32 || st.Flows != 32 {
		t.Errorf("stats %+v", st)
	}
	n := 0
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, "[graph_kernel]") && strings.Contains(line, "python_line=/home/ada/train.py:33 capture_step") {
			n++
		}
	}
	if n != 8 {
		t.Errorf("%d graph kernels carry the capture-time line, want 8", n)
	}
}

// gpurr's own kernels (memory capture) are on a track of their own, one
// per device, and do not count as the program's.
func TestOwnKernels(t *testing.T) {
	set := testrec.Open(t, testrec.Memory)
	out, st := write(t, Chrome, set.Processes, Options{})
	f, sum := validate(t, out)
	if st.OwnKernels == 0 || sum.ByCat["gpurr"] != st.OwnKernels || st.Kernels != 32 {
		t.Fatalf("stats %+v, categories %v", st, sum.ByCat)
	}
	tracks := map[[2]int64]string{}
	own := map[[2]int64]bool{}
	for _, e := range f.TraceEvents {
		if e.Name == "thread_name" {
			tracks[[2]int64{e.Pid, e.Tid}], _ = e.Args["name"].(string)
		}
		if e.Cat == "gpurr" {
			own[[2]int64{e.Pid, e.Tid}] = true
		}
	}
	for k := range own {
		// Rank r recorded device r; overlapping kernels get lanes "#1"...
		if want := fmt.Sprintf("GPU %d gpurr memory capture", k[0]-1); !strings.HasPrefix(tracks[k], want) {
			t.Errorf("own kernels on pid %d track %q, want %q", k[0], tracks[k], want)
		}
	}
}

// NVTX push/pop ranges are slices on their thread's track, so the launch
// calls made in them nest under them; start/end ranges have a track of
// their own, and one never closed runs to the end of the recording.
func TestRanges(t *testing.T) {
	set := testrec.Open(t, testrec.Good)
	out, st := write(t, Chrome, set.Processes, Options{})
	f, _ := validate(t, out)
	if st.Ranges != 6 {
		t.Errorf("%d ranges written, want 6", st.Ranges)
	}
	names := map[[2]int64]string{}
	for _, e := range f.TraceEvents {
		if e.Name == "thread_name" {
			names[[2]int64{e.Pid, e.Tid}], _ = e.Args["name"].(string)
		}
	}
	ranges := map[string]ChromeEvent{}
	for _, e := range f.TraceEvents {
		if e.Cat == "nvtx" && e.Pid == 1 {
			ranges[e.Name] = e
		}
	}
	initR, weights, load := ranges["init"], ranges["weights"], ranges["load"]
	if names[[2]int64{1, initR.Tid}] != "main thread 4242" || weights.Tid != initR.Tid {
		t.Errorf("push/pop ranges on %q and %q, want the main thread", names[[2]int64{1, initR.Tid}], names[[2]int64{1, weights.Tid}])
	}
	if names[[2]int64{1, load.Tid}] != "NVTX start/end ranges" || load.Args["end"] == nil {
		t.Errorf("start/end range on %q, args %v", names[[2]int64{1, load.Tid}], load.Args)
	}
	end := func(e ChromeEvent) float64 { return e.Ts + *e.Dur }
	if weights.Args["path"] != "init / weights" || weights.Ts < initR.Ts || end(weights) > end(initR) {
		t.Errorf("weights %+v does not nest in init %+v", weights, initR)
	}
	inside := 0
	for _, e := range f.TraceEvents {
		if e.Cat == "launch" && e.Pid == 1 && e.Tid == initR.Tid && e.Ts >= initR.Ts && e.Ts <= end(initR) {
			inside++
		}
	}
	if inside != 10 {
		t.Errorf("%d launch calls inside init, want 10", inside)
	}
}

// A timeline of ranges nested thousands deep grows with their count: paths written whole would
// make it n²/2 names long (2.4 GB for 20000 levels, 150 MB for these 5000).
func TestNestedRangesBounded(t *testing.T) {
	const n = 5000
	set := testrec.OpenBatches(t, testrec.NestedRanges(n)...)
	out, st := write(t, Chrome, set.Processes, Options{})
	if limit := n * 1500; len(out) > limit {
		t.Errorf("the timeline of %d nested ranges is %d bytes, want at most %d", n, len(out), limit)
	}
	if st.Ranges != n {
		t.Errorf("%d ranges written, want %d", st.Ranges, n)
	}
	if !slices.ContainsFunc(st.Shortfalls, func(s string) bool { return strings.Contains(s, "NVTX ranges nest 5000 deep") }) {
		t.Errorf("no warning of shortened paths: %q", st.Shortfalls)
	}
}

func TestFilters(t *testing.T) {
	set := testrec.Open(t, testrec.Good)
	cases := []struct {
		name string
		o    Options
		want Stats
	}{
		// 3 eager gemms and 2 replayed gemm nodes per rank; graph
		// launches stay, captured launches of other kernels go. NVTX
		// ranges (3 per rank) are context: the filters keep them.
		{"kernels", Options{Kernels: regexp.MustCompile("gemm")}, Stats{Processes: 2, Calls: 12, Kernels: 10, GraphKernels: 4, Attributed: 4, Flows: 10, Ranges: 6, Selected: 22}},
		{"launches", Options{Launches: func(seq uint64) bool { return seq <= 3 }}, Stats{Processes: 2, Calls: 6, Kernels: 6, Flows: 6, Ranges: 6, Selected: 12}},
		// Filters that match no launch leave the ranges only: Selected says so.
		{"nothing", Options{Launches: func(seq uint64) bool { return seq >= 1000 }}, Stats{Processes: 2, Ranges: 6}},
		// Launch 1 of each rank is at 25 µs (plus 1 µs for rank 1), its
		// kernel from 31 µs; the window ends before launch 2 (50 µs) and
		// before the range "weights" opens (150 µs). Selected counts what passed the
		// filters, outside the window too.
		{"time", Options{From: 20 * time.Microsecond, To: 45 * time.Microsecond}, Stats{Processes: 2, Calls: 2, Kernels: 2, Flows: 2, Ranges: 4, Selected: 64}},
	}
	for _, c := range cases {
		out, st := write(t, Chrome, set.Processes, c.o)
		validate(t, out)
		if st.End = 0; !reflect.DeepEqual(st, c.want) {
			t.Errorf("%s: stats %+v, want %+v", c.name, st, c.want)
		}
	}
}

// writeRecording writes a recording of one process, its first frame
// describing proc, and opens it.
func writeRecording(t *testing.T, dir string, proc *pb.Process, batches ...*pb.Batch) *recording.Process {
	t.Helper()
	w, err := recording.Create(dir, fmt.Sprintf("%s-%d", proc.Hostname, proc.Pid), &pb.Batch{Process: proc})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	set, err := recording.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return set.Processes[0]
}

// writeProcess writes a recording of one process with the given start on
// the recording and wall clocks, and one launch and kernel at +1 ms.
func writeProcess(t *testing.T, dir, host string, startNS uint64, startUnix int64) *recording.Process {
	t.Helper()
	return writeRecording(t, dir, &pb.Process{Hostname: host, Pid: 1, StartNs: startNS, StartUnixNs: startUnix, GpuTiming: true},
		&pb.Batch{Kernels: []*pb.Kernel{{Id: 1, Name: "k"}},
			Launches:   []*pb.Launch{{Seq: 1, Tid: 1, KernelId: 1, CorrelationId: 5, HostNs: startNS + 1_000_000, Api: 307}},
			Activities: []*pb.KernelActivity{{CorrelationId: 5, StartNs: startNS + 1_010_000, EndNs: startNS + 1_020_000, Name: "k"}},
			End:        &pb.End{Reason: "exit"}})
}

// Two hosts whose recording clocks have nothing in common, the second
// started 2 s after the first on the wall clock: on the timeline its
// launch is 2 s after the first's.
func TestClocksAligned(t *testing.T) {
	tmp := t.TempDir()
	a := writeProcess(t, filepath.Join(tmp, "a"), "alpha", 5_000_000_000, 1_795_000_000_000_000_000)
	b := writeProcess(t, filepath.Join(tmp, "b"), "beta", 900_000_000_000, 1_795_000_002_000_000_000)
	out, _ := write(t, Chrome, []*recording.Process{a, b}, Options{})
	f, sum := validate(t, out)
	if sum.Processes != 2 || sum.Flows != 2 {
		t.Fatalf("summary %+v", sum)
	}
	ts := map[string]float64{}
	for _, e := range f.TraceEvents {
		if e.Ph == "X" {
			ts[fmt.Sprintf("%d %s", e.Pid, e.Cat)] = e.Ts
		}
	}
	want := map[string]float64{"1 launch": 1000, "1 kernel": 1010, "2 launch": 2_001_000, "2 kernel": 2_001_010}
	for k, v := range want {
		if ts[k] != v {
			t.Errorf("%s at %v µs, want %v (all: %v)", k, ts[k], v, ts)
		}
	}
}

// A window far smaller than the activities' lag (they arrive a frame of
// 4096 launches late): calls leave it before their kernel comes, and are
// written without a flow; the kernels still are, once each, unlinked.
// With the default window every kernel joins its call.
func TestJoinWindow(t *testing.T) {
	const n = 10_000
	p, err := testrec.WriteBig(t.TempDir(), testrec.Big{Launches: n, Activities: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ pending, early int }{{recording.DefaultMaxCalls, recording.DefaultMaxKernels}, {100, 50}} {
		var buf bytes.Buffer
		tw := &writer{sink: newChromeSink(&buf), maxPending: c.pending, maxEarly: c.early, clock: alignClocks([]*recording.Process{p})}
		if err := tw.process(0, p); err != nil {
			t.Fatal(err)
		}
		if err := tw.sink.finish(); err != nil {
			t.Fatal(err)
		}
		_, sum := validate(t, buf.Bytes())
		st := tw.stats
		// With the small window only the last frame's calls (whose kernels
		// come in the same frame) wait long enough.
		joined := st.Flows == n
		if c.pending < recording.DefaultMaxCalls {
			joined = st.Flows > 0 && st.Flows < n/4
		}
		if st.Calls != n || st.Kernels != n || !joined || st.Flows+st.Unlinked != n || sum.Slices != 2*n || sum.Flows != st.Flows {
			t.Errorf("window %d: stats %+v, %d slices", c.pending, st, sum.Slices)
		}
	}
}

// Kernels that arrive before their launch call (the call's frame came
// later) wait for it and are joined.
func TestKernelsBeforeCalls(t *testing.T) {
	var launches []*pb.Launch
	var acts []*pb.KernelActivity
	for i := uint64(1); i <= 5; i++ {
		launches = append(launches, &pb.Launch{Seq: i, Tid: 1, KernelId: 1, CorrelationId: uint32(i), HostNs: 1000 * i, Api: 652})
		acts = append(acts, &pb.KernelActivity{CorrelationId: uint32(i), StreamId: 7, StartNs: 1000*i + 500, EndNs: 1000*i + 900, Name: "_Z1kv"})
	}
	p := writeRecording(t, t.TempDir(), &pb.Process{Hostname: "box", Pid: 1, StartNs: 1000, GpuTiming: true},
		&pb.Batch{Kernels: []*pb.Kernel{{Id: 1, Name: "_Z1kv"}}, Activities: acts}, &pb.Batch{Launches: launches, End: &pb.End{Reason: "exit"}})
	out, st := write(t, Chrome, []*recording.Process{p}, Options{})
	f, sum := validate(t, out)
	if st.Flows != 5 || st.Unlinked != 0 || sum.Flows != 5 {
		t.Fatalf("stats %+v, summary %+v", st, sum)
	}
	for _, e := range f.TraceEvents {
		if e.Cat == "kernel" && (e.Name != "k()" || e.Args["launch"] == nil) {
			t.Errorf("kernel %q args %v", e.Name, e.Args)
		}
		if e.Cat == "launch" && e.Name != "cuLaunchKernelEx" {
			t.Errorf("launch call named %q", e.Name)
		}
	}
}

func TestValidatorRejects(t *testing.T) {
	named := `{"ph":"M","name":"process_name","pid":1,"args":{"name":"p"}},`
	cases := map[string]string{
		"never ended":         `{"ph":"B","name":"a","pid":1,"tid":1,"ts":1}`,
		"end without a begin": `{"ph":"E","pid":1,"tid":1,"ts":1}`,
		"negative duration":   `{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":-2}`,
		"without a duration":  `{"ph":"X","name":"a","pid":1,"tid":1,"ts":1}`,
		"negative timestamp":  `{"ph":"X","name":"a","pid":1,"tid":1,"ts":-1,"dur":1}`,
		"without nesting":     `{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":5},{"ph":"X","name":"b","pid":1,"tid":1,"ts":3,"dur":5}`,
		"never ends":          `{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":0,"bind_id":7,"flow_out":true}`,
		"2 starts":            `{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":0,"bind_id":7,"flow_out":true},{"ph":"X","name":"a","pid":1,"tid":1,"ts":2,"dur":0,"bind_id":7,"flow_out":true},{"ph":"X","name":"k","pid":1,"tid":2,"ts":3,"dur":1,"bind_id":7,"flow_in":true}`,
		"0 starts":            `{"ph":"X","name":"k","pid":1,"tid":2,"ts":3,"dur":1,"bind_id":7,"flow_in":true}`,
		"before it starts":    `{"ph":"X","name":"a","pid":1,"tid":1,"ts":5,"dur":0,"bind_id":7,"flow_out":true},{"ph":"X","name":"k","pid":1,"tid":2,"ts":3,"dur":1,"bind_id":7,"flow_in":true}`,
		"2 ends, want 1":      `{"ph":"s","id":3,"pid":1,"tid":1,"ts":1},{"ph":"f","id":3,"pid":1,"tid":2,"ts":2},{"ph":"f","id":3,"pid":1,"tid":2,"ts":3}`,
		"no process_name":     `{"ph":"X","name":"a","pid":2,"tid":1,"ts":1,"dur":1}`,
		"unknown phase":       `{"ph":"Q","pid":1,"tid":1,"ts":1}`,
	}
	for want, events := range cases {
		doc := `{"traceEvents":[` + named + events + `]}`
		if _, _, err := ValidateChrome(strings.NewReader(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", events, err)
		}
	}
	ok := `{"traceEvents":[` + named + `{"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":5},{"ph":"X","name":"b","pid":1,"tid":1,"ts":1,"dur":5},{"ph":"B","name":"c","pid":1,"tid":1,"ts":2},{"ph":"E","pid":1,"tid":1,"ts":3}]}`
	if _, sum, err := ValidateChrome(strings.NewReader(ok)); err != nil || sum.Slices != 3 {
		t.Errorf("nested slices: %v, %+v", err, sum)
	}
}

func TestJSONStrings(t *testing.T) {
	for _, s := range []string{"plain", "quote \" backslash \\ tab \t nl \n", "ctl \x01\x1f", "ünïcode ✓", "bad \xff utf8"} {
		var got string
		if err := json.Unmarshal(appendJSONString(nil, s), &got); err != nil {
			t.Errorf("%q: %v", s, err)
			continue
		}
		if want := strings.ToValidUTF8(s, "\ufffd"); got != want {
			t.Errorf("%q came back as %q", s, got)
		}
	}
	for ns, want := range map[int64]string{0: "0", 1: "0.001", 1500: "1.500", 1_000_000: "1000", 12_345_678: "12345.678"} {
		if got := string(appendMicros(nil, ns)); got != want {
			t.Errorf("%d ns: %s, want %s", ns, got, want)
		}
	}
}

// Bad bytes given as a recording: an error naming the file, no panic.
func TestCorruptRecording(t *testing.T) {
	set := testrec.Open(t, testrec.Corrupt)
	var buf bytes.Buffer
	_, err := Write(&buf, Chrome, set.Processes[:1], Options{})
	if err == nil || !strings.Contains(err.Error(), recording.EventsFile) {
		t.Fatalf("corrupt recording: %v", err)
	}
	// With another rank beside it, the damaged one is said and the timeline is whole JSON.
	buf.Reset()
	st, err := Write(&buf, Chrome, set.Processes, Options{})
	if err != nil || len(st.Shortfalls) != 1 || !strings.Contains(st.Shortfalls[0], "damaged") {
		t.Fatalf("a damaged rank beside a good one: %v, shortfalls %q", err, st.Shortfalls)
	}
	validate(t, buf.Bytes())
	for _, v := range []testrec.Variant{testrec.Truncated, testrec.Incomplete, testrec.Lossy} {
		set := testrec.Open(t, v)
		out, _ := write(t, Chrome, set.Processes, Options{})
		validate(t, out)
	}
}

// FuzzValidateChrome: any bytes yield a verdict, never a panic.
func FuzzValidateChrome(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "good.json")); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"traceEvents":[{"ph":"X","pid":1,"tid":1,"ts":1,"dur":1,"bind_id":"x","flow_in":true}]}`))
	f.Add([]byte(`{"traceEvents":[{"ph":"E","pid":1},{"ph":"f","id":1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ValidateChrome(bytes.NewReader(b))
	})
}

// TestBackwardArgs: in testrec's autograd recording, the call and the
// kernel of each backward launch of the linked rank carry python_line =
// the forward line, backward_node, and the forward launch's callstack;
// a backward launch with a Python line of its own keeps it as
// backward_python_line; the unlinked one has its node and no line; the
// other rank's launches carry nothing of that. Both formats.
func TestBackwardArgs(t *testing.T) {
	set := testrec.Open(t, testrec.Autograd)
	const linear = "/home/ada/.venv/lib/python3.12/site-packages/torch/nn/modules/linear.py:125 Linear.forward"
	type want struct{ node, line, own string }
	wants := map[int64]want{ // launch of rank 0 -> its arguments
		20: {"SumBackward0", "/home/ada/train.py:43 main", ""},
		21: {"CompiledFunctionBackward", "/tmp/torchinductor_ada/xy/cxyabc.py:31 call", "/tmp/torchinductor_ada/gq/cgqbwd.py:54 call"},
		22: {"ExpandBackward0", "/tmp/torchinductor_ada/xy/cxyabc.py:31 call", ""},
		23: {"AddmmBackward0", linear, ""},
		24: {"AddmmBackward0", linear, ""},
		25: {"AccumulateGrad", "", ""},
	}
	out, _ := write(t, Chrome, set.Processes, Options{})
	f, _ := validate(t, out)
	seen := map[int64]int{}
	for _, e := range f.TraceEvents {
		node, _ := e.Args["backward_node"].(string)
		if e.Pid != 1 || (e.Cat != "launch" && e.Cat != "kernel") {
			if node != "" {
				t.Errorf("%s %q of pid %d: backward_node %q", e.Cat, e.Name, e.Pid, node)
			}
			continue
		}
		seq := int64(e.Args["launch"].(float64))
		w, ok := wants[seq]
		if !ok {
			if node != "" {
				t.Errorf("forward launch %d: backward_node %q", seq, node)
			}
			continue
		}
		seen[seq]++
		line, _ := e.Args["python_line"].(string)
		own, _ := e.Args["backward_python_line"].(string)
		_, forward := e.Args["forward_callstack"]
		if node != w.node || line != w.line || own != w.own || forward != (w.line != "") || e.Args["callstack"] == nil {
			t.Errorf("%s of launch %d: args %v, want %+v", e.Cat, seq, e.Args, w)
		}
	}
	for seq := range wants {
		if seen[seq] != 2 {
			t.Errorf("launch %d: %d slices, want its call and its kernel", seq, seen[seq])
		}
	}

	out, _ = write(t, Perfetto, set.Processes, Options{})
	n := 0
	for _, line := range strings.Split(perfettoText(t, out), "\n") {
		if strings.Contains(line, "python_line="+linear+" backward_node=AddmmBackward0 ") && strings.Contains(line, "forward_callstack=") {
			n++
		}
	}
	if n != 4 {
		t.Errorf("Perfetto: %d slices of AddmmBackward0 with the forward line, want 4", n)
	}
}

// Live probes (gpurr record --probe): the probed launch's CTAs are slices on a track per SM,
// the earliest at its kernel's start on the GPU (the probes' %globaltimer is a clock of its
// own), the rest where the probes saw them; the CTA that left no record has none. In both
// formats; rank 1, recorded without --probe, has no SM track.
func TestProbeCTAs(t *testing.T) {
	set := testrec.Open(t, testrec.Probe)
	out, st := write(t, Chrome, set.Processes, Options{})
	f, sum := validate(t, out)
	if st.Probed != 1 || st.ProbeCTAs != 255 || sum.ByCat["probe"] != 255 {
		t.Fatalf("stats %+v, categories %v", st, sum.ByCat)
	}
	tracks := map[[2]int64]string{}
	var kernelTs float64
	first, last := math.Inf(1), 0.0
	var slow ChromeEvent
	for _, e := range f.TraceEvents {
		switch {
		case e.Name == "thread_name":
			tracks[[2]int64{e.Pid, e.Tid}], _ = e.Args["name"].(string)
		case e.Cat == "kernel" && e.Args["launch"] == float64(testrec.ProbedLaunch):
			kernelTs = e.Ts
		case e.Cat == "probe":
			first, last = min(first, e.Ts), max(last, e.Ts+*e.Dur)
			if e.Args["cta_index"] == float64(testrec.SlowCTA) {
				slow = e
			}
			if e.Args["cta_index"] == float64(testrec.MissingCTA) || e.Pid != 1 {
				t.Errorf("a slice of CTA %v in process %d", e.Args["cta_index"], e.Pid)
			}
		}
	}
	if kernelTs == 0 || first != kernelTs || last-first > 3.3 {
		t.Errorf("CTAs from %v to %v µs, kernel at %v", first, last, kernelTs)
	}
	if slow.Name != "CTA 200,0,0" || tracks[[2]int64{slow.Pid, slow.Tid}] != "GPU 0 SM 68 (probes)" || slow.Args["kernel"] != "triton_poi_fused_add_mul_0" ||
		slow.Args["count"] != float64(64) || slow.Args["aligned"] != "kernel start" || *slow.Dur != 1.6 {
		t.Errorf("the slowest CTA: %+v on %q", slow, tracks[[2]int64{slow.Pid, slow.Tid}])
	}
	pf, _ := write(t, Perfetto, set.Processes, Options{})
	text := perfettoText(t, pf)
	if n := strings.Count(text, " [probe] launch=10 kernel=triton_poi_fused_add_mul_0 cta="); n != 255 {
		t.Errorf("%d CTA slices in the Perfetto trace, want 255", n)
	}
	if !strings.Contains(text, `"GPU 0 SM 68 (probes)"`) {
		t.Error("the Perfetto trace has no SM track")
	}
	// --launches leaves the probed launch out, and its CTAs with it.
	if _, st := write(t, Chrome, set.Processes, Options{Launches: func(seq uint64) bool { return seq != testrec.ProbedLaunch }}); st.ProbeCTAs != 0 {
		t.Errorf("%d CTAs of a launch left out", st.ProbeCTAs)
	}
}

// A probed launch whose kernel has no GPU time: its CTAs start at the launch call.
func TestProbeCTAsAtCall(t *testing.T) {
	p := writeRecording(t, t.TempDir(), &pb.Process{Hostname: "h", Pid: 1, StartNs: 1000, Probe: "k:entry,exit"},
		&pb.Batch{Kernels: []*pb.Kernel{{Id: 1, Name: "k"}}, ProbeKernels: []*pb.ProbeKernel{{KernelId: 1, Instrumented: true}},
			Launches: []*pb.Launch{{Seq: 1, Tid: 1, KernelId: 1, CorrelationId: 5, HostNs: 5000, Api: 307, Grid: &pb.Dim3{X: 2, Y: 2, Z: 1}}}},
		&pb.Batch{Probes: []*pb.ProbeResult{{LaunchSeq: 1, Ctas: testrec.ProbeBuffer(4,
			recording.ProbeCTA{Index: 3, Start: 900_000, End: 902_000, SM: 1},
			recording.ProbeCTA{Index: 0, Start: 901_000, End: 901_500, SM: 0})}}},
		&pb.Batch{End: &pb.End{Reason: "exit"}})
	out, st := write(t, Chrome, []*recording.Process{p}, Options{})
	f, _ := validate(t, out)
	got := map[string][2]float64{}
	for _, e := range f.TraceEvents {
		if e.Cat == "probe" {
			got[e.Name] = [2]float64{e.Ts, *e.Dur}
			if e.Args["aligned"] != "launch call" {
				t.Errorf("%s aligned on %v", e.Name, e.Args["aligned"])
			}
		}
	}
	// The call is 4 µs after the process start, the timeline's 0.
	if want := map[string][2]float64{"CTA 1,1,0": {4, 2}, "CTA 0,0,0": {5, 0.5}}; !reflect.DeepEqual(got, want) || st.Probed != 1 {
		t.Errorf("CTAs %v, want %v; stats %+v", got, want, st)
	}
}

// Two runs of a job given together, whose processes have the same ranks, hosts and pids
// (containers, where pids repeat), are named apart on the timeline by their directories;
// before, each name came twice. A process whose name is its own keeps the short one.
func TestSameProcessNamesApart(t *testing.T) {
	run1, run2 := testrec.Open(t, testrec.Good), testrec.Open(t, testrec.Good)
	procs := append(run1.Processes, run2.Processes[0])
	out, _ := write(t, Chrome, procs, Options{})
	f, _ := validate(t, out)
	var names []string
	for _, e := range f.TraceEvents {
		if e.Ph == "M" && e.Name == "process_name" {
			names = append(names, fmt.Sprint(e.Args["name"]))
		}
	}
	want := []string{"rank 0 gpu-box (pid 4242) " + run1.Processes[0].Dir, "rank 1 gpu-box (pid 4243)", "rank 0 gpu-box (pid 4242) " + run2.Processes[0].Dir}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("process names %q; want %q", names, want)
	}
}

// Copies, memsets and waits (format 1.15): each copy and memset on its stream's track with an
// arrow from the call that made it, the call on its thread as long as it took on the host
// (a wait: the time the host waited), and launch calls as long as theirs; a copy of 0 bytes
// is a call alone. Perfetto's file holds the same.
func TestCopies(t *testing.T) {
	set := testrec.Open(t, testrec.Copies)
	out, st := write(t, Chrome, set.Processes, Options{})
	f, sum := validate(t, out)
	// Per rank: 3 memcpys and a memset; 9 calls, 4 of them waits.
	if st.Copies != 8 || st.HostCalls != 18 || st.Flows != 32 {
		t.Fatalf("stats %+v", st)
	}
	if sum.ByCat["memcpy"] != 6 || sum.ByCat["memset"] != 2 || sum.ByCat["sync"] != 8 || sum.ByCat["copy_call"] != 10 {
		t.Errorf("categories %v", sum.ByCat)
	}
	tracks := map[[2]int64]string{}
	for _, e := range f.TraceEvents {
		if e.Name == "thread_name" {
			tracks[[2]int64{e.Pid, e.Tid}], _ = e.Args["name"].(string)
		}
	}
	flowsOut := map[string]ChromeEvent{}
	for _, e := range f.TraceEvents {
		if e.Ph == "X" && e.FlowOut && e.Cat == "copy_call" {
			flowsOut[fmt.Sprintf("%d %s", e.Pid, e.BindID)] = e
		}
	}
	for _, e := range f.TraceEvents {
		switch {
		case e.Ph == "X" && (e.Cat == "memcpy" || e.Cat == "memset"):
			call, ok := flowsOut[fmt.Sprintf("%d %s", e.Pid, e.BindID)]
			if !e.FlowIn || !ok {
				t.Errorf("%s at %v: no arrow from its call", e.Name, e.Ts)
			} else if call.Args["python_line"] != "/home/ada/train.py:14 load_batch" && call.Args["python_line"] != "/home/ada/train.py:48 main" {
				t.Errorf("%s's call %s has line %v", e.Name, call.Name, call.Args["python_line"])
			}
			if !strings.HasPrefix(tracks[[2]int64{e.Pid, e.Tid}], "GPU ") || e.Dur == nil || *e.Dur <= 0 {
				t.Errorf("%s on track %q, dur %v", e.Name, tracks[[2]int64{e.Pid, e.Tid}], e.Dur)
			}
		case e.Ph == "X" && e.Cat == "sync":
			if e.Name == "cuStreamSynchronize" && (e.Args["wait_ns"] != float64(2_000_000) || e.Args["stream"] != float64(7) || *e.Dur < 2000) {
				t.Errorf("stream wait %v, dur %v", e.Args, *e.Dur)
			}
			if !strings.Contains(tracks[[2]int64{e.Pid, e.Tid}], "thread") {
				t.Errorf("%s on track %q", e.Name, tracks[[2]int64{e.Pid, e.Tid}])
			}
		case e.Ph == "X" && e.Cat == "launch":
			if e.Dur == nil || *e.Dur != float64(testrec.LaunchCallNS)/1000 {
				t.Errorf("launch call %s dur %v, want %v µs", e.Name, e.Dur, float64(testrec.LaunchCallNS)/1000)
			}
		}
	}
	text := perfettoText(t, func() []byte { b, _ := write(t, Perfetto, set.Processes, Options{}); return b }())
	if n := strings.Count(text, "[memcpy]"); n != 6 {
		t.Errorf("Perfetto: %d memcpy slices, want 6", n)
	}
	// --kernels and --launches select launches: no copy is written.
	if _, st := write(t, Chrome, set.Processes, Options{Launches: func(uint64) bool { return true }}); st.Copies != 0 || st.HostCalls != 0 {
		t.Errorf("with --launches: %+v", st)
	}
}
