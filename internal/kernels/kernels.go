// Package kernels holds gpurr's own GPU kernels as PTX text, embedded in
// the binary. The CUDA C sources are in src/; scripts/gen-ptx compiles
// them on a machine with nvcc to ptx/, for compute_80, which the driver's
// JIT compiles for any GPU of compute capability 8.0 or newer. Load the
// PTX with cuda.Context.LoadModule and look the kernels up by the names
// below.
package kernels

import _ "embed"

//go:embed ptx/demo.ptx
var demoPTX []byte

// DemoPTX returns the PTX module of the demo workload (src/demo.cu). The
// slice is a copy: callers may keep or change it.
func DemoPTX() []byte { return append([]byte(nil), demoPTX...) }

// Entry points of DemoPTX (extern "C", so unmangled).
const (
	// DemoFill is gpurr_demo_fill(float *x, unsigned n, unsigned mul,
	// unsigned add): x[i] = (i*mul + add) mod 1024 for i < n, one thread
	// per element.
	DemoFill = "gpurr_demo_fill"
	// DemoSaxpy is gpurr_demo_saxpy(unsigned n, float a, const float *x,
	// float *y): y[i] = a*x[i] + y[i], grid-stride.
	DemoSaxpy = "gpurr_demo_saxpy"
	// DemoReduce is gpurr_demo_reduce(const float *x, unsigned n,
	// unsigned long long *out): *out += sum of (integer) x[i]; needs a
	// power-of-two block size and blockDim.x*8 bytes of dynamic shared
	// memory.
	DemoReduce = "gpurr_demo_reduce"
)
