package replay

import (
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
