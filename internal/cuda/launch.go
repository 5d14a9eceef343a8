package cuda

/*
#include <stdlib.h>
#include <string.h>
#include "dlcuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// LaunchConfig is the shape of a launch. A zero Cluster launches without
// thread-block clusters.
type LaunchConfig struct {
	Grid, Block, Cluster Dim3
	SharedMem            uint32 // dynamic shared memory, bytes
}

// LaunchBuffer enqueues f with its parameters given as one buffer laid out
// as the kernel expects (the bytes a recording holds), passed through
// CU_LAUNCH_PARAM_BUFFER_POINTER. A launch with a cluster shape goes
// through cuLaunchKernelEx.
func (s *Stream) LaunchBuffer(f Function, cfg LaunchConfig, params []byte) error {
	// The buffer, its size and the extra array live in C memory: the
	// driver reads them during the call.
	n := len(params)
	buf := C.malloc(C.size_t(n + 1))
	size := (*C.size_t)(C.malloc(C.size_t(unsafe.Sizeof(C.size_t(0)))))
	extra := (*[5]unsafe.Pointer)(C.malloc(C.size_t(5 * unsafe.Sizeof(unsafe.Pointer(nil)))))
	if buf == nil || size == nil || extra == nil {
		C.free(buf)
		C.free(unsafe.Pointer(size))
		C.free(unsafe.Pointer(extra))
		return fmt.Errorf("launch %s: out of host memory", f.name)
	}
	defer C.free(buf)
	defer C.free(unsafe.Pointer(size))
	defer C.free(unsafe.Pointer(extra))
	if n > 0 {
		C.memcpy(buf, unsafe.Pointer(&params[0]), C.size_t(n))
	}
	*size = C.size_t(n)
	*extra = [5]unsafe.Pointer{C.GP_LAUNCH_PARAM_BUFFER_POINTER, buf, C.GP_LAUNCH_PARAM_BUFFER_SIZE, unsafe.Pointer(size), C.GP_LAUNCH_PARAM_END}
	g, b := cfg.Grid, cfg.Block
	if cfg.Cluster == (Dim3{}) {
		r := C.gpurr_cuLaunchKernel(f.h, C.uint(g.X), C.uint(g.Y), C.uint(g.Z),
			C.uint(b.X), C.uint(b.Y), C.uint(b.Z), C.uint(cfg.SharedMem), s.handle(), nil, &extra[0])
		if err := check("cuLaunchKernel", r); err != nil {
			return fmt.Errorf("%w (kernel %s)", err, f.name)
		}
		return nil
	}
	mem := C.malloc(C.size_t(unsafe.Sizeof(C.gp_CUlaunchConfig{}) + unsafe.Sizeof(C.gp_CUlaunchAttribute{})))
	if mem == nil {
		return fmt.Errorf("launch %s: out of host memory", f.name)
	}
	defer C.free(mem)
	lc := (*C.gp_CUlaunchConfig)(mem)
	attr := (*C.gp_CUlaunchAttribute)(unsafe.Add(mem, unsafe.Sizeof(C.gp_CUlaunchConfig{})))
	C.memset(unsafe.Pointer(attr), 0, C.size_t(unsafe.Sizeof(*attr)))
	attr.id = C.GP_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
	cluster := (*[3]C.uint)(unsafe.Pointer(&attr.value))
	*cluster = [3]C.uint{C.uint(cfg.Cluster.X), C.uint(cfg.Cluster.Y), C.uint(cfg.Cluster.Z)}
	*lc = C.gp_CUlaunchConfig{
		gridDimX: C.uint(g.X), gridDimY: C.uint(g.Y), gridDimZ: C.uint(g.Z),
		blockDimX: C.uint(b.X), blockDimY: C.uint(b.Y), blockDimZ: C.uint(b.Z),
		sharedMemBytes: C.uint(cfg.SharedMem), hStream: unsafe.Pointer(s.handle()),
		attrs: attr, numAttrs: 1,
	}
	if err := check("cuLaunchKernelEx", C.gpurr_cuLaunchKernelEx(lc, f.h, nil, &extra[0])); err != nil {
		return fmt.Errorf("%w (kernel %s, cluster %dx%dx%d)", err, f.name, cfg.Cluster.X, cfg.Cluster.Y, cfg.Cluster.Z)
	}
	return nil
}

// FuncAttribute is a CUfunction_attribute.
type FuncAttribute int32

// The function attributes replay reads or sets.
const (
	FuncMaxThreadsPerBlock    FuncAttribute = C.GP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
	FuncStaticSharedBytes     FuncAttribute = C.GP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
	FuncNumRegs               FuncAttribute = C.GP_FUNC_ATTRIBUTE_NUM_REGS
	FuncMaxDynamicSharedBytes FuncAttribute = C.GP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
)

// Attribute reads a function attribute (cuFuncGetAttribute).
func (f Function) Attribute(a FuncAttribute) (int, error) {
	var v C.int
	if err := check("cuFuncGetAttribute", C.gpurr_cuFuncGetAttribute(&v, C.int(a), f.h)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// SetAttribute sets a function attribute (cuFuncSetAttribute); a launch
// with more than 48 KiB of dynamic shared memory needs
// FuncMaxDynamicSharedBytes raised first.
func (f Function) SetAttribute(a FuncAttribute, v int) error {
	return check("cuFuncSetAttribute", C.gpurr_cuFuncSetAttribute(f.h, C.int(a), C.int(v)))
}

// Param is one kernel parameter's place in the parameter buffer.
type Param struct{ Offset, Size uint32 }

// ErrNotSupported is returned for a call this driver does not export.
var ErrNotSupported = errors.New("not supported by this CUDA driver")

// Params lists the kernel's parameters (cuFuncGetParamInfo, CUDA 12.4+).
func (f Function) Params() ([]Param, error) {
	var out []Param
	for i := 0; ; i++ {
		var off, size C.size_t
		r := Result(C.gpurr_cuFuncGetParamInfo(f.h, C.size_t(i), &off, &size))
		switch r {
		case Success:
			out = append(out, Param{uint32(off), uint32(size)})
		case ErrorInvalidValue:
			return out, nil
		case ErrorNotInitialized:
			return nil, fmt.Errorf("cuFuncGetParamInfo: %w", ErrNotSupported)
		default:
			return nil, check("cuFuncGetParamInfo", C.CUresult(r))
		}
	}
}
