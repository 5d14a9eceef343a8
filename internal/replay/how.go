package replay

import (
	"fmt"
	"strings"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/recording"
)

// How a recorded launch was made, beyond its shape. Replay launches as the
// program did where the recording says how: a cluster shape (Launch.cluster)
// and a cooperative launch (Launch.cooperative, format 1.14; before it, a
// cooperative launch call in Launch.api) it passes on; the attributes
// that only schedule the kernel (priority, programmatic stream
// serialization, memory sync domain) change no result of a launch run
// alone, and replay leaves them out.

// Recorded is the launch shape the recording holds, and how it was made.
func (c *Case) Recorded() cuda.LaunchConfig {
	l := c.Launch
	cfg := cuda.LaunchConfig{
		Grid:        cuda.Dim3{X: l.GetGrid().GetX(), Y: l.GetGrid().GetY(), Z: l.GetGrid().GetZ()},
		Block:       cuda.Dim3{X: l.GetBlock().GetX(), Y: l.GetBlock().GetY(), Z: l.GetBlock().GetZ()},
		SharedMem:   l.SharedMemBytes,
		Cooperative: l.GetCooperative() || strings.HasPrefix(c.launchCall(), "cuLaunchCooperativeKernel"),
	}
	if cl := l.GetCluster(); cl != nil {
		cfg.Cluster = cuda.Dim3{X: cl.X, Y: cl.Y, Z: cl.Z}
	}
	return cfg
}

// launchCall names the driver call that made the launch (recording's table
// of launch APIs), "launch (cbid N)" for one it does not know.
func (c *Case) launchCall() string { return recording.LaunchAPIName(c.Launch.GetApi()) }

// Unhonoured names what replay cannot do as the program did because the
// recording does not say it: in a recording older than Launch.cooperative
// (format 1.14), whether a cuLaunchKernelEx launch passed the cooperative
// attribute, or, for a launch whose call the recording does not name,
// whether it was cooperative at all. nil when replay launches as the
// program did.
func (c *Case) Unhonoured() []string {
	if c.CooperativeRecorded {
		return nil
	}
	switch call := strings.TrimSuffix(c.launchCall(), "_ptsz"); call {
	case "cuLaunchKernel", "cuLaunchCooperativeKernel":
		return nil
	case "cuLaunchKernelEx":
		return []string{"cuLaunchKernelEx's cooperative attribute, which the recording does not hold"}
	default:
		return []string{"a cooperative launch, if it was one: the recording names its call as " + call}
	}
}

// funcAttribute is a function attribute a launch needs set on its kernel.
type funcAttribute struct {
	attr  cuda.FuncAttribute
	value int
	why   string // for the error when the driver refuses it
}

// funcAttributes lists the function attributes the program must have set
// on its kernel for the recorded launch to run: more than 48 KiB of
// dynamic shared memory, a cluster of more than the 8 portable blocks.
func (c *Case) funcAttributes() []funcAttribute {
	var out []funcAttribute
	cfg := c.Recorded()
	if smem := cfg.SharedMem; smem > 48<<10 {
		out = append(out, funcAttribute{cuda.FuncMaxDynamicSharedBytes, int(smem), fmt.Sprintf("allow %d bytes of dynamic shared memory", smem)})
	}
	if cl := cfg.Cluster; uint64(cl.X)*uint64(cl.Y)*uint64(cl.Z) > 8 {
		out = append(out, funcAttribute{cuda.FuncNonPortableClusterSize, 1, fmt.Sprintf("allow a cluster of %dx%dx%d blocks (more than 8)", cl.X, cl.Y, cl.Z)})
	}
	return out
}

// blockRefused says why the driver refuses a launch of cfg on c's kernel, which takes at most
// maxThreads threads a block (cuFuncGetAttribute's MAX_THREADS_PER_BLOCK: its registers, and
// the block its code was built for: __launch_bounds__, .maxntid, .reqntid, as XLA's fusions
// are), "" when the block fits. The driver's own word for it is CUDA_ERROR_INVALID_VALUE. A
// recorded launch the program made with success cannot have broken it: the recording then
// names another kernel than the one that ran.
func (c *Case) blockRefused(cfg cuda.LaunchConfig, maxThreads int) string {
	b := cfg.Block
	threads := uint64(b.X) * uint64(b.Y) * uint64(b.Z)
	if maxThreads <= 0 || threads <= uint64(maxThreads) {
		return ""
	}
	why := fmt.Sprintf("the kernel takes at most %d threads a block, and the launch has %d (%dx%dx%d): the driver would refuse it (CUDA_ERROR_INVALID_VALUE)",
		maxThreads, threads, b.X, b.Y, b.Z)
	rec := c.Recorded().Block
	if b == rec && c.Launch.GetResult() == 0 {
		why += "; the program's launch succeeded, so the recording names another kernel than the one that ran " +
			"(older gpurr agents described a kernel handle once, and a program that unloads modules, as XLA's autotuning does, has the driver reuse handles): record again"
	}
	return why
}
