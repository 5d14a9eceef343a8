package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/testrec"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Without a GPU, probe gets as far as instrumenting the kernel, then says why it stops; bad
// input is refused before that.
func TestProbeWithoutGPU(t *testing.T) {
	skipWithGPU(t)
	dir := filepath.Join(t.TempDir(), "rec")
	if _, err := testrec.WriteReplayable(dir); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "k.ptx")
	if err := os.WriteFile(file, []byte(saxpyPTX), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI("probe", dir, "--launch", "2", "--ptx", file)
	if _, err := cuda.Probe(); code != exitFailure || !strings.Contains(stderr, "probe: no usable GPU: "+err.Error()) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	expectUsageErrors(t, []usageCase{
		{[]string{"probe", dir, "--launch", "2"}, "probe: the recorded module of saxpy_gridstride ("},
		{[]string{"probe", dir, "--launch", "2", "--top", "-1"}, "--top takes 0 or more"},
		{[]string{"probe", dir, "--launch", "1", "--ptx", file}, "no snapshot"},
		{[]string{"probe", dir, "--launch", "2", "--ptx", file, "-o", filepath.Join(dir, "t.json")}, "would write over"},
		{[]string{"probe", dir, "--launch", "2", "--ptx", file, "--count", "bogus"}, "--count: unknown instruction class \"bogus\""},
		{[]string{"probe", dir, "--launch", "2", "--ptx", file, "--count", "mbarrier"}, "--count mbarrier picks no instruction of saxpy_gridstride"},
	})
}

// probedRecording is a recording of one launch, 5, probed live with grid as recorded and these
// CTAs.
func probedRecording(t *testing.T, grid *pb.Dim3, ctas []recording.ProbeCTA) string {
	n := 0
	for _, c := range ctas {
		n = max(n, c.Index+1)
	}
	set := testrec.OpenBatches(t, &pb.Batch{Process: &pb.Process{Pid: 1, Probe: "k:entry,exit"}},
		&pb.Batch{Kernels: []*pb.Kernel{{Id: 9, Name: "k", Demangled: "k"}},
			Launches:     []*pb.Launch{{Seq: 5, KernelId: 9, Grid: grid, Block: &pb.Dim3{X: 32, Y: 1, Z: 1}}},
			ProbeKernels: []*pb.ProbeKernel{{KernelId: 9, Instrumented: true}},
			Probes:       []*pb.ProbeResult{{LaunchSeq: 5, Ctas: testrec.ProbeBuffer(n, ctas...)}}})
	return set.Processes[0].Dir
}

// A launch whose recorded grid has a zero or missing dimension (a damaged record) is summed up
// all the same: its CTAs' coordinates are unknown, not a division by zero.
func TestProbeGridWithoutADimension(t *testing.T) {
	ctas := []recording.ProbeCTA{{Index: 0, Start: 10, End: 40, SM: 1}, {Index: 1, Start: 10, End: 90, SM: 2}}
	for _, grid := range []*pb.Dim3{nil, {X: 2, Y: 0, Z: 1}, {X: 0, Y: 1, Z: 1}, {X: 2, Y: 1}} {
		code, stdout, stderr := runCLI("probe", probedRecording(t, grid, ctas), "--launch", "5")
		if code != 0 || !strings.Contains(stdout, "2 CTAs, span 0.1 µs") || !strings.Contains(stdout, "       1  ?                    2  0.1 µs") {
			t.Errorf("grid %v: exit %d, stdout:\n%s\nstderr: %s", grid, code, stdout, stderr)
		}
	}
}

// With every CTA 0 ns long (a clock that did not move), the busiest SM is the one that ran
// the most CTAs, not SM 0 with none.
func TestProbeBusiestSMWithoutTime(t *testing.T) {
	var ctas []recording.ProbeCTA
	for i := range 256 {
		ctas = append(ctas, recording.ProbeCTA{Index: i, Start: 100, End: 100, SM: 7})
	}
	ctas[0].SM = 3
	code, stdout, stderr := runCLI("probe", probedRecording(t, &pb.Dim3{X: 256, Y: 1, Z: 1}, ctas), "--launch", "5")
	if code != 0 || !strings.Contains(stdout, "(busiest SM 7: 255 CTAs, 0.0 µs busy)") {
		t.Errorf("exit %d, stdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
}
