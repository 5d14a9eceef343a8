package cli

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/manifest"
	"github.com/gpurr/gpurr/internal/nanscan"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
)

// writeScripts writes each script as a process of one recording and returns its directory.
func writeScripts(t *testing.T, scripts ...testrec.Script) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rec")
	if err := recording.CreateSet(dir, []string{"python", "train.py"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range scripts {
		if _, err := testrec.WriteScript(dir, s); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// decodeJSON decodes a verb's JSON output into v, which must be all of it.
func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decoding the JSON output: %v\n%s", err, out)
	}
	if dec.More() {
		t.Fatalf("more than one JSON document:\n%s", out)
	}
}

var (
	kFill   = testrec.ScriptKernel{Name: "fill", Params: []uint32{8}}
	kSGD    = testrec.ScriptKernel{Name: "sgd", Params: []uint32{8, 8, 4, 4}}
	kUse    = testrec.ScriptKernel{Name: "use", Params: []uint32{8, 8}}
	kReduce = testrec.ScriptKernel{Name: "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE", Params: []uint32{8}}
)

// sgdStep fills w and g, then runs sgd(w, g, lr, 111), whose result is out; its allocations
// start at base, so two runs' pointer parameters differ.
func sgdStep(lr float32, base uint64, out []byte) testrec.Script {
	return testrec.Script{Host: "box", Pid: 7, Mode: "hash", AllocBase: base,
		Kernels: []testrec.ScriptKernel{kFill, kSGD}, Allocs: []uint64{4096, 4096},
		Calls: []testrec.Call{
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(0)}, Writes: map[int][]byte{0: {1, 2, 3}}},
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(1)}, Writes: map[int][]byte{1: {4, 5, 6}}},
			{Kernel: 1, Args: []testrec.Arg{testrec.Ptr(0), testrec.Ptr(1), testrec.F32(lr), testrec.I32(111)}, Writes: map[int][]byte{0: out}},
		}}
}

// The runs part ways at an sgd step whose learning rate is one float ulp apart: diff says so,
// in text and in JSON, and leaves out the pointer parameters, whose addresses differ.
func TestDiffExplainsParameter(t *testing.T) {
	a := writeScripts(t, sgdStep(0.001, 0, []byte{9}))
	b := writeScripts(t, sgdStep(math.Nextafter32(0.001, 1), 0x7e00_0000_0000, []byte{10}))
	code, out, errs := runCLI("diff", a, b)
	expectOutput(t, "a learning rate an ulp apart", code, 1, out, errs,
		"  region 0 (4.0 KiB, parameter offset 0): 1 of 1 chunks differ, the first at byte 0x0 (chunk 0)\n"+
			"  why      inputs differ: parameter 2 (f32): 0.001 vs 0.0010000002\n"+
			"  params   parameter 2 (f32): 0.001 vs 0.0010000002\n"+
			"  before   region 0: the same in both runs\n"+
			"           region 1: the same in both runs\n"+
			"  3 launches matched, 3 compared; 1 of them differ after they ran, this one first\n")

	code, out, errs = runCLI("diff", "--format", "json", a, b)
	if code != 1 || errs != "" {
		t.Fatalf("--format json: exit %d, stderr %q", code, errs)
	}
	var r diff.Report
	decodeJSON(t, out, &r)
	if len(r.Pairs) != 1 || r.Pairs[0].Divergence == nil || r.Parted != 1 || r.Warnings == nil {
		t.Fatalf("report %+v; want one pair that parts ways, and a list of warnings", r)
	}
	p := r.Pairs[0]
	d := p.Divergence
	if p.Outcome != "part-ways" || !p.Memory || p.Matched != 3 || p.Compared != 3 || d.SeqA != 3 || d.SeqB != 3 || d.Kernel != "sgd" ||
		len(d.Regions) != 1 || d.Regions[0].DifferentChunks != 1 || d.Regions[0].FirstChunk != 0 || len(d.OriginA.Frames) != 0 || !d.OriginA.NoCallstack {
		t.Errorf("pair %+v, divergence %+v", p, d)
	}
	e := d.Explanation
	if e == nil || e.Kind != "parameters" || len(e.Params) != 1 || e.Params[0].Index != 2 || e.Params[0].Type != "f32" ||
		e.Params[0].A != "0.001" || e.Params[0].B != "0.0010000002" || len(e.Inputs) != 2 || e.Inputs[1].State != "same" || e.Inputs[1].A.Seq != 2 {
		t.Errorf("explanation %+v", e)
	}
}

// fillThenUse zeroes y, fills x (hashed or not) with x, then use(x, y) writes y.
func fillThenUse(mode string, fillUnhashed bool, x, y []byte) testrec.Script {
	return testrec.Script{Host: "box", Pid: 7, Mode: mode, Kernels: []testrec.ScriptKernel{kFill, kUse}, Allocs: []uint64{4096, 4096},
		Calls: []testrec.Call{
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(1)}},
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(0)}, Writes: map[int][]byte{0: x}, Unhashed: fillUnhashed},
			{Kernel: 1, Args: []testrec.Arg{testrec.Ptr(0), testrec.Ptr(1)}, Writes: map[int][]byte{1: y}},
		}}
}

// An input an earlier launch wrote differently without being hashed: in hash mode its state
// before the launch is not recorded, and diff says the difference may come from there; with
// snapshots, the states before differ, and diff names the launch. The same inputs, hashed,
// with different outputs: a nondeterministic kernel.
func TestDiffExplainsInputs(t *testing.T) {
	for _, c := range []struct {
		mode         string
		fillUnhashed bool
		xB           []byte
		want         string
	}{
		{"hash", true, []byte{2}, "  why      same recorded inputs, but region 0's state before the launch was not recorded (launch 2, the last to reach it, was not hashed (skipped_error)): the difference may come from there\n" +
			"  before   region 0: not recorded: launch 2, the last to reach it, was not hashed (skipped_error)\n" +
			"           region 1: the same in both runs\n"},
		{"snapshot", true, []byte{2}, "  why      inputs differ: region 0's state before the launch differs (last reached by launch 2, fill, which was not hashed)\n" +
			"  before   region 0: differs (last reached by launch 2, fill, which was not hashed)\n"},
		{"hash", false, []byte{1}, "  why      same inputs, different outputs: the kernel is nondeterministic (e.g. float atomics)\n"},
	} {
		a, b := writeScripts(t, fillThenUse(c.mode, c.fillUnhashed, []byte{1}, []byte{1})), writeScripts(t, fillThenUse(c.mode, c.fillUnhashed, c.xB, []byte{2}))
		code, out, errs := runCLI("diff", a, b)
		expectOutput(t, fmt.Sprintf("%s, fill hashed %v", c.mode, !c.fillUnhashed), code, 1, out, errs, "the runs part ways at launch 3 of A and 3 of B", c.want)
	}
}

// A two-rank job: rank 1's launch 2 computes another result; the all-reduce that follows, an
// NCCL collective, hands it to rank 0, which parts ways there (or, with the all-reduce not
// hashed, at the launch after it). diff names rank 1 first and says rank 0 followed it
// through the collective.
func TestDiffRanksFollowCollective(t *testing.T) {
	job := func(sum1 byte, reduceHashed bool) string {
		var scripts []testrec.Script
		for rank := range int32(2) {
			r := rank
			got := []byte{1}
			if rank == 1 {
				got = []byte{sum1}
			}
			reduced := []byte{1 + sum1}
			scripts = append(scripts, testrec.Script{Host: fmt.Sprintf("node%d", rank), Pid: 9, Rank: &r, Mode: "hash", StartUnixNs: 1e18,
				Kernels: []testrec.ScriptKernel{kFill, kReduce, kUse}, Allocs: []uint64{4096, 4096},
				Calls: []testrec.Call{
					{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(1)}},
					{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(0)}, Writes: map[int][]byte{0: got}},
					{Kernel: 1, Args: []testrec.Arg{testrec.Ptr(0)}, Writes: map[int][]byte{0: reduced}, Unhashed: !reduceHashed},
					{Kernel: 2, Args: []testrec.Arg{testrec.Ptr(0), testrec.Ptr(1)}, Writes: map[int][]byte{1: reduced}},
				}})
		}
		return writeScripts(t, scripts...)
	}
	for _, hashed := range []bool{true, false} {
		code, out, errs := runCLI("diff", job(1, hashed), job(2, hashed))
		at := 3
		if !hashed {
			at = 4
		}
		expectOutput(t, fmt.Sprintf("all-reduce hashed %v", hashed), code, 1, out, errs,
			"node1-9 vs node1-9: the runs part ways at launch 2 of A and 2 of B",
			fmt.Sprintf("node0-9 vs node0-9: the runs part ways at launch %d of A and %d of B", at, at),
			"2 of 2 pairs part ways; first in time: rank 1 (node1-9 vs node1-9) (wall clock of A)\n"+
				"rank 0 followed rank 1 through ncclDevKernel_AllReduce_Sum_f32_RING_LL (launch 3 of A)\n")
		if hashed && !strings.Contains(out, "  why      a collective: what it wrote depends on the other ranks' data\n") {
			t.Errorf("the all-reduce is not said to be a collective:\n%s", out)
		}
	}
	code, out, _ := runCLI("diff", "--format", "json", job(1, true), job(2, true))
	var r diff.Report
	decodeJSON(t, out, &r)
	if code != 1 || r.Parted != 2 || r.FirstInTime != "rank 1 (node1-9 vs node1-9)" || len(r.Followed) != 1 ||
		r.Followed[0] != (diff.Followed{Pair: "rank 0", Leader: "rank 1", Seq: 3, Kernel: "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"}) ||
		r.Pairs[0].Divergence.Explanation.Kind != "collective" {
		t.Errorf("exit %d, report %+v", code, r)
	}
}

// A launch reaching 90 allocations, all of them written differently: the regions, and their
// states before it, are listed 8 and counted after.
func TestDiffSummarisesRegions(t *testing.T) {
	many := func(v byte) testrec.Script {
		s := testrec.Script{Host: "box", Pid: 7, Mode: "hash", Kernels: []testrec.ScriptKernel{{Name: "touch_all"}}}
		call := testrec.Call{Writes: map[int][]byte{}}
		for i := range 90 {
			s.Allocs = append(s.Allocs, 256)
			s.Kernels[0].Params = append(s.Kernels[0].Params, 8)
			call.Args = append(call.Args, testrec.Ptr(i))
			call.Writes[i] = []byte{v}
		}
		s.Calls = []testrec.Call{call}
		return s
	}
	a, b := writeScripts(t, many(1)), writeScripts(t, many(2))
	code, out, errs := runCLI("diff", a, b)
	expectOutput(t, "90 regions", code, 1, out, errs,
		"  region 7 (256 B, parameter offset 56): 1 of 1 chunks differ, the first at byte 0x0 (chunk 0)\n  ... and 82 more regions\n  why ",
		"           region 7: not recorded: no earlier launch or copy reached it (a 2D copy, which gpurr does not hash, may have written it)\n           ... and 82 more regions\n")
	_, out, _ = runCLI("diff", "--format", "json", a, b)
	var r diff.Report
	decodeJSON(t, out, &r)
	if d := r.Pairs[0].Divergence; len(d.Regions) != 8 || d.RegionsMore != 82 || len(d.Explanation.Inputs) != 8 || d.Explanation.InputsMore != 82 {
		t.Errorf("%d regions and %d more, %d inputs and %d more; want 8 and 82 each", len(d.Regions), d.RegionsMore, len(d.Explanation.Inputs), d.Explanation.InputsMore)
	}
}

func f32Bytes(vs ...float32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// nanStep fills x with xv (by a launch hashed only, outside the snapshot selection, when
// xHashOnly), zeroes y, then use(x, y) writes a NaN into y.
func nanStep(mode string, nanScan bool, xv []byte, xHashOnly bool) testrec.Script {
	return testrec.Script{Host: "box", Pid: 7, Mode: mode, NanScan: nanScan, Kernels: []testrec.ScriptKernel{kFill, kUse}, Allocs: []uint64{4096, 4096},
		Calls: []testrec.Call{
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(0)}, Writes: map[int][]byte{0: xv}, HashOnly: xHashOnly},
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(1)}, Writes: map[int][]byte{1: f32Bytes(0, 0)}},
			{Kernel: 1, Args: []testrec.Arg{testrec.Ptr(0), testrec.Ptr(1)}, Writes: map[int][]byte{1: f32Bytes(1, float32(math.NaN()))}},
		}}
}

// gpurr nan says whether the launch it names made the NaN or passed it on: from the GPU's
// counts of the states its regions were left in, or from its snapshot before it.
func TestNanMadeOrPassed(t *testing.T) {
	nan := float32(math.NaN())
	code, out, errs := runCLI("nan", writeScripts(t, nanStep("hash", true, f32Bytes(1, 2), false)))
	expectOutput(t, "made, from the GPU's counts", code, 1, out, errs,
		"NaN or Inf first after launch 3",
		"  why      it made the NaN: its inputs were finite\n"+
			"  before   region 0: finite (counted on the GPU after launch 1)\n"+
			"           region 1: finite (counted on the GPU after launch 2)\n")

	code, out, errs = runCLI("nan", writeScripts(t, nanStep("snapshot", false, f32Bytes(1, 2), false)), "--dtype", "f32")
	expectOutput(t, "made, from snapshots", code, 1, out, errs,
		"region 1 (4.0 KiB, parameter offset 8): as f32 1 NaN, 0 Inf (first at byte 0x4, element 1)\n",
		"  why      it made the NaN: its inputs were finite\n"+
			"  before   region 0: finite (its snapshot before the launch)\n")

	// x holds a NaN from launch 1, which was hashed only: nan finds it first after launch 3,
	// which passed it on.
	passed := writeScripts(t, nanStep("snapshot", false, f32Bytes(7, nan), true))
	code, out, errs = runCLI("nan", passed, "--dtype", "f32")
	expectOutput(t, "passed on", code, 1, out, errs,
		"NaN or Inf first after launch 3",
		"  region 0 (4.0 KiB, parameter offset 0): as f32 1 NaN, 0 Inf (first at byte 0x4, element 1)\n"+
			"    already there before this launch (written by launch 1, fill)\n",
		"  why      it passed it on: region 0 held NaN before it (written by launch 1, fill)\n")

	code, out, errs = runCLI("nan", "--format", "json", passed, "--dtype", "f32")
	if code != 1 || errs != "" {
		t.Fatalf("--format json: exit %d, stderr %q", code, errs)
	}
	var r nanscan.Report
	decodeJSON(t, out, &r)
	f := r.Found
	if f == nil || f.Seq != 3 || f.Kernel != "use" || r.Source != "snapshots" || len(f.Regions) != 2 || f.Regions[0].Counts[0].FirstElement != 1 ||
		!f.Regions[0].Before || f.Inputs == nil || f.Inputs.Kind != "passed" || f.Inputs.Regions[0].Writer.Seq != 1 || f.Inputs.Regions[0].Writer.Kernel != "fill" {
		t.Errorf("report %+v, found %+v", r, f)
	}
	code, out, _ = runCLI("nan", "--format", "json", writeScripts(t, nanStep("hash", true, f32Bytes(1, 2), false)))
	r = nanscan.Report{}
	decodeJSON(t, out, &r)
	if code != 1 || r.Source != "gpu-counts" || r.Found == nil || !r.Found.Counted || r.Found.Inputs.Kind != "made" || r.Found.Inputs.Regions[1].From != "gpu-counts" {
		t.Errorf("GPU counts: exit %d, report %+v", code, r)
	}
}

// copiedLog copies xv into x from the host (a copy state, format 1.17, unless unseen: a copy
// the agent did not see), then log(x, y) writes a NaN into y, a stream-ordered allocation
// the agent cleared.
func copiedLog(xv []byte, unseen bool) testrec.Script {
	kLog := testrec.ScriptKernel{Name: "log_kernel", Params: []uint32{8, 8}}
	return testrec.Script{Host: "box", Pid: 7, Mode: "hash", NanScan: true, Kernels: []testrec.ScriptKernel{kLog}, Allocs: []uint64{4096, 4096},
		Cleared: map[int]bool{1: true},
		Calls: []testrec.Call{
			{Copied: !unseen, Copy: unseen, CopyLine: 12, Writes: map[int][]byte{0: xv}},
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(0), testrec.Ptr(1)}, Writes: map[int][]byte{1: f32Bytes(float32(math.NaN()), 0.5)}},
		}}
}

// gpurr nan tells a launch that made a NaN from finite inputs a copy from the host wrote (its
// copy state's counts) and an allocation gpurr cleared; from one whose input a copy wrote
// NaN into, which it passed on, naming the copy's line. Without the copy's state it cannot say.
func TestNanCopiedInputs(t *testing.T) {
	code, out, errs := runCLI("nan", writeScripts(t, copiedLog(f32Bytes(-1, 2), false)))
	expectOutput(t, "made from a copy's finite data", code, 1, out, errs,
		"NaN or Inf first after launch 1",
		"  why      it made the NaN: its inputs were finite\n"+
			"  before   region 0: finite (counted on the GPU after the host-to-device copy at train.py:12 <module>)\n"+
			"           region 1: finite (gpurr cleared it when it was allocated, and nothing wrote it since)\n")

	code, out, errs = runCLI("nan", writeScripts(t, copiedLog(f32Bytes(-1, float32(math.NaN())), false)))
	expectOutput(t, "passed on from a copy", code, 1, out, errs,
		"  why      it passed it on: region 0 held NaN before it (written by a host-to-device copy at train.py:12 <module>)\n")

	code, out, errs = runCLI("nan", writeScripts(t, copiedLog(f32Bytes(-1, 2), true)))
	expectOutput(t, "a copy the agent did not see", code, 1, out, errs,
		"  why      its inputs were finite where recorded, but region 0's state before it was not recorded (no earlier launch or copy reached it (a 2D copy, which gpurr does not hash, may have written it)): the NaN may come from there\n")
}

// verify --format json: one document with each process, the launch that differs and its
// regions; the exit status as in text.
func TestVerifyJSON(t *testing.T) {
	good := writeRun(t, "snapshot", trainRun(1.5, false))
	m := filepath.Join(t.TempDir(), "m.json")
	if code, _, errs := runCLI("manifest", good, "-o", m); code != 0 {
		t.Fatalf("manifest: exit %d, %s", code, errs)
	}
	code, out, errs := runCLI("verify", "--format", "json", writeRun(t, "snapshot", trainRun(2, false)), "--manifest", m)
	if code != 1 || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var r manifest.Report
	decodeJSON(t, out, &r)
	if len(r.Processes) != 1 || r.Manifest != m || r.Warnings == nil {
		t.Fatalf("report %+v", r)
	}
	p := r.Processes[0]
	if p.Outcome != "differs" || p.Matched != 4 || len(p.Mismatches) != 1 || p.Mismatches[0].Seq != 3 || p.Mismatches[0].Kernel != "scatter_add_kernel" ||
		len(p.Mismatches[0].Regions) != 1 || p.Mismatches[0].Regions[0].FirstChunk != 2 || p.Mismatches[0].Regions[0].Bytes == nil ||
		p.Mismatches[0].Origin.Frames[0] != "train.py:30 step" {
		t.Errorf("process %+v, mismatches %+v", p, p.Mismatches)
	}
	code, out, _ = runCLI("verify", "--format", "json", good, "--manifest", m)
	r = manifest.Report{}
	decodeJSON(t, out, &r)
	if code != 0 || r.Processes[0].Outcome != "matches" || len(r.Processes[0].Mismatches) != 0 {
		t.Errorf("the run itself: exit %d, report %+v", code, r)
	}
	expectUsageErrors(t, []usageCase{
		{[]string{"verify", "--format", "yaml", good, "--manifest", m}, `verify: unknown --format "yaml" (want text, json)`},
		{[]string{"diff", "--format", "csv", good, good}, `diff: unknown --format "csv" (want text, json)`},
		{[]string{"nan", "--format", "table", good}, `nan: unknown --format "table" (want text, json)`},
	})
}

// diff --replay runs the launch on a GPU: without one, it says so before reading the
// recordings, exit 2.
func TestDiffReplayNeedsGPU(t *testing.T) {
	if err := cuda.Init(); err == nil {
		t.Skip("a GPU is here: the message is for machines without one")
	}
	a := writeScripts(t, sgdStep(0.001, 0, []byte{9}))
	expectUsageErrors(t, []usageCase{
		{[]string{"diff", "--replay", "3", a, a}, "diff: --replay runs the launch again on a GPU, and this machine has none usable: no CUDA driver"},
		{[]string{"diff", "--replay", "-1", a, a}, `diff: invalid argument "-1" for "--replay" flag: want a whole number from 0 to 100000`},
	})
}
