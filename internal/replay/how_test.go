package replay

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gpurr/gpurr/internal/cuda"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

func launchCase(api uint32, cluster *pb.Dim3, smem uint32) *Case {
	return &Case{Launch: &pb.Launch{Api: api, Grid: &pb.Dim3{X: 132, Y: 1, Z: 1}, Block: &pb.Dim3{X: 256, Y: 1, Z: 1},
		Cluster: cluster, SharedMemBytes: smem}}
}

// recordedCase is a launch of a recording that says whether each launch was cooperative.
func recordedCase(api uint32, cooperative bool) *Case {
	c := launchCase(api, nil, 0)
	c.Launch.Cooperative, c.CooperativeRecorded = cooperative, true
	return c
}

// A launch replays through the call and with the attributes its recording
// says the program used, and names what the recording does not say.
func TestHowRecordedLaunchesReplay(t *testing.T) {
	for _, c := range []struct {
		what       string
		c          *Case
		call       string
		attrs      string
		unhonoured string
	}{
		{"cuLaunchKernel", launchCase(307, nil, 0), "cuLaunchKernel", "", ""},
		{"cuLaunchCooperativeKernel", launchCase(477, nil, 0), "cuLaunchKernelEx", "cooperative", ""},
		{"cuLaunchCooperativeKernel_ptsz", launchCase(478, nil, 0), "cuLaunchKernelEx", "cooperative", ""},
		{"cuLaunchKernelEx with a cluster", launchCase(652, &pb.Dim3{X: 2, Y: 1, Z: 1}, 0), "cuLaunchKernelEx", "cluster 2x1x1",
			"cuLaunchKernelEx's cooperative attribute, which the recording does not hold"},
		{"cuLaunchKernelEx_ptsz", launchCase(653, nil, 0), "cuLaunchKernel", "",
			"cuLaunchKernelEx's cooperative attribute, which the recording does not hold"},
		{"no call recorded", launchCase(0, nil, 0), "cuLaunchKernel", "",
			"a cooperative launch, if it was one: the recording names its call as launch (cbid 0)"},
		{"cuLaunchKernelEx, cooperative, format 1.14", recordedCase(652, true), "cuLaunchKernelEx", "cooperative", ""},
		{"cuLaunchKernelEx, not cooperative, format 1.14", recordedCase(652, false), "cuLaunchKernel", "", ""},
	} {
		cfg := c.c.Recorded()
		if got := cfg.Call(); got != c.call {
			t.Errorf("%s: replayed through %s, want %s", c.what, got, c.call)
		}
		if got := strings.Join(cfg.Attributes(), ", "); got != c.attrs {
			t.Errorf("%s: attributes %q, want %q", c.what, got, c.attrs)
		}
		if got := strings.Join(c.c.Unhonoured(), "; "); got != c.unhonoured {
			t.Errorf("%s: unhonoured %q, want %q", c.what, got, c.unhonoured)
		}
	}
}

// The function attributes a launch needs: more than 48 KiB of dynamic
// shared memory, a cluster of more than 8 blocks.
func TestFuncAttributes(t *testing.T) {
	attrs := func(c *Case) []cuda.FuncAttribute {
		var out []cuda.FuncAttribute
		for _, a := range c.funcAttributes() {
			out = append(out, a.attr)
		}
		return out
	}
	if got := attrs(launchCase(652, &pb.Dim3{X: 8, Y: 1, Z: 1}, 48<<10)); len(got) != 0 {
		t.Errorf("a portable cluster and 48 KiB: %v", got)
	}
	got := attrs(launchCase(652, &pb.Dim3{X: 4, Y: 4, Z: 1}, 100<<10))
	if want := []cuda.FuncAttribute{cuda.FuncMaxDynamicSharedBytes, cuda.FuncNonPortableClusterSize}; !slices.Equal(got, want) {
		t.Errorf("a cluster of 16 and 100 KiB: %v, want %v", got, want)
	}
}

// A fault names what replay could not launch as the program did.
func TestRunFailedNamesUnhonoured(t *testing.T) {
	fault := &cuda.Error{Call: "cuEventSynchronize", Code: cuda.ErrorLaunchFailed, Name: "CUDA_ERROR_LAUNCH_FAILED"}
	why, lost := runFailed(launchCase(652, nil, 0), fault)
	if !lost || !strings.Contains(why, "CUDA_ERROR_LAUNCH_FAILED; replayed without cuLaunchKernelEx's cooperative attribute") {
		t.Errorf("cuLaunchKernelEx's fault: lost %v, %q", lost, why)
	}
	why, lost = runFailed(launchCase(477, nil, 0), fault)
	if !lost || strings.Contains(why, "replayed without") {
		t.Errorf("a cooperative launch's fault: lost %v, %q", lost, why)
	}
}

// A fault that loses the context does not take the later launches with it:
// they run after fresh contexts are made, and say so; where none can be
// made, the loop ends and returns the launches it did not replay.
func TestReplayAllGoesOnAfterAFault(t *testing.T) {
	one := func(seq uint64) Outcome {
		o := Outcome{Launch: seq, Status: StatusExact}
		if seq == 2 {
			o.Status, o.ContextLost, o.Why = StatusFailed, true, "cuEventSynchronize: CUDA_ERROR_LAUNCH_FAILED"
		}
		return o
	}
	var got []Outcome
	resets := 0
	rest := replayAll([]uint64{1, 2, 3, 4}, one, func() error { resets++; return nil }, func(o Outcome) { got = append(got, o) })
	if len(rest) != 0 || len(got) != 4 || resets != 1 {
		t.Fatalf("not replayed %v, %d outcomes, %d resets", rest, len(got), resets)
	}
	for i, want := range []struct {
		fresh bool
		after uint64
	}{{false, 0}, {true, 0}, {false, 2}, {false, 2}} {
		if got[i].FreshContext != want.fresh || got[i].AfterFault != want.after || got[i].Status != one(got[i].Launch).Status {
			t.Errorf("launch %d: fresh %v, after fault %d, %s", got[i].Launch, got[i].FreshContext, got[i].AfterFault, got[i].Status)
		}
	}
	got = nil
	rest = replayAll([]uint64{1, 2, 3, 4}, one, func() error { return errors.New("cuCtxSynchronize: CUDA_ERROR_LAUNCH_FAILED") }, func(o Outcome) { got = append(got, o) })
	if !slices.Equal(rest, []uint64{3, 4}) || len(got) != 2 || got[1].FreshContext ||
		!slices.Contains(got[1].Notes, "no fresh CUDA context could be made after the fault: cuCtxSynchronize: CUDA_ERROR_LAUNCH_FAILED") {
		t.Errorf("no fresh context: not replayed %v, outcomes %+v", rest, got)
	}
}

// A block larger than the kernel takes is named before the driver refuses it; a recorded one
// that the program launched with success says the recording names another kernel.
func TestBlockRefused(t *testing.T) {
	c := launchCase(652, nil, 0) // 256 threads a block
	if why := c.blockRefused(c.Recorded(), 256); why != "" {
		t.Errorf("a block the kernel takes: %s", why)
	}
	why := c.blockRefused(c.Recorded(), 128)
	if !strings.Contains(why, "at most 128 threads a block, and the launch has 256 (256x1x1)") || !strings.Contains(why, "names another kernel") {
		t.Errorf("the recorded block over the kernel's 128: %s", why)
	}
	asked := c.Recorded()
	asked.Block = cuda.Dim3{X: 512, Y: 1, Z: 1}
	if why := c.blockRefused(asked, 256); !strings.Contains(why, "the launch has 512") || strings.Contains(why, "another kernel") {
		t.Errorf("--block 512 over the kernel's 256: %s", why)
	}
	c.Launch.Result = 1
	if why := c.blockRefused(c.Recorded(), 128); strings.Contains(why, "another kernel") {
		t.Errorf("a launch the program made without success: %s", why)
	}
}
