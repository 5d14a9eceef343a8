package recording_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func jaxLinks(t *testing.T, x *recording.XLA) (*recording.Links, []*pb.Launch) {
	t.Helper()
	l := recording.NewLinks()
	l.UseXLA(x)
	var launches []*pb.Launch
	for _, b := range testrec.JAXBatches(false) {
		l.Add(b, false)
		launches = append(launches, b.Launches...)
	}
	return l, launches
}

func TestXLALines(t *testing.T) {
	x := recording.ReadXLA(filepath.Join("internal", "xla", "testdata", "dump"))
	if x == nil || x.Err != nil || x.Modules != 3 {
		t.Fatalf("ReadXLA: %+v", x)
	}
	l, launches := jaxLinks(t, x)
	line := func(la *pb.Launch) string { return l.UserLine(l.LineCallstack(la)) }
	// Launch 7: gemm_fusion_dot_3, a tanh (line 14) fused into the dot of line 18.
	if got, want := line(launches[6]), testrec.JAXScript+":18 loss_fn +1 more"; got != want || l.OpName(launches[6]) != "jit(step)/jvp()/dot_general" {
		t.Errorf("launch 7: %q %q, want %q", got, l.OpName(launches[6]), want)
	}
	if !l.LinesFromXLA(launches[6]) || l.LinesFromXLA(launches[14]) {
		t.Errorf("LinesFromXLA: launch 7 %v, launch 15 %v", l.LinesFromXLA(launches[6]), l.LinesFromXLA(launches[14]))
	}
	// Launch 15: three modules have its kernel and none its grid: its own line, and op_name says why.
	if got := line(launches[14]); got != testrec.JAXScript+":29 <module>" || !strings.HasPrefix(l.OpName(launches[14]), "(ambiguous: 3 XLA modules") {
		t.Errorf("launch 15: %q %q", got, l.OpName(launches[14]))
	}
	// Without the dump, every launch keeps its own line.
	plain, _ := jaxLinks(t, nil)
	if got := plain.PythonLine(plain.LineCallstack(launches[6])); !strings.Contains(got, "pxla.py:420") || plain.OpName(launches[6]) != "" {
		t.Errorf("without a dump: %q %q", got, plain.OpName(launches[6]))
	}
	// A dump it cannot read changes nothing either.
	bad := recording.ReadXLA(filepath.Join("internal", "xla", "testdata", "bad"))
	if bad == nil || bad.Err == nil {
		t.Fatalf("unreadable dump: %+v", bad)
	}
	l2, _ := jaxLinks(t, bad)
	if l2.OpName(launches[6]) != "" || recording.ReadXLA(t.TempDir()) != nil {
		t.Error("an unreadable dump, or an empty folder, was used")
	}
}

func TestXLACompile(t *testing.T) {
	l, launches := jaxLinks(t, nil)
	for i, la := range launches {
		if want := la.GetTid() == testrec.JAXCompileTID; l.Compile(la) != want {
			t.Errorf("launch %d (tid %d): Compile %v", i+1, la.GetTid(), !want)
		}
	}
	// Autotuning on the calling thread: its Python stack is inside JAX's compiler; the
	// thread's launches outside it are the program's.
	compiling := &pb.Callstack{Id: 77, Frames: []*pb.Frame{
		{Kind: pb.Frame_PYTHON, File: "/venv/lib/python3.12/site-packages/jax/_src/compiler.py", Line: 300, Function: "backend_compile"},
		{Kind: pb.Frame_PYTHON, File: testrec.JAXScript, Line: 34, Function: "<module>"}}}
	la := &pb.Launch{Seq: 100, Tid: testrec.JAXMainTID, KernelId: launches[5].GetKernelId(), CallstackId: 77}
	l.Add(&pb.Batch{Callstacks: []*pb.Callstack{compiling}, Launches: []*pb.Launch{la}}, false)
	if !l.Compile(la) || l.Compile(launches[5]) {
		t.Errorf("compiling on the main thread: %v; the main thread's own launch: %v", l.Compile(la), l.Compile(launches[5]))
	}
}
