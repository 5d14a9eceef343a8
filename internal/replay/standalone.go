package replay

import "strings"

// standaloneRule names kernels whose launch cannot run alone, by pieces of their name (all of
// them, demangled or mangled), and why: replay skips their launches and says so.
type standaloneRule struct {
	pieces []string
	why    string
}

// notStandalone is one row per kind of kernel that replay skips.
var notStandalone = []standaloneRule{
	// XLA's autotuner (stream_executor's GpuTimer) launches it to hold its stream while the
	// kernels it times queue up behind it: it spins until the host releases a semaphore in
	// pinned host memory, which a replay neither has nor sets.
	{pieces: []string{"stream_executor", "DelayKernel"},
		why: "waits on host memory the program sets: not replayable standalone (stream_executor's delay kernel spins until the host releases a semaphore; it computes nothing)"},
}

// NotStandalone says why launches of kernel (its demangled or mangled name) cannot be
// replayed alone, "" when they can.
func NotStandalone(kernel string) string {
	for _, r := range notStandalone {
		all := true
		for _, p := range r.pieces {
			all = all && strings.Contains(kernel, p)
		}
		if all {
			return r.why
		}
	}
	return ""
}
