package cli

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/instrument"
	"github.com/gpurr/gpurr/internal/probe"
	"github.com/gpurr/gpurr/internal/replay"
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
		{[]string{"probe", dir, "--launch", "2"}, "probe: the recording has no PTX of saxpy_gridstride's module"},
		{[]string{"probe", dir, "--launch", "2", "--top", "-1"}, "--top takes 0 or more"},
		{[]string{"probe", dir, "--launch", "1", "--ptx", file}, "no snapshot"},
		{[]string{"probe", dir, "--launch", "2", "--ptx", file, "-o", filepath.Join(dir, "t.json")}, "would write over"},
		{[]string{"probe", dir, "--launch", "2", "--ptx", file, "--count", "bogus"}, "--count: unknown instruction class \"bogus\""},
		{[]string{"probe", dir, "--launch", "2", "--ptx", file, "--count", "mbarrier"}, "--count mbarrier picks no instruction of saxpy_gridstride"},
	})
}

// Launch 2 of the replayable recording ran without live probes when recorded, but has
// snapshots: probe replays it; launch 3, captured, cannot be replayed, and probe says both why.
func TestLiveProbeSkipped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	if _, err := testrec.WriteReplayable(dir); err != nil {
		t.Fatal(err)
	}
	set, err := recording.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	src, err := replay.Open(set.Processes[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if p, err := liveProbe(src, probeOptions{launch: 2}); p != nil || err != nil {
		t.Errorf("launch 2: %v, %v; want a replay", p, err)
	}
	src.Data.ProbeResults = append(src.Data.ProbeResults, &pb.ProbeResult{LaunchSeq: 3, Skipped: "captured"})
	_, err = liveProbe(src, probeOptions{launch: 3})
	if err == nil || !strings.Contains(err.Error(), "launch 3 ran without probes when recorded (captured), and cannot be replayed: launch 3 was captured") {
		t.Errorf("launch 3: %v", err)
	}
}

func TestProbeSummaryText(t *testing.T) {
	buf := probe.Fill(8)
	for i := range 8 {
		d := uint64(1000)
		if i == 5 {
			d = 9000
		}
		r := buf[i*instrument.ProbeRecordBytes:]
		binary.LittleEndian.PutUint64(r, 100)
		binary.LittleEndian.PutUint64(r[8:], 100+d)
		binary.LittleEndian.PutUint32(r[16:], uint32(i%4))
		binary.LittleEndian.PutUint64(r[24:], uint64(10*i))
	}
	ctas, err := probe.Decode(buf)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sum := probe.Summarize(ctas, 2)
	writeProbeSummary(&out, sum, cuda.Dim3{X: 4, Y: 2, Z: 1})
	writeProbeCounts(&out, sum, "global-store", 3)
	for _, want := range []string{"8 CTAs, span 9.0 µs; CTA duration median 1.0 µs", "SMs: 4 used, 2.0 waves",
		"busiest SM 1: 2 CTAs, 10.0 µs busy", "       5  (1,1,0)              1  9.0 µs",
		"count of global-store (3 instructions in the kernel): 280 run in all; per CTA median 40, max 70 (CTA 7)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
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
