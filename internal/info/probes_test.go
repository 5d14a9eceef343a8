package info

import (
	"strings"
	"testing"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Launches skipped for several reasons are counted by reason, most first; a kernel the
// recording does not describe is named by its id; a process without --probe has no line.
func TestProbesLine(t *testing.T) {
	d := &recording.Data{Process: &pb.Process{Probe: "k:entry,exit"},
		ProbeKernels: []*pb.ProbeKernel{{KernelId: 1, Instrumented: true}, {KernelId: 2, Instrumented: true}, {KernelId: 7, Reason: "no PTX"}},
		ProbeResults: []*pb.ProbeResult{{LaunchSeq: 1, Ctas: make([]byte, 64)}, {LaunchSeq: 2, Skipped: "pool full"},
			{LaunchSeq: 3, Skipped: "captured"}, {LaunchSeq: 4, Skipped: "pool full"}}}
	var b strings.Builder
	summarizeProbes(d).write(&textWriter{w: &b})
	want := "  probes       k:entry,exit: 2 kernels instrumented, 1 not (kernel 7: no PTX); 1 launch probed, 3 skipped (2: pool full; 1: captured)\n"
	if b.String() != want {
		t.Errorf("got  %q\nwant %q", b.String(), want)
	}
	// One kernel loaded twice (two handles, two ProbeKernels) is one kernel.
	d.Kernels = []*pb.Kernel{{Id: 1, Name: "triton_k", Identity: 77}, {Id: 3, Name: "triton_k", Identity: 77}}
	d.ProbeKernels = append(d.ProbeKernels, &pb.ProbeKernel{KernelId: 3, Instrumented: true})
	if p := summarizeProbes(d); p.Instrumented != 2 {
		t.Errorf("%d kernels instrumented, want 2 (triton_k twice, kernel 2)", p.Instrumented)
	}
	// The same name from another module is another kernel.
	d.Kernels[1].Identity = 78
	if p := summarizeProbes(d); p.Instrumented != 3 {
		t.Errorf("%d kernels instrumented, want 3 (triton_k of two modules, kernel 2)", p.Instrumented)
	}
	// The agent ran 3 launches with probes (and skipped 3 before them): 1 result arrived.
	d.Stats, d.End = &pb.Stats{ProbeLaunches: 3, ProbeSkipped: 3}, &pb.End{}
	b.Reset()
	summarizeProbes(d).write(&textWriter{w: &b})
	if !strings.Contains(b.String(), "; 2 launches ran with probes whose records never arrived") {
		t.Errorf("records lost: %q", b.String())
	}
	// A spec whose expression matched no launched kernel says so, and how to see the names.
	b.Reset()
	summarizeProbes(&recording.Data{Process: &pb.Process{Probe: "nope:entry,exit"}}).write(&textWriter{w: &b})
	if !strings.Contains(b.String(), "nope:entry,exit: no launched kernel's name matched") {
		t.Errorf("no kernel matched: %q", b.String())
	}
	if p := summarizeProbes(&recording.Data{Process: &pb.Process{}}); p != nil {
		t.Errorf("no --probe: %+v", p)
	}
}
