package cli

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/internal/nanscan"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/chunkstore"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// fakeLaunch is one launch of a synthetic run: its kernel, the Python line
// that made it, and its one region's contents after it ran.
type fakeLaunch struct {
	kernel uint64 // 1: fill, 2: scatter_add, 3: warm-up
	line   uint32
	after  []byte
	before []byte   // snapshot mode: the region before the launch, nil for none
	optim  bool     // made inside a torch.optim optimizer's step()
	ranges []string // the NVTX push/pop ranges it was made in, outermost first; a launch shares those it has in common with the launch before
}

var fakeKernels = map[uint64]string{1: "fill_kernel", 2: "scatter_add_kernel", 3: "warmup_kernel"}

// writeRun writes a recording of launches with --memory mode ("" for off).
func writeRun(t *testing.T, mode string, launches []fakeLaunch) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rec")
	if err := recording.CreateSet(dir, []string{"python", "train.py"}); err != nil {
		t.Fatal(err)
	}
	writeProc(t, dir, &pb.Process{Hostname: "box", Pid: 7, Argv: []string{"python", "train.py"}}, mode, launches, 0)
	return dir
}

// writeProc writes one process of a run into the recording at dir; its launches are 1 ms
// apart from start (host clock), and its wall clock starts at startUnixNs.
func writeProc(t *testing.T, dir string, proc *pb.Process, mode string, launches []fakeLaunch, startUnixNs int64) {
	t.Helper()
	proc.StartUnixNs = startUnixNs
	// "MODE+nan-scan": the GPU counted NaN as f32 and bf16, as the agent
	// does with --nan-scan f32,bf16.
	mode, nanScan := strings.CutSuffix(mode, "+nan-scan")
	var scanTypes []*dtype.Type
	if mode != "" {
		proc.Memory = &pb.MemoryConfig{Mode: mode, ChunkBytes: memhash.ChunkSize}
	}
	if nanScan {
		proc.Memory.NanScan = []string{"f32", "bf16"}
		var err error
		if scanTypes, err = dtype.ParseList("f32,bf16"); err != nil {
			t.Fatal(err)
		}
	}
	w, err := recording.Create(dir, fmt.Sprintf("%s-%d", proc.Hostname, proc.Pid), &pb.Batch{Process: proc})
	if err != nil {
		t.Fatal(err)
	}
	var store *chunkstore.Writer
	if mode == "snapshot" {
		if store, err = chunkstore.Create(w.Dir(), chunkstore.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	b := &pb.Batch{}
	for id, name := range fakeKernels {
		b.Kernels = append(b.Kernels, &pb.Kernel{Id: id, Identity: 1000 + id, Name: name})
	}
	// open are the ranges open on the program's one thread, outermost first. Launches are 1 ms
	// apart: a range closes 100 us after its last launch, and opens 100 us before its first.
	var open []*pb.Range
	closeTo := func(depth int, ns uint64) {
		for len(open) > depth {
			open[len(open)-1].EndNs = ns
			open = open[:len(open)-1]
		}
	}
	for i, l := range launches {
		seq := uint64(i + 1)
		same := 0
		for same < len(open) && same < len(l.ranges) && open[same].Message == l.ranges[same] {
			same++
		}
		closeTo(same, seq*1e6-100_000)
		for _, name := range l.ranges[same:] {
			r := &pb.Range{Id: uint64(len(b.Ranges) + 1), Tid: 7, Message: name, StartNs: seq*1e6 - 100_000 + uint64(len(open)), Pushed: true}
			if len(open) > 0 {
				r.ParentId = open[len(open)-1].Id
			}
			b.Ranges, open = append(b.Ranges, r), append(open, r)
		}
		rangeID := uint64(0)
		if len(open) > 0 {
			rangeID = open[len(open)-1].Id
		}
		stack := &pb.Callstack{Id: uint64(l.line), Frames: []*pb.Frame{{Kind: pb.Frame_PYTHON, File: "train.py", Line: l.line, Function: "step"}}}
		if l.optim {
			stack.Frames = append([]*pb.Frame{{Kind: pb.Frame_PYTHON, File: "/venv/lib/python3.12/site-packages/torch/optim/sgd.py", Line: 80, Function: "step"}}, stack.Frames...)
		}
		b.Callstacks = append(b.Callstacks, stack)
		b.Launches = append(b.Launches, &pb.Launch{Seq: seq, KernelId: l.kernel, CallstackId: stack.Id, HostNs: seq * 1e6, RangeId: rangeID,
			Regions: []*pb.Region{{Address: 0x7000_0000 + seq<<20, Size: uint64(len(l.after)), ParamOffsets: []uint32{0}}}})
		if mode == "" {
			continue
		}
		state := func(data []byte) *pb.RegionState {
			rs, err := testrec.RegionState(data, store)
			if err != nil {
				t.Fatal(err)
			}
			return rs
		}
		if l.before != nil && store != nil {
			b.Memory = append(b.Memory, &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_BEFORE, Regions: []*pb.RegionState{state(l.before)}, Snapshot: true})
		}
		rs := state(l.after)
		for _, c := range nanscan.Count(l.after, scanTypes) {
			rs.NanCount, rs.InfCount = append(rs.NanCount, c.NaN), append(rs.InfCount, c.Inf)
		}
		b.Memory = append(b.Memory, &pb.MemoryState{LaunchSeq: seq, Point: pb.MemoryState_AFTER, Regions: []*pb.RegionState{rs}, Snapshot: store != nil})
	}
	closeTo(0, uint64(len(launches)+1)*1e6)
	b.Stats = &pb.Stats{Launches: uint64(len(launches))}
	b.End = &pb.End{Reason: "exit"}
	if err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if store != nil {
		if err := store.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func floats(vs ...float32) []byte {
	b := make([]byte, 0, 4*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// a training-like run: fills, then a scatter-add whose sum may differ.
func trainRun(sum float32, warmup bool) []fakeLaunch {
	var ls []fakeLaunch
	if warmup {
		ls = append(ls, fakeLaunch{kernel: 3, line: 5, after: floats(0)})
	}
	big := make([]byte, 3*memhash.ChunkSize)
	copy(big[2*memhash.ChunkSize+8:], floats(sum))
	return append(ls, fakeLaunch{kernel: 1, line: 10, after: floats(1, 2, 3)}, fakeLaunch{kernel: 1, line: 11, after: floats(4, 5)},
		fakeLaunch{kernel: 2, line: 30, after: big}, fakeLaunch{kernel: 1, line: 12, after: floats(6)})
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestDiff(t *testing.T) {
	same1, same2 := writeRun(t, "hash", trainRun(1.5, false)), writeRun(t, "hash", trainRun(1.5, false))
	code, out, errs := runCLI("diff", same1, same2)
	if code != 0 || !strings.Contains(out, "the runs agree: 4 launches compared") {
		t.Errorf("equal runs: exit %d, out %q, err %q", code, out, errs)
	}

	a, b := writeRun(t, "snapshot", trainRun(1.5, false)), writeRun(t, "snapshot", trainRun(1.5000001, true))
	code, out, errs = runCLI("diff", "--dtype", "f32", a, b)
	expectOutput(t, "diverging runs", code, 1, out, errs,
		"the runs part ways at launch 3 of A and 4 of B",
		"kernel   scatter_add_kernel",
		"A        train.py:30 step",
		"region 0 (192.0 KiB, parameter offset 0): 1 of 3 chunks differ, the first at byte 0x20000 (chunk 2)",
		"[32770] A 1.5  B 1.50000012",
		"1 launch only in B:\n    1 warmup_kernel")

	// Without snapshots on both sides there are no values to compare, and
	// diff says which side lacks them.
	code, out, errs = runCLI("diff", "--dtype", "f32", writeRun(t, "hash", trainRun(1.5, false)), writeRun(t, "hash", trainRun(2, false)))
	expectOutput(t, "hash-only runs", code, 1, out, errs,
		"(neither run has a snapshot after this launch, only hashes: record with --memory snapshot --snapshot-launches 3 to see values)")
	code, out, errs = runCLI("diff", "--dtype", "f32", a, writeRun(t, "hash", trainRun(2, false)))
	expectOutput(t, "snapshots in A only", code, 1, out, errs,
		"region 0 (192.0 KiB, parameter offset 0): 1 of 3 chunks differ, the first at byte 0x20000 (chunk 2)\n"+
			"    (only A has a snapshot after this launch; B has hashes only, so no values can be compared (record B with --memory snapshot --snapshot-launches 3))")
	code, out, errs = runCLI("diff", "--dtype", "f32", writeRun(t, "hash", trainRun(2, false)), a)
	expectOutput(t, "snapshots in B only", code, 1, out, errs, "(only B has a snapshot after this launch; A has hashes only")
	if strings.Contains(out, "] A ") {
		t.Errorf("snapshots in B only: elements shown:\n%s", out)
	}

	// Without memory capture on a side, what the runs launched is compared: the same kernels
	// agree whatever they computed; an extra launch is where they part ways.
	plain := writeRun(t, "", trainRun(1, false))
	code, out, errs = runCLI("diff", plain, same1)
	if code != 0 || !strings.Contains(out, "the runs launch the same kernels, stream by stream: 4 launches matched (memory not compared)") ||
		!strings.Contains(errs, "recorded without memory capture: comparing what the runs launched, not what they computed") {
		t.Errorf("launches only, the same: exit %d, out %q, err %q", code, out, errs)
	}
	// A run compared with itself is warned about once.
	code, _, errs = runCLI("diff", plain, plain)
	if n := strings.Count(errs, "recorded without memory capture"); code != 0 || n != 1 {
		t.Errorf("a run against itself: exit %d, warned %d times, want once:\n%s", code, n, errs)
	}
	code, out, errs = runCLI("diff", plain, writeRun(t, "", trainRun(1, true)))
	expectOutput(t, "launches only, an extra one", code, 1, out, errs,
		"the runs part ways in what they launch: launch 1 of B has no counterpart in A",
		"kernel   warmup_kernel",
		"B        train.py:5 step",
		"4 launches matched (memory not compared)",
		"1 launch only in B:\n    1 warmup_kernel")

	// Runs that go through optimizer steps: the report says in which step they part ways.
	stepped := func(sum float32) []fakeLaunch {
		ls := trainRun(sum, false)
		opt := fakeLaunch{kernel: 1, line: 20, after: floats(7), optim: true}
		return append(ls[:2:2], append([]fakeLaunch{opt}, ls[2:]...)...)
	}
	code, out, errs = runCLI("diff", writeRun(t, "hash", stepped(1.5)), writeRun(t, "hash", stepped(2)))
	expectOutput(t, "diverging in step 1", code, 1, out, errs,
		"the runs part ways at launch 4 of A and 4 of B",
		"  step     1 of A's 1 and B's 1 (optimizer steps ended before it)")

	// A loop of NVTX ranges "step 0", "step 1", each with a forward and a backward range: the
	// report names the range of the launch where the runs part ways, and with --step-range the
	// step, numbered by those ranges.
	ranged := func(sum float32) string {
		ls := trainRun(sum, false)
		for i, r := range [][]string{{"step 0", "forward"}, {"step 0", "backward"}, {"step 1", "forward"}, {"step 1", "backward"}} {
			ls[i].ranges = r
		}
		return writeRun(t, "hash", ls)
	}
	ra, rb := ranged(1.5), ranged(2)
	code, out, errs = runCLI("diff", ra, rb)
	expectOutput(t, "diverging in a range", code, 1, out, errs, "\n  range    step 1 / forward\n")
	if strings.Contains(out, "step     ") || errs != "" {
		t.Errorf("steps without optimizer steps or --step-range:\n%s%s", out, errs)
	}
	code, out, errs = runCLI("diff", "--step-range", "^step [0-9]+$", ra, rb)
	expectOutput(t, "diverging in step 1 of the ranges", code, 1, out, errs,
		"\n  step     1 of A's 2 and B's 2 (ranges matching \"^step [0-9]+$\" ended before it)\n  range    step 1 / forward\n")
	code, out, errs = runCLI("diff", "--step-range", "^train_step$", ra, rb)
	expectOutput(t, "a step range that matches nothing", code, 1, out, errs, "\n  range    step 1 / forward\n")
	if strings.Contains(out, "step     ") || !strings.Contains(errs, `no NVTX range matches the step range "^train_step$": every launch is step 0`) {
		t.Errorf("a step range that matches nothing: want a warning and no step:\n%s%s", out, errs)
	}

	expectUsageErrors(t, []usageCase{
		{[]string{"diff", "--step-range", "step (", same1, same2}, "gpurr: diff: --step-range: missing closing ): `step (`"},
		{[]string{"diff", "--dtype", "f8", same1, same2}, "unknown dtype \"f8\""},
		{[]string{"diff", same1, filepath.Join(t.TempDir(), "missing")}, "no such file"},
		{[]string{"diff", same1}, "want two recordings, got 1 argument"},
	})
}

// A torchrun job: two ranks and the launcher, which loaded CUDA but launched nothing. The
// launcher is left out, ranks pair with ranks, and the rank that parted ways first in time is
// named, though it is listed last.
func TestDiffTorchrunRanks(t *testing.T) {
	job := func(sums [2]float32, late0 bool) string {
		dir := filepath.Join(t.TempDir(), "job")
		if err := recording.CreateSet(dir, []string{"torchrun", "train.py"}); err != nil {
			t.Fatal(err)
		}
		writeProc(t, dir, &pb.Process{Hostname: "box", Pid: 10, Argv: []string{"torchrun", "train.py"}}, "hash", nil, 0)
		for rank := range int32(2) {
			var start int64
			if rank == 0 && late0 {
				start = 1e9 // rank 0's clock starts a second later: its divergence comes after rank 1's
			}
			r := rank
			writeProc(t, dir, &pb.Process{Hostname: "box", Pid: 11 + uint32(rank), Argv: []string{"python", "train.py"}, Rank: &r},
				"hash", trainRun(sums[rank], false), start)
		}
		return dir
	}
	// info shows the launcher in one line, after the ranks.
	one := job([2]float32{1.5, 1.5}, false)
	code, out, errs := runCLI("info", one)
	expectOutput(t, "info of the job", code, 0, out, errs, "\nbox-10  pid 10 on box: no kernel launches (a launcher")
	if strings.Index(out, "box-10  pid 10 on box") < strings.Index(out, "box-12") {
		t.Errorf("the launcher's line comes before the ranks:\n%s", out)
	}
	code, out, errs = runCLI("diff", one, job([2]float32{1.5, 1.5}, false))
	expectOutput(t, "same job", code, 0, out, errs, "box-11 vs box-11: the runs agree", "box-12 vs box-12: the runs agree")
	if !strings.Contains(errs, "leaving out ") || !strings.Contains(errs, "box-10: it made no kernel launches") {
		t.Errorf("the launcher is not said to be left out: %q", errs)
	}

	code, out, errs = runCLI("diff", job([2]float32{1.5, 1.5}, true), job([2]float32{1.5, 2}, true))
	expectOutput(t, "rank 1 diverges", code, 1, out, errs, "box-11 vs box-11: the runs agree", "box-12 vs box-12: the runs part ways at launch 3")
	if strings.Contains(out, "first in time") {
		t.Errorf("one divergence, yet a first in time:\n%s", out)
	}

	// A rank whose recording is damaged mid-file: the other pair is still compared, and the
	// command ends with an error naming the pair it could not read.
	damaged := job([2]float32{1.5, 1.5}, false)
	damageEvents(t, filepath.Join(damaged, "box-11"))
	code, out, errs = runCLI("diff", damaged, job([2]float32{1.5, 1.5}, false))
	if code != exitUsage || !strings.Contains(out, "box-11 vs box-11: not compared: ") || !strings.Contains(out, "box-12 vs box-12: the runs agree") ||
		!strings.Contains(errs, "gpurr: diff: 1 pair could not be read (box-11 vs box-11)") {
		t.Errorf("damaged rank: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}

	// Both ranks part ways; rank 1's is a second earlier though it is listed last.
	code, out, errs = runCLI("diff", job([2]float32{1.5, 1.5}, true), job([2]float32{2, 2}, true))
	expectOutput(t, "both diverge", code, 1, out, errs, "2 of 2 pairs part ways; first in time: rank 1 (box-12 vs box-12)")
}

// Processes pair by rank; one that pairs with none is named on stderr, on both sides, not
// passed over: ranks 0 and 1 against ranks 0 and 2 (a job restarted with another layout)
// compared rank 0 alone and said the runs agree, though rank 2 parted ways. Two processes of
// one rank (a child that inherited RANK) pair in order, not both with the other side's one.
func TestDiffRanksThatPairWithNone(t *testing.T) {
	a := rankedJob(t, []int32{0, 1}, []float32{1.5, 1.5})
	b := rankedJob(t, []int32{0, 2}, []float32{1.5, 2})
	code, out, errs := runCLI("diff", a, b)
	expectOutput(t, "ranks 0, 1 vs 0, 2", code, 0, out, errs, "node0-11 vs node0-11: the runs agree")
	for _, want := range []string{
		"gpurr: diff: warning: " + a + ": 1 process with no counterpart in " + b + ", not compared: node1-11 (rank 1)",
		"gpurr: diff: warning: " + b + ": 1 process with no counterpart in " + a + ", not compared: node1-11 (rank 2)",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("ranks 0, 1 vs 0, 2: stderr %q; want %q", errs, want)
		}
	}

	twice := rankedJob(t, []int32{0, 0}, []float32{1.5, 2})
	code, out, errs = runCLI("diff", twice, a)
	expectOutput(t, "rank 0 twice", code, 0, out, errs, "node0-11 vs node0-11: the runs agree")
	if strings.Contains(out, "node1-11 vs") ||
		!strings.Contains(errs, "warning: "+twice+": 1 process with no counterpart in "+a+", not compared: node1-11 (rank 0)") ||
		!strings.Contains(errs, "warning: "+a+": 1 process with no counterpart in "+twice+", not compared: node1-11 (rank 1)") {
		t.Errorf("rank 0 twice: stdout:\n%s\nstderr:\n%s", out, errs)
	}

	m := filepath.Join(t.TempDir(), "m.json")
	if code, _, errs := runCLI("manifest", a, "-o", m); code != 0 {
		t.Fatalf("manifest: exit %d, %s", code, errs)
	}
	code, out, errs = runCLI("verify", b, "--manifest", m)
	expectOutput(t, "verify ranks 0, 2", code, 0, out, errs, "node0-11: matches the manifest")
	if !strings.Contains(errs, "warning: "+b+": 1 process with no counterpart in the manifest, not compared: node1-11 (rank 2)") ||
		!strings.Contains(errs, "warning: the manifest: 1 process with no counterpart in "+b+", not compared: node1-11 (rank 1)") {
		t.Errorf("verify ranks 0, 2: stderr %q", errs)
	}
}

// rankedJob writes a torchrun job of a process per rank, in hash mode, rank i on host node<i>
// with pid 11 (the same pid on every host, as containers give) running trainRun(sums[i]).
func rankedJob(t *testing.T, ranks []int32, sums []float32) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "job")
	if err := recording.CreateSet(dir, []string{"torchrun", "train.py"}); err != nil {
		t.Fatal(err)
	}
	for i, rank := range ranks {
		r := rank
		writeProc(t, dir, &pb.Process{Hostname: fmt.Sprintf("node%d", i), Pid: 11, Argv: []string{"python", "train.py"}, Rank: &r},
			"hash", trainRun(sums[i], false), 0)
	}
	return dir
}

// damageEvents flips a byte near the end of a process's events file: its last frame no
// longer matches its checksum.
func damageEvents(t *testing.T, procDir string) {
	t.Helper()
	events := filepath.Join(procDir, recording.EventsFile)
	raw, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-3] ^= 0xff
	if err := os.WriteFile(events, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// expectOutput checks a verb's exit code and that its stdout holds each of wants.
func expectOutput(t *testing.T, what string, code, wantCode int, out, errs string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if code != wantCode || !strings.Contains(out, want) {
			t.Errorf("%s: exit %d, want %d and output with %q:\n%s%s", what, code, wantCode, want, out, errs)
		}
	}
}

type usageCase struct {
	args []string
	want string
}

// expectUsageErrors runs each case and wants exit 2 with one line on stderr.
func expectUsageErrors(t *testing.T, cases []usageCase) {
	t.Helper()
	for _, c := range cases {
		code, _, errs := runCLI(c.args...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line with %q", c.args, code, errs, c.want)
		}
	}
}
