package diff

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// explainScripts records a and b, aligns them, and explains their first divergence.
func explainScripts(t *testing.T, a, b testrec.Script) *Explanation {
	t.Helper()
	var runs [2]*Run
	for i, s := range []testrec.Script{a, b} {
		var err error
		if runs[i], err = Scan(testrec.OpenScript(t, s)); err != nil {
			t.Fatal(err)
		}
	}
	e, _ := explainRuns(t, runs[0], runs[1])
	return e
}

// explainRuns aligns two runs and explains their first divergence, read as side A.
func explainRuns(t *testing.T, a, b *Run) (*Explanation, *Side) {
	t.Helper()
	res := Align(a, b)
	if res.First == nil {
		t.Fatal("the runs agree")
	}
	sa, err := ReadLaunch(a.Process, a.Launches[res.First.A].Seq)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := ReadLaunch(b.Process, b.Launches[res.First.B].Seq)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Explain(a, b, *res.First, sa, sb)
	if err != nil {
		t.Fatal(err)
	}
	return e, sa
}

// sgd is a training step: fill(w), sgd(w, g, lr, n) with the learning rate given, then a read
// of w. Its allocations start at base, so the pointer parameters of two runs differ.
func sgd(lr float32, base uint64, sgdOut []byte) testrec.Script {
	return testrec.Script{Host: "box", Pid: 1, Mode: "hash", AllocBase: base,
		Kernels: []testrec.ScriptKernel{{Name: "fill", Params: []uint32{8}}, {Name: "sgd", Params: []uint32{8, 8, 4, 4}}},
		Allocs:  []uint64{4096, 4096},
		Calls: []testrec.Call{
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(0)}, Writes: map[int][]byte{0: {1, 2, 3}}},
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(1)}, Writes: map[int][]byte{1: {4, 5, 6}}},
			{Kernel: 1, Args: []testrec.Arg{testrec.Ptr(0), testrec.Ptr(1), testrec.F32(lr), testrec.I32(111)}, Writes: map[int][]byte{0: sgdOut}},
		}}
}

// A learning rate one float ulp apart is the parameter that differs, decoded as f32; the
// pointer parameters, whose addresses differ between the runs, are not.
func TestExplainParameter(t *testing.T) {
	lr := float32(0.001)
	e := explainScripts(t, sgd(lr, 0, []byte{9}), sgd(math.Nextafter32(lr, 1), 0x7e00_0000_0000, []byte{10}))
	if e.Kind != "parameters" || len(e.Params) != 1 {
		t.Fatalf("kind %q, parameters %+v; want one parameter", e.Kind, e.Params)
	}
	if p := e.Params[0]; p.Index != 2 || p.Type != "f32" || p.A != "0.001" || p.B != "0.0010000002" {
		t.Errorf("parameter %+v; want parameter 2 as f32, 0.001 vs 0.0010000002", p)
	}
	if want := "inputs differ: parameter 2 (f32): 0.001 vs 0.0010000002"; e.Verdict != want {
		t.Errorf("verdict %q; want %q", e.Verdict, want)
	}
	for _, in := range e.Inputs {
		if in.State != "same" {
			t.Errorf("region %d: %s; want the same before", in.Region, in.Text())
		}
	}
}

func TestParamDiffs(t *testing.T) {
	s := sgd(0.5, 0, nil)
	a, b := s, s
	a.Calls = append([]testrec.Call(nil), s.Calls...)
	b.Calls = append([]testrec.Call(nil), s.Calls...)
	b.Calls[2].Args = []testrec.Arg{testrec.Ptr(0), testrec.Ptr(1), testrec.F32(0.5), testrec.I32(112)}
	b.Calls[2].Writes = map[int][]byte{0: {7}}
	e := explainScripts(t, a, b)
	if len(e.Params) != 1 || e.Params[0].Text() != "parameter 3: 111 vs 112" {
		t.Errorf("parameters %+v; want parameter 3: 111 vs 112", e.Params)
	}
}

// twoStep is fill(x) then use(x, y), after a hashed zero(y) so that y's state before use is
// known; fill's and use's results are given per run.
func twoStep(mode string, fillUnhashed bool, x, y []byte, graphX []byte) testrec.Script {
	s := testrec.Script{Host: "box", Pid: 1, Mode: mode,
		Kernels: []testrec.ScriptKernel{{Name: "fill", Params: []uint32{8}}, {Name: "use", Params: []uint32{8, 8}}},
		Allocs:  []uint64{4096, 4096},
		Calls: []testrec.Call{
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(1)}},
			{Kernel: 0, Args: []testrec.Arg{testrec.Ptr(0)}, Writes: map[int][]byte{0: x}, Unhashed: fillUnhashed},
		}}
	if graphX != nil {
		s.Calls = append(s.Calls, testrec.Call{Graph: true, Writes: map[int][]byte{0: graphX}})
	}
	s.Calls = append(s.Calls, testrec.Call{Kernel: 1, Args: []testrec.Arg{testrec.Ptr(0), testrec.Ptr(1)}, Writes: map[int][]byte{1: y}})
	return s
}

// An input written differently by an earlier launch that was not hashed: in hash mode its state
// before the launch is not recorded, and the verdict says the difference may come from there;
// with snapshots the states before differ, and the verdict names the launch that reached it.
func TestExplainUnhashedWriter(t *testing.T) {
	e := explainScripts(t, twoStep("hash", true, []byte{1}, []byte{1}, nil), twoStep("hash", true, []byte{2}, []byte{2}, nil))
	want := "same recorded inputs, but region 0's state before the launch was not recorded (launch 2, the last to reach it, was not hashed (skipped_error)): the difference may come from there"
	if e.Kind != "unrecorded" || e.Verdict != want {
		t.Errorf("hash mode: %s: %q; want %q", e.Kind, e.Verdict, want)
	}
	if in := e.Inputs[1]; in.State != "same" || in.A.From != "launch" || in.A.Seq != 1 {
		t.Errorf("hash mode, region 1: %+v; want the same, after launch 1", in)
	}
	e = explainScripts(t, twoStep("snapshot", true, []byte{1}, []byte{1}, nil), twoStep("snapshot", true, []byte{2}, []byte{2}, nil))
	want = "inputs differ: region 0's state before the launch differs (last reached by launch 2, fill, which was not hashed)"
	if e.Kind != "input" || e.Verdict != want {
		t.Errorf("snapshot mode: %s: %q; want %q", e.Kind, e.Verdict, want)
	}
	if in := e.Inputs[0]; in.A.From != "snapshot" || in.State != "differs" {
		t.Errorf("snapshot mode, region 0: %+v; want differs, from the snapshot", in)
	}
}

// The same inputs, known in both runs, and different outputs: a nondeterministic kernel. A CUDA
// graph replay between the inputs' last hash and the launch makes them unknown instead.
func TestExplainNondeterministic(t *testing.T) {
	e := explainScripts(t, twoStep("hash", false, []byte{1}, []byte{1}, nil), twoStep("hash", false, []byte{1}, []byte{2}, nil))
	if e.Kind != "nondeterministic" || e.Verdict != "same inputs, different outputs: the kernel is nondeterministic (e.g. float atomics)" {
		t.Errorf("%s: %q; want nondeterministic", e.Kind, e.Verdict)
	}
	e = explainScripts(t, twoStep("hash", false, []byte{1}, []byte{1}, []byte{5}), twoStep("hash", false, []byte{1}, []byte{2}, []byte{6}))
	want := "same recorded inputs, but region 0's state before the launch was not recorded (after launch 2, which last reached it, ran call 3, with no memory state recorded (a CUDA graph replay, or a launch not recorded)): the difference may come from there"
	if e.Kind != "unrecorded" || e.Verdict != want {
		t.Errorf("after a graph replay: %s: %q; want %q", e.Kind, e.Verdict, want)
	}
}

func TestIsCollective(t *testing.T) {
	for name, want := range map[string]bool{
		"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)":                    true,
		"ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)":              true,
		"void nccl::reduce_kernel<float>(float*)":                                                      true,
		"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >(int, ...)": false,
		"my_kernel(ncclDevComm*)":    false,
		"triton_poi_fused_add_mul_0": false,
	} {
		if got := IsCollective(name); got != want {
			t.Errorf("IsCollective(%q) = %v; want %v", name, got, want)
		}
	}
}

// A collective whose regions differ before it (NCCL's own buffers do, run to run) is named a
// collective, not a launch whose inputs differ; a parameter that differs still comes first.
func TestVerdictCollectiveFirst(t *testing.T) {
	const reduce = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
	inputs := []Input{{Region: 0, State: "same"}, {Region: 1, State: "differs", A: Before{Writer: Writer{Seq: 3, Kernel: reduce}}}}
	if kind, _ := verdict(nil, inputs, reduce); kind != "collective" {
		t.Errorf("a collective with an input that differs: %s; want collective", kind)
	}
	if kind, line := verdict(nil, inputs, "fill"); kind != "input" || line != "inputs differ: region 1's state before the launch differs (last written by launch 3, "+reduce+")" {
		t.Errorf("a kernel with an input that differs: %s, %q", kind, line)
	}
	if kind, _ := verdict([]ParamDiff{{Index: 1, Type: "i32", A: "1", B: "2"}}, inputs, reduce); kind != "parameters" {
		t.Errorf("a collective with a parameter that differs: %s; want parameters", kind)
	}
}

// A struct parameter is listed by the words inside it that differ, with their offsets; the
// address words inside it, and a double, read as they should.
func TestParamDiffsStruct(t *testing.T) {
	kernel := &pb.Kernel{Params: []*pb.ParamInfo{{Offset: 0, Size: 24}, {Offset: 24, Size: 8}, {Offset: 32, Size: 8}}}
	buf := func(addr uint64, n int32, scale float32, lr float64, dst uint64) []byte {
		b := binary.LittleEndian.AppendUint64(nil, addr) // struct: a pointer, an int and a float, padding
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(scale))
		b = binary.LittleEndian.AppendUint64(b, 0)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(lr))
		return binary.LittleEndian.AppendUint64(b, dst)
	}
	a := &pb.Launch{Params: buf(0x7f00_0000_1000, 3, 0.5, 0.001, 0x7f00_0200_0000)}
	b := &pb.Launch{Params: buf(0x7e00_0000_1000, 4, 0.25, math.Nextafter(0.001, 1), 0)}
	got := ParamDiffs(kernel, a, b)
	want := []string{"parameter 1 (f64): 0.001 vs 0.0010000000000000002", "parameter 2: 0x7f0002000000 vs 0x0",
		"parameter 0 (24 bytes): +8: 3 vs 4, +12 (f32): 0.5 vs 0.25"}
	if len(got) != len(want) {
		t.Fatalf("got %+v; want %q", got, want)
	}
	for i := range want {
		if got[i].Text() != want[i] {
			t.Errorf("parameter %d: %q; want %q", i, got[i].Text(), want[i])
		}
	}
	// The same word named by a region is a pointer, whatever it holds.
	a.Regions = []*pb.Region{{ParamOffsets: []uint32{32}}}
	if got := ParamDiffs(kernel, a, b); len(got) != 2 {
		t.Errorf("with parameter 2 a region's pointer: %+v; want it left out", got)
	}
}

// A struct parameter whose words differ does not make the verdict (they may be bytes its kernel
// never reads, as the sizes past a TensorInfo's dimensions): a scalar one does, and without one
// the inputs speak.
func TestVerdictStructNotDeciding(t *testing.T) {
	inputs := []Input{{Region: 0, State: "same"}}
	garbage := ParamDiff{Index: 0, Type: "struct", Size: 216, Words: []WordDiff{{Offset: 24, Size: 4, Type: "i32", A: "254593360", B: "1074419760"}}}
	if kind, _ := verdict([]ParamDiff{garbage}, inputs, "indexFuncLargeIndex"); kind != "nondeterministic" {
		t.Errorf("only a struct's words differ, inputs the same: %s; want nondeterministic", kind)
	}
	lr := ParamDiff{Index: 3, Type: "f32", A: "-0.001", B: "-0.0010000002"}
	if kind, line := verdict([]ParamDiff{garbage, lr}, inputs, "multi_tensor_apply_kernel"); kind != "parameters" || line != "inputs differ: parameter 3 (f32): -0.001 vs -0.0010000002" {
		t.Errorf("a struct and a scalar differ: %s, %q; want the scalar", kind, line)
	}
}

// With --hash-steps, a launch's input written before the steps hashed has its state from the
// last step digest before it: two runs whose one launch of step 2 wrote other bytes are
// explained as a nondeterministic kernel, its inputs the same as the digest of step 1 holds.
func TestExplainFromDigest(t *testing.T) {
	runs := make([]*Run, 2)
	for i := range runs {
		o := testrec.DefaultTrained()
		o.Hash, o.HashSteps = true, [2]int{2, 2}
		o.DivergeStep, o.DivergeLaunch, o.Salt = 2, 0, uint64(i)
		var err error
		if runs[i], err = Scan(testrec.OpenTrained(t, o)); err != nil {
			t.Fatal(err)
		}
	}
	e, sa := explainRuns(t, runs[0], runs[1])
	if sa.Launch.GetSeq() != 9 || e.Kind != "nondeterministic" {
		t.Fatalf("launch %d, %s: %q (inputs %+v); want launch 9, nondeterministic", sa.Launch.GetSeq(), e.Kind, e.Verdict, e.Inputs)
	}
	if in := e.Inputs[0]; in.A.From != "digest" || *in.A.Step != 1 || !strings.Contains(in.Text(), "step 1's digest") {
		t.Errorf("region 0 before: %+v, %q; want step 1's digest", in, in.Text())
	}
}

// A struct parameter whose words differ comes after the scalar that differs, and its line shows
// three of its words and counts the rest.
func TestParamDiffsStructAfterScalars(t *testing.T) {
	kernel := &pb.Kernel{Params: []*pb.ParamInfo{{Offset: 0, Size: 64}, {Offset: 64, Size: 4}}}
	a, b := make([]byte, 68), make([]byte, 68)
	for i := range 8 { // 8-byte counts, as sizes in a struct are
		binary.LittleEndian.PutUint64(a[8*i:], uint64(i+1))
		binary.LittleEndian.PutUint64(b[8*i:], uint64(i+100))
	}
	binary.LittleEndian.PutUint32(a[64:], math.Float32bits(-0.05))
	binary.LittleEndian.PutUint32(b[64:], math.Float32bits(math.Nextafter32(-0.05, -1)))
	got := ParamDiffs(kernel, &pb.Launch{Params: a}, &pb.Launch{Params: b})
	if len(got) != 2 || got[0].Index != 1 || got[1].Index != 0 || len(got[1].Words) != 8 {
		t.Fatalf("got %+v; want parameter 1, then parameter 0 with 8 words", got)
	}
	if want := "parameter 1 (f32): -0.05 vs -0.050000004"; got[0].Text() != want {
		t.Errorf("scalar: %q; want %q", got[0].Text(), want)
	}
	if want := "parameter 0 (64 bytes): +0: 1 vs 100, +8: 2 vs 101, +16: 3 vs 102, and 5 more words"; got[1].Text() != want {
		t.Errorf("struct: %q; want %q", got[1].Text(), want)
	}
}
