package replay

import (
	"strings"
	"testing"
)

// XLA's delay kernel is skipped with its reason, before any GPU is looked for: the test runs
// without one.
func TestReplaySkipsDelayKernel(t *testing.T) {
	_, src, c := replayableCase(t)
	for _, name := range []string{
		"stream_executor::gpu::(anonymous namespace)::DelayKernel(stream_executor::GpuSemaphoreState volatile*, stream_executor::GpuSemaphoreState)",
		"_ZN15stream_executor3gpu56_GLOBAL__N__0adca48f_23_delay_kernel_cuda_cu_cc_a9426d2111DelayKernelEPVNS_17GpuSemaphoreStateES2_",
	} {
		c.Name = name
		o := src.Replay(2, c, Request{})
		if o.Status != StatusSkipped || !strings.Contains(o.Why, "waits on host memory the program sets: not replayable standalone") || o.Result != nil {
			t.Errorf("%s: status %s, why %q", name, o.Status, o.Why)
		}
	}
	for _, name := range []string{"saxpy_gridstride", "DelayKernel", "wrapped_subtract"} {
		if why := NotStandalone(name); why != "" {
			t.Errorf("%s: skipped: %s", name, why)
		}
	}
}
