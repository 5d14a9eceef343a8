// Package agentenv is the contract between `gpurr record` and the agent it
// injects: the environment variables that configure the agent. It is pure Go
// so the CLI can use it without linking the agent.
package agentenv

import "strconv"

// Variables read by the agent in the recorded process.
const (
	Out       = "GPURR_OUT"        // recording directory; the agent is idle without it
	CUPTI     = "GPURR_CUPTI"      // path of the libcupti.so to load
	Kernels   = "GPURR_KERNELS"    // regular expression: record only matching kernel names
	Callstack = "GPURR_CALLSTACK"  // auto | python | native | off
	RingBytes = "GPURR_RING_BYTES" // size of the record ring (bytes)
	GPUTiming = "GPURR_GPU_TIMING" // on | off: kernel start/end times from CUPTI activity
	// Injection is read by the CUDA driver, which loads the named library
	// into every process that initializes CUDA and calls its
	// InitializeInjection.
	Injection = "CUDA_INJECTION64_PATH"
)

// Config is what record hands to the agent.
type Config struct {
	Out, Agent, CUPTI, Kernels, Callstack string
	RingBytes                             uint64
	GPUTiming                             bool
}

// Vars renders c as NAME=value entries to append to a child's environment.
func Vars(c Config) []string {
	v := []string{
		Injection + "=" + c.Agent,
		Out + "=" + c.Out,
		CUPTI + "=" + c.CUPTI,
		Callstack + "=" + c.Callstack,
		Kernels + "=" + c.Kernels,
		GPUTiming + "=" + onOff(c.GPUTiming),
	}
	if c.RingBytes != 0 {
		v = append(v, RingBytes+"="+strconv.FormatUint(c.RingBytes, 10))
	}
	return v
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
