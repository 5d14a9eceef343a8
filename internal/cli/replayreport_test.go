package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/replay"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// The report says how a launch was replayed beyond its shape, and what the
// recording did not say of how the program launched it.
func TestReplayReportNamesHowLaunched(t *testing.T) {
	c := &replay.Case{Seq: 4, Name: "grid_sync", Launch: &pb.Launch{Api: 477, Grid: &pb.Dim3{X: 132, Y: 1, Z: 1}, Block: &pb.Dim3{X: 256, Y: 1, Z: 1}}}
	oc := replay.Outcome{Launch: 4, Kernel: c.Name, Case: c, Config: c.Recorded(), Unhonoured: c.Unhonoured(),
		Device: "NVIDIA H200 (sm_90)", Status: replay.StatusExact, Result: &replay.Result{Times: []time.Duration{time.Microsecond}}}
	var out bytes.Buffer
	printReplayReport(&out, newLaunchReport(oc, replay.Check{}), replay.Check{})
	if !strings.Contains(out.String(), "grid 132,1,1  block 256,1,1  shared memory 0  cooperative  on NVIDIA H200") {
		t.Errorf("a cooperative launch's report:\n%s", out.String())
	}
	c.Launch.Api, c.Launch.Cluster = 652, &pb.Dim3{X: 2, Y: 1, Z: 1}
	oc.Config, oc.Unhonoured = c.Recorded(), c.Unhonoured()
	j, err := json.Marshal(newLaunchReport(oc, replay.Check{}))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"attributes":["cluster 2x1x1"],"unhonoured":["cuLaunchKernelEx's cooperative attribute, which the recording does not hold"]`; !strings.Contains(string(j), want) {
		t.Errorf("cuLaunchKernelEx's report:\n%s\nwant %s", j, want)
	}
}

// A launch that faulted and lost the context is said to have; the ones
// after it say which fault they ran after, in a fresh context.
func TestReplayReportFreshContext(t *testing.T) {
	faulted := replay.Outcome{Launch: 7, Kernel: "grid_sync", Status: replay.StatusFailed, ContextLost: true, FreshContext: true,
		Why: "cuEventSynchronize: CUDA_ERROR_LAUNCH_FAILED"}
	if got, want := freshContextMessage(faulted), "replay: launch 7 faulted and left the CUDA context unusable; the launches after it run in a fresh context"; got != want {
		t.Errorf("message %q\nwant %q", got, want)
	}
	for _, c := range []struct {
		oc   replay.Outcome
		want string
	}{
		{faulted, `"fresh_context":true`},
		{replay.Outcome{Launch: 8, Status: replay.StatusExact, AfterFault: 7, Result: &replay.Result{}}, `"after_fault":7`},
	} {
		j, err := json.Marshal(newLaunchReport(c.oc, replay.Check{}))
		if err != nil || !strings.Contains(string(j), c.want) {
			t.Errorf("launch %d: %v %s, want %s", c.oc.Launch, err, j, c.want)
		}
	}
}

// A launch that differs from a torn recorded state is torn, not differing: it exits 0, its
// report says why, and --all's summary counts it apart.
func TestReplayReportTorn(t *testing.T) {
	why := "the recorded state after it is torn: stream 5's kernel k (launch 4) ran while it was taken; the replay was compared with bytes the launch may not have left: its difference is not the kernel's"
	c := &replay.Case{Seq: 2, Name: "saxpy", Launch: &pb.Launch{Grid: &pb.Dim3{X: 1, Y: 1, Z: 1}, Block: &pb.Dim3{X: 32, Y: 1, Z: 1}}}
	oc := replay.Outcome{Launch: 2, Kernel: c.Name, Case: c, Config: c.Recorded(), Device: "NVIDIA H200 (sm_90)",
		Status: replay.StatusTorn, Why: why, Result: &replay.Result{Times: []time.Duration{time.Microsecond}}}
	rep := newLaunchReport(oc, replay.Check{})
	var out bytes.Buffer
	printReplayReport(&out, rep, replay.Check{})
	if !strings.Contains(out.String(), "result: torn, not judged: "+why+"\n") {
		t.Errorf("report:\n%s", out.String())
	}
	if j, err := json.Marshal(rep); err != nil || !strings.Contains(string(j), `"status":"torn","why":"the recorded state after it is torn`) {
		t.Errorf("json %v %s", err, j)
	}
	out.Reset()
	printReplaySummary(&out, []launchReport{rep, {Status: replay.StatusExact}, {Status: replay.StatusDiffers}})
	if want := "3 launches replayed: 1 bit-exact, 1 torn, 1 differs\n"; out.String() != want {
		t.Errorf("summary %q, want %q", out.String(), want)
	}
	for s, want := range map[replay.Status]int{replay.StatusTorn: exitOK, replay.StatusExact: exitOK, replay.StatusDiffers: exitFound,
		replay.StatusNondeterministic: exitFound, replay.StatusFailed: exitUsage} {
		if got := statusExit(s); got != want {
			t.Errorf("%s: exit %d, want %d", s, got, want)
		}
	}
}

// A launch of a kernel that cannot run alone is skipped with its reason: --all's line says
// why, its summary counts it apart, and it exits 0.
func TestReplayReportSkipped(t *testing.T) {
	why := replay.NotStandalone("stream_executor::gpu::(anonymous namespace)::DelayKernel(stream_executor::GpuSemaphoreState volatile*, stream_executor::GpuSemaphoreState)")
	rep := newLaunchReport(replay.Outcome{Launch: 15, Kernel: "stream_executor::gpu::DelayKernel", Status: replay.StatusSkipped, Why: why}, replay.Check{})
	var out bytes.Buffer
	printReplayLine(&out, rep)
	if !strings.Contains(out.String(), "skipped          waits on host memory the program sets: not replayable standalone") {
		t.Errorf("line %q", out.String())
	}
	out.Reset()
	printReplaySummary(&out, []launchReport{rep, {Status: replay.StatusExact}})
	if want := "2 launches replayed: 1 bit-exact, 1 skipped\n"; out.String() != want {
		t.Errorf("summary %q, want %q", out.String(), want)
	}
	if got := statusExit(replay.StatusSkipped); got != exitOK {
		t.Errorf("skipped: exit %d, want %d", got, exitOK)
	}
}

// A launch run from PTX says so, with the PTX's origin and target, in the table and in JSON.
func TestReplayReportCode(t *testing.T) {
	code := "PTX from the recording, for compute_90, JIT-compiled by the driver for sm_90"
	c := &replay.Case{Seq: 2, Name: "saxpy", Launch: &pb.Launch{Grid: &pb.Dim3{X: 1, Y: 1, Z: 1}, Block: &pb.Dim3{X: 32, Y: 1, Z: 1}}}
	oc := replay.Outcome{Launch: 2, Kernel: c.Name, Case: c, Config: c.Recorded(), Device: "NVIDIA H200 (sm_90)", Code: code,
		Status: replay.StatusExact, Result: &replay.Result{Times: []time.Duration{time.Microsecond}}}
	rep := newLaunchReport(oc, replay.Check{})
	var out bytes.Buffer
	printReplayReport(&out, rep, replay.Check{})
	if !strings.Contains(out.String(), "on NVIDIA H200 (sm_90)\n  code: "+code+"\n") {
		t.Errorf("report:\n%s", out.String())
	}
	if j, err := json.Marshal(rep); err != nil || !strings.Contains(string(j), `"code":"`+code+`"`) {
		t.Errorf("json %v %s", err, j)
	}
}
