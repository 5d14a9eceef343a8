package recording_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Callstacks of a forward launch (model.py's line, through torch) and of a
// launch on autograd's engine thread, which runs no Python.
var (
	forwardStack = &pb.Callstack{Id: 10, Frames: []*pb.Frame{
		{Kind: pb.Frame_PYTHON, File: "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py", Line: 125, Function: "Linear.forward"},
		{Kind: pb.Frame_PYTHON, File: "model.py", Line: 42, Function: "forward"},
	}}
	engineStack = &pb.Callstack{Id: 20, Frames: []*pb.Frame{
		{Kind: pb.Frame_NATIVE, File: "libtorch_cpu.so", Function: "torch::autograd::Engine::thread_main"},
	}}
	pythonBackwardStack = &pb.Callstack{Id: 30, Frames: []*pb.Frame{
		{Kind: pb.Frame_PYTHON, File: "model.py", Line: 77, Function: "MyFunction.backward"},
	}}
)

func TestLineCallstack(t *testing.T) {
	d := &recording.Data{Callstacks: []*pb.Callstack{forwardStack, engineStack, pythonBackwardStack}}
	links := d.Links()
	backward := func(own, forward uint64) *pb.Launch {
		return &pb.Launch{CallstackId: own, Autograd: &pb.Autograd{Thread: 1, SequenceNr: 7, BackwardNode: "MmBackward0",
			ForwardCallstackId: forward, Link: pb.Autograd_NEXT_LAUNCH}}
	}
	for _, tc := range []struct {
		name        string
		launch      *pb.Launch
		forward     uint64 // ForwardCallstackID
		lines       uint64 // LineCallstack
		python, usr string
	}{
		{"no autograd context", &pb.Launch{CallstackId: 10}, 0, 10, "linear.py:125", "model.py:42 forward"},
		{"forward", &pb.Launch{CallstackId: 10, Autograd: &pb.Autograd{Thread: 1, SequenceNr: 8}}, 0, 10, "linear.py:125", "model.py:42 forward"},
		{"linked backward", backward(20, 10), 10, 10, "linear.py:125", "model.py:42 forward"},
		{"linked backward with a Python line of its own", backward(30, 10), 10, 10, "linear.py:125", "model.py:42 forward"},
		{"unlinked backward", backward(20, 0), 0, 20, "", ""},
		{"backward linked to a callstack the recording lacks", backward(30, 99), 99, 30, "model.py:77", "model.py:77 MyFunction.backward"},
		// A forward launch cannot have a forward launch: a damaged record.
		{"forward callstack without a node", &pb.Launch{CallstackId: 20, Autograd: &pb.Autograd{ForwardCallstackId: 10}}, 0, 20, "", ""},
		{"nil launch", nil, 0, 0, "", ""},
	} {
		if got := recording.ForwardCallstackID(tc.launch); got != tc.forward {
			t.Errorf("%s: ForwardCallstackID = %d, want %d", tc.name, got, tc.forward)
		}
		lines := links.LineCallstack(tc.launch)
		if lines != tc.lines {
			t.Errorf("%s: LineCallstack = %d, want %d", tc.name, lines, tc.lines)
		}
		if (links.Forward(tc.launch) != nil) != (lines != tc.launch.GetCallstackId()) {
			t.Errorf("%s: Forward = %v, but LineCallstack %d", tc.name, links.Forward(tc.launch), lines)
		}
		// python: a part of the innermost Python frame's text, "" for none.
		if py, usr := links.PythonLine(lines), links.UserLine(lines); (py == "") != (tc.python == "") || !strings.Contains(py, tc.python) || usr != tc.usr {
			t.Errorf("%s: python line %q, user line %q; want %q..., %q", tc.name, py, usr, tc.python, tc.usr)
		}
	}
}

func TestLine(t *testing.T) {
	for _, tc := range []struct {
		c    *pb.Callstack
		want string
	}{
		{forwardStack, "model.py:42 forward"},
		{&pb.Callstack{Frames: forwardStack.Frames[:1]}, "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py:125 Linear.forward"},
		{engineStack, ""},
		{nil, ""},
	} {
		if got := recording.Line(tc.c); got != tc.want {
			t.Errorf("Line(%v) = %q, want %q", tc.c.GetId(), got, tc.want)
		}
	}
}

// TestAutogradVariant: in testrec's autograd recording, each backward
// launch of the linked rank reads its lines from its forward launch, the
// same through Links and through Ordered, and the unlinked rank's launches
// carry no autograd context.
func TestAutogradVariant(t *testing.T) {
	set := testrec.Open(t, testrec.Autograd)
	for rank, p := range set.Processes {
		d, err := p.Load()
		if err != nil {
			t.Fatal(err)
		}
		links := d.Links()
		var seqs []uint64
		var backward, linked int
		for _, l := range d.Launches {
			seqs = append(seqs, l.GetSeq())
			if rank == 1 && l.GetAutograd() != nil {
				t.Errorf("%s: launch %d carries autograd context though the process is not linked", p.Name, l.GetSeq())
			}
			if l.GetAutograd().GetBackwardNode() == "" {
				continue
			}
			backward++
			if l.GetTid() == p.Info.GetPid() {
				t.Errorf("launch %d: a backward launch on the main thread", l.GetSeq())
			}
			if f := links.Forward(l); f != nil {
				linked++
				if links.PythonLine(links.LineCallstack(l)) == "" || links.PythonLine(l.GetCallstackId()) == links.PythonLine(f.GetId()) {
					t.Errorf("launch %d (%s): its line is not its forward launch's", l.GetSeq(), l.GetAutograd().GetBackwardNode())
				}
			}
		}
		if want := [2]int{int(d.Stats.GetBackwardLaunches()), int(d.Stats.GetBackwardLinked())}; [2]int{backward, linked} != want {
			t.Errorf("%s: %d backward launches, %d linked; stats say %v", p.Name, backward, linked, want)
		}
		if rank == 0 && (backward == 0 || linked == 0 || linked == backward) {
			t.Errorf("%s: %d backward launches, %d linked: want linked and unlinked ones", p.Name, backward, linked)
		}
		if _, err := p.Ordered(seqs, func(r *recording.LaunchRecord) error {
			if r.Forward.GetId() != links.Forward(r.Launch).GetId() {
				t.Errorf("launch %d: Ordered's forward callstack %v, Links' %v", r.Launch.GetSeq(), r.Forward.GetId(), links.Forward(r.Launch).GetId())
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDamagedAutograd: an autograd field of the wrong wire type reads as
// no autograd context, a forward callstack id of the wrong wire type as
// none found; an autograd message that does not decode is a one-line
// error naming the file.
func TestDamagedAutograd(t *testing.T) {
	wrongType := protowire.AppendVarint(protowire.AppendTag(nil, 23, protowire.VarintType), 5) // Launch.autograd as a number
	badForward := &pb.Autograd{BackwardNode: "MmBackward0", Link: pb.Autograd_NEXT_LAUNCH}
	badForward.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), []byte{1, 2})) // forward_callstack_id as bytes
	first := &pb.Launch{Seq: 1, CallstackId: 20}
	first.ProtoReflect().SetUnknown(wrongType)
	second := &pb.Launch{Seq: 2, CallstackId: 20, Autograd: badForward}
	dir := t.TempDir()
	writeProcess(t, dir, "p", []*pb.Batch{{Process: &pb.Process{Pid: 1}},
		{Callstacks: []*pb.Callstack{forwardStack, engineStack}, Launches: []*pb.Launch{first, second}}})
	d, err := openOne(t, dir).Load()
	if err != nil {
		t.Fatal(err)
	}
	links := d.Links()
	if got := d.Launches[0].GetAutograd(); got != nil {
		t.Errorf("an autograd field of the wrong type read as %v", got)
	}
	if ag := d.Launches[1].GetAutograd(); ag.GetBackwardNode() != "MmBackward0" || ag.GetForwardCallstackId() != 0 {
		t.Errorf("damaged autograd read as %v", ag)
	}
	for _, l := range d.Launches {
		if links.LineCallstack(l) != 20 || links.Forward(l) != nil {
			t.Errorf("launch %d: lines from %d, want its own callstack", l.GetSeq(), links.LineCallstack(l))
		}
	}

	// Field 23 as bytes that are no Autograd message: the frame does not decode.
	broken := &pb.Launch{Seq: 1}
	broken.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 23, protowire.BytesType), []byte{0xff, 0xff, 0xff}))
	dir = t.TempDir()
	path, _ := writeProcess(t, dir, "p", []*pb.Batch{{Process: &pb.Process{Pid: 1}}, {Launches: []*pb.Launch{broken}}})
	_, err = openOne(t, dir).Load()
	wantOneLine(t, err, path)
}
