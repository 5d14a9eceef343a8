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
	"strings"
	"unsafe"
)

// LaunchConfig is the shape of a launch and how it is made. A zero Cluster
// launches without thread-block clusters; Cooperative launches the grid as
// cuLaunchCooperativeKernel does, all its blocks resident at once, so that
// a grid-wide sync (cooperative groups' grid.sync) can work.
type LaunchConfig struct {
	Grid, Block, Cluster Dim3
	SharedMem            uint32 // dynamic shared memory, bytes
	Cooperative          bool
}

// launchAttr is one CUlaunchAttribute a launch passes to cuLaunchKernelEx:
// value holds clusterDim's x, y, z, or cooperative's int in value[0].
type launchAttr struct {
	id    int32
	value [3]uint32
}

// The CUlaunchAttributeID values replay passes (dltypes.h, checked by layoutcheck).
const (
	attrCooperative int32 = C.GP_LAUNCH_ATTRIBUTE_COOPERATIVE
	attrCluster     int32 = C.GP_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
)

// attributes lists the launch attributes cfg needs, none for a plain launch.
func (cfg LaunchConfig) attributes() []launchAttr {
	var out []launchAttr
	if cl := cfg.Cluster; cl != (Dim3{}) {
		out = append(out, launchAttr{attrCluster, [3]uint32{cl.X, cl.Y, cl.Z}})
	}
	if cfg.Cooperative {
		out = append(out, launchAttr{attrCooperative, [3]uint32{1}})
	}
	return out
}

// Call names the driver call LaunchBuffer makes for cfg: cuLaunchKernel
// for a plain launch, else cuLaunchKernelEx with its attributes.
// cuLaunchCooperativeKernel takes no `extra` and so no parameter buffer:
// a cooperative launch goes through cuLaunchKernelEx's cooperative
// attribute, which the driver treats the same.
func (cfg LaunchConfig) Call() string {
	if len(cfg.attributes()) == 0 {
		return "cuLaunchKernel"
	}
	return "cuLaunchKernelEx"
}

// Attributes names how cfg launches beyond its shape, for messages:
// "cluster 2x1x1", "cooperative".
func (cfg LaunchConfig) Attributes() []string {
	var out []string
	for _, a := range cfg.attributes() {
		switch a.id {
		case attrCluster:
			out = append(out, fmt.Sprintf("cluster %dx%dx%d", a.value[0], a.value[1], a.value[2]))
		case attrCooperative:
			out = append(out, "cooperative")
		}
	}
	return out
}

// LaunchBuffer enqueues f with its parameters given as one buffer laid out
// as the kernel expects (the bytes a recording holds), passed through
// CU_LAUNCH_PARAM_BUFFER_POINTER. A launch with attributes (a cluster
// shape, cooperative) goes through cuLaunchKernelEx.
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
	attrs := cfg.attributes()
	if len(attrs) == 0 {
		r := C.gpurr_cuLaunchKernel(f.h, C.uint(g.X), C.uint(g.Y), C.uint(g.Z),
			C.uint(b.X), C.uint(b.Y), C.uint(b.Z), C.uint(cfg.SharedMem), s.handle(), nil, &extra[0])
		if err := check("cuLaunchKernel", r); err != nil {
			return fmt.Errorf("%w (kernel %s)", err, f.name)
		}
		return nil
	}
	attrSize := unsafe.Sizeof(C.gp_CUlaunchAttribute{})
	mem := C.malloc(C.size_t(unsafe.Sizeof(C.gp_CUlaunchConfig{}) + uintptr(len(attrs))*attrSize))
	if mem == nil {
		return fmt.Errorf("launch %s: out of host memory", f.name)
	}
	defer C.free(mem)
	lc := (*C.gp_CUlaunchConfig)(mem)
	first := (*C.gp_CUlaunchAttribute)(unsafe.Add(mem, unsafe.Sizeof(C.gp_CUlaunchConfig{})))
	for i, a := range attrs {
		attr := (*C.gp_CUlaunchAttribute)(unsafe.Add(unsafe.Pointer(first), uintptr(i)*attrSize))
		C.memset(unsafe.Pointer(attr), 0, C.size_t(attrSize))
		attr.id = C.int(a.id)
		// clusterDim's x, y, z and cooperative's int all start the value union.
		*(*[3]C.uint)(unsafe.Pointer(&attr.value)) = [3]C.uint{C.uint(a.value[0]), C.uint(a.value[1]), C.uint(a.value[2])}
	}
	*lc = C.gp_CUlaunchConfig{
		gridDimX: C.uint(g.X), gridDimY: C.uint(g.Y), gridDimZ: C.uint(g.Z),
		blockDimX: C.uint(b.X), blockDimY: C.uint(b.Y), blockDimZ: C.uint(b.Z),
		sharedMemBytes: C.uint(cfg.SharedMem), hStream: unsafe.Pointer(s.handle()),
		attrs: first, numAttrs: C.uint(len(attrs)),
	}
	if err := check("cuLaunchKernelEx", C.gpurr_cuLaunchKernelEx(lc, f.h, nil, &extra[0])); err != nil {
		return fmt.Errorf("%w (kernel %s, %s)", err, f.name, strings.Join(cfg.Attributes(), ", "))
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
	// FuncNonPortableClusterSize allows clusters of more than 8 blocks,
	// which the program must have set for such a launch to run.
	FuncNonPortableClusterSize FuncAttribute = C.GP_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
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
