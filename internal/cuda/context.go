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
	"math"
	"runtime"
	"time"
	"unsafe"
)

// Context is a device's primary context, current on the OS thread of the
// goroutine that opened it. The methods that allocate, load and create
// streams act on the current context, so call them from that goroutine.
type Context struct {
	dev    Device
	h      C.CUcontext
	closed bool
}

// PrimaryContext retains the device's primary context (the one the CUDA
// runtime shares, so no cuCtxCreate versioning is involved), locks the
// calling goroutine to its OS thread and makes the context current there.
// Close undoes all three.
func (d Device) PrimaryContext() (*Context, error) {
	var h C.CUcontext
	if err := check("cuDevicePrimaryCtxRetain", C.gpurr_cuDevicePrimaryCtxRetain(&h, C.CUdevice(d))); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	if err := check("cuCtxSetCurrent", C.gpurr_cuCtxSetCurrent(h)); err != nil {
		runtime.UnlockOSThread()
		C.gpurr_cuDevicePrimaryCtxRelease(C.CUdevice(d))
		return nil, err
	}
	return &Context{dev: d, h: h}, nil
}

// Device returns the context's device.
func (c *Context) Device() Device { return c.dev }

// Handle returns the CUcontext value, as recordings show it.
func (c *Context) Handle() uintptr { return uintptr(unsafe.Pointer(c.h)) }

// Synchronize waits for all work in the context (cuCtxSynchronize).
func (c *Context) Synchronize() error {
	return check("cuCtxSynchronize", C.gpurr_cuCtxSynchronize())
}

// Close makes no context current, releases the primary context and
// unlocks the goroutine from its thread. It must run on the goroutine that
// called PrimaryContext; a second Close does nothing.
func (c *Context) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	defer runtime.UnlockOSThread()
	err := check("cuCtxSetCurrent", C.gpurr_cuCtxSetCurrent(nil))
	return errors.Join(err, check("cuDevicePrimaryCtxRelease_v2", C.gpurr_cuDevicePrimaryCtxRelease(C.CUdevice(c.dev))))
}

// ResetContexts destroys every device's primary context with all it holds
// (cuDevicePrimaryCtxReset_v2) and checks that a fresh one works: after a
// fault (an illegal address, a launch failure) the old context refuses all
// work, and work can go on only in a new one. Call it when no Context is
// open. The driver does not promise that a fresh context recovers from
// every fault; an error says this one did not, and the process must end.
func ResetContexts() error {
	n, err := DeviceCount()
	if err != nil {
		return err
	}
	for i := range n {
		d, err := DeviceGet(i)
		if err != nil {
			return err
		}
		if err := check("cuDevicePrimaryCtxReset_v2", C.gpurr_cuDevicePrimaryCtxReset(C.CUdevice(d))); err != nil {
			return fmt.Errorf("device %d: %w", i, err)
		}
		ctx, err := d.PrimaryContext()
		if err != nil {
			return fmt.Errorf("device %d: %w", i, err)
		}
		p, err := ctx.MemAlloc(256)
		if err == nil {
			err = errors.Join(MemsetD8(p, 0, 256), ctx.Synchronize(), ctx.MemFree(p))
		}
		if err = errors.Join(err, ctx.Close()); err != nil {
			return fmt.Errorf("device %d: a fresh context: %w", i, err)
		}
	}
	return nil
}

// Module is a loaded CUmodule.
type Module struct{ h C.CUmodule }

// LoadModule loads a module image (PTX text, a cubin or a fatbin) with
// cuModuleLoadDataEx. PTX is compiled for the device by the driver's JIT; when
// that fails, the error carries the JIT's log (ptxas's line and reason).
func (c *Context) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, errors.New("cuModuleLoadData: empty module image")
	}
	// PTX must end with a NUL; a copy in C memory with one appended serves
	// every image kind.
	buf := C.malloc(C.size_t(len(image) + 1))
	if buf == nil {
		return nil, errors.New("cuModuleLoadData: out of host memory")
	}
	defer C.free(buf)
	C.memcpy(buf, unsafe.Pointer(&image[0]), C.size_t(len(image)))
	*(*byte)(unsafe.Add(buf, len(image))) = 0
	var h C.CUmodule
	var jitLog [4096]C.char
	if err := check("cuModuleLoadData", C.gpurr_cuModuleLoadData(&h, buf, &jitLog[0], C.uint(len(jitLog)))); err != nil {
		if e, ok := err.(*Error); ok {
			e.Detail = oneLine(C.GoString(&jitLog[0]))
		}
		return nil, err
	}
	return &Module{h: h}, nil
}

// Function looks up a kernel by its (mangled) name.
func (m *Module) Function(name string) (Function, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f C.CUfunction
	if err := check("cuModuleGetFunction", C.gpurr_cuModuleGetFunction(&f, m.h, cname)); err != nil {
		return Function{}, fmt.Errorf("%w (kernel %s)", err, name)
	}
	return Function{h: f, name: name}, nil
}

// Global returns the device address and size of a module-scope variable.
func (m *Module) Global(name string) (DevicePtr, uint64, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var p C.CUdeviceptr
	var n C.size_t
	if err := check("cuModuleGetGlobal", C.gpurr_cuModuleGetGlobal(&p, &n, m.h, cname)); err != nil {
		return 0, 0, fmt.Errorf("%w (variable %s)", err, name)
	}
	return DevicePtr(p), uint64(n), nil
}

// Unload unloads the module.
func (m *Module) Unload() error {
	return check("cuModuleUnload", C.gpurr_cuModuleUnload(m.h))
}

// Function is a kernel of a loaded module.
type Function struct {
	h    C.CUfunction
	name string
}

// Name returns the name the function was looked up by.
func (f Function) Name() string { return f.name }

// DevicePtr is a CUdeviceptr.
type DevicePtr uint64

// MemAlloc allocates bytes of device memory (cuMemAlloc_v2).
func (c *Context) MemAlloc(bytes int) (DevicePtr, error) {
	var p C.CUdeviceptr
	if err := check("cuMemAlloc_v2", C.gpurr_cuMemAlloc(&p, C.size_t(bytes))); err != nil {
		return 0, fmt.Errorf("%w (%d bytes)", err, bytes)
	}
	return DevicePtr(p), nil
}

// MemFree frees device memory from MemAlloc.
func (c *Context) MemFree(p DevicePtr) error {
	return check("cuMemFree_v2", C.gpurr_cuMemFree(C.CUdeviceptr(p)))
}

// Scalar is an element type that copies to and from the device as its
// bytes.
type Scalar interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// CopyHtoD copies src to device memory at dst (cuMemcpyHtoD_v2, which
// returns once src may be reused).
func CopyHtoD[T Scalar](dst DevicePtr, src []T) error {
	if len(src) == 0 {
		return nil
	}
	n := uintptr(len(src)) * unsafe.Sizeof(src[0])
	return check("cuMemcpyHtoD_v2", C.gpurr_cuMemcpyHtoD(C.CUdeviceptr(dst), unsafe.Pointer(&src[0]), C.size_t(n)))
}

// CopyDtoH fills dst from device memory at src (cuMemcpyDtoH_v2, which
// returns when the copy is done).
func CopyDtoH[T Scalar](dst []T, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	n := uintptr(len(dst)) * unsafe.Sizeof(dst[0])
	return check("cuMemcpyDtoH_v2", C.gpurr_cuMemcpyDtoH(unsafe.Pointer(&dst[0]), C.CUdeviceptr(src), C.size_t(n)))
}

// Stream is a CUstream. The nil *Stream is the legacy default stream.
type Stream struct{ h C.CUstream }

// Stream creation flags (CUstream_flags).
const (
	StreamDefault     = 0 // synchronizes with the legacy default stream
	StreamNonBlocking = 1
)

// NewStream creates a stream with the given flags.
func (c *Context) NewStream(flags uint32) (*Stream, error) {
	var h C.CUstream
	if err := check("cuStreamCreate", C.gpurr_cuStreamCreate(&h, C.uint(flags))); err != nil {
		return nil, err
	}
	return &Stream{h: h}, nil
}

func (s *Stream) handle() C.CUstream {
	if s == nil {
		return nil
	}
	return s.h
}

// Handle returns the CUstream value, as recordings show it (0 for the
// legacy default stream).
func (s *Stream) Handle() uintptr { return uintptr(unsafe.Pointer(s.handle())) }

// Synchronize waits for the stream's work.
func (s *Stream) Synchronize() error {
	return check("cuStreamSynchronize", C.gpurr_cuStreamSynchronize(s.handle()))
}

// Destroy destroys the stream; work already queued still runs.
func (s *Stream) Destroy() error {
	if s == nil {
		return nil
	}
	return check("cuStreamDestroy_v2", C.gpurr_cuStreamDestroy(s.h))
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// Launch enqueues f on the stream with cuLaunchKernel. Each argument is
// one kernel parameter, passed as its bytes: a DevicePtr, int32, uint32,
// int64, uint64, float32 or float64, or a []byte holding a struct passed
// by value (a plain int is refused: its size on the device side would be a
// guess). The driver copies the parameters
// before cuLaunchKernel returns.
func (s *Stream) Launch(f Function, grid, block Dim3, sharedMem uint32, args ...any) error {
	call := "cuLaunchKernel"
	// One C block holds a pointer per argument followed by an 8-byte slot
	// per argument value: the driver reads the values through the pointers,
	// and nothing it sees lives in Go memory.
	n := len(args)
	ptrBytes := uintptr(n) * unsafe.Sizeof(unsafe.Pointer(nil))
	mem := C.malloc(C.size_t(ptrBytes + uintptr(n)*8 + 1))
	if mem == nil {
		return fmt.Errorf("%s %s: out of host memory", call, f.name)
	}
	defer C.free(mem)
	ptrs := unsafe.Slice((*unsafe.Pointer)(mem), n)
	for i, a := range args {
		slot := unsafe.Add(mem, ptrBytes+uintptr(i)*8)
		switch v := a.(type) {
		case DevicePtr:
			*(*uint64)(slot) = uint64(v)
		case uint64:
			*(*uint64)(slot) = v
		case int64:
			*(*int64)(slot) = v
		case uint32:
			*(*uint32)(slot) = v
		case int32:
			*(*int32)(slot) = v
		case float32:
			*(*uint32)(slot) = math.Float32bits(v)
		case float64:
			*(*uint64)(slot) = math.Float64bits(v)
		case []byte: // a struct passed by value, as its bytes
			blob := C.CBytes(v)
			defer C.free(blob)
			slot = blob
		default:
			return fmt.Errorf("%s %s: argument %d has type %T; pass a DevicePtr or a sized integer or float", call, f.name, i, a)
		}
		ptrs[i] = slot
	}
	var params *unsafe.Pointer
	if n > 0 {
		params = (*unsafe.Pointer)(mem)
	}
	r := C.gpurr_cuLaunchKernel(f.h,
		C.uint(grid.X), C.uint(grid.Y), C.uint(grid.Z),
		C.uint(block.X), C.uint(block.Y), C.uint(block.Z),
		C.uint(sharedMem), s.handle(), params, nil)
	if err := check(call, r); err != nil {
		return fmt.Errorf("%w (kernel %s)", err, f.name)
	}
	return nil
}

// Event is a CUevent.
type Event struct{ h C.CUevent }

// Event creation flags (CUevent_flags).
const (
	EventDefault       = 0
	EventDisableTiming = 2
)

// NewEvent creates an event with the given flags.
func (c *Context) NewEvent(flags uint32) (*Event, error) {
	var h C.CUevent
	if err := check("cuEventCreate", C.gpurr_cuEventCreate(&h, C.uint(flags))); err != nil {
		return nil, err
	}
	return &Event{h: h}, nil
}

// Record enqueues the event on the stream (nil: the legacy default stream).
func (e *Event) Record(s *Stream) error {
	return check("cuEventRecord", C.gpurr_cuEventRecord(e.h, s.handle()))
}

// Synchronize waits until the event has happened.
func (e *Event) Synchronize() error {
	return check("cuEventSynchronize", C.gpurr_cuEventSynchronize(e.h))
}

// Destroy destroys the event.
func (e *Event) Destroy() error {
	return check("cuEventDestroy_v2", C.gpurr_cuEventDestroy(e.h))
}

// Elapsed returns the GPU time between two recorded, completed events
// (resolution about 0.5 µs).
func Elapsed(start, end *Event) (time.Duration, error) {
	var ms C.float
	if err := check("cuEventElapsedTime", C.gpurr_cuEventElapsedTime(&ms, start.h, end.h)); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// HostMem is page-locked host memory mapped into the device's address
// space (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP): kernels read and
// write it through Device, the host through Bytes.
type HostMem struct {
	p      unsafe.Pointer
	n      int
	Device DevicePtr
}

// HostAlloc allocates n bytes of mapped, page-locked host memory.
func (c *Context) HostAlloc(n int) (*HostMem, error) {
	const deviceMap = 0x02 // CU_MEMHOSTALLOC_DEVICEMAP
	var p unsafe.Pointer
	if err := check("cuMemHostAlloc", C.gpurr_cuMemHostAlloc(&p, C.size_t(n), deviceMap)); err != nil {
		return nil, fmt.Errorf("%w (%d bytes)", err, n)
	}
	var d C.CUdeviceptr
	if err := check("cuMemHostGetDevicePointer", C.gpurr_cuMemHostGetDevicePointer(&d, p, 0)); err != nil {
		C.gpurr_cuMemFreeHost(p)
		return nil, err
	}
	return &HostMem{p: p, n: n, Device: DevicePtr(d)}, nil
}

// Bytes is the memory as a slice; valid until Free.
func (h *HostMem) Bytes() []byte { return unsafe.Slice((*byte)(h.p), h.n) }

// Free releases the memory.
func (h *HostMem) Free() error { return check("cuMemFreeHost", C.gpurr_cuMemFreeHost(h.p)) }

// MemsetD8 sets n bytes at p to v (cuMemsetD8_v2, synchronous for the host).
func MemsetD8(p DevicePtr, v byte, n int) error {
	return check("cuMemsetD8_v2", C.gpurr_cuMemsetD8(C.CUdeviceptr(p), C.uchar(v), C.size_t(n)))
}

// CopyDtoD enqueues a device-to-device copy of n bytes on the stream.
func (s *Stream) CopyDtoD(dst, src DevicePtr, n int) error {
	return check("cuMemcpyDtoDAsync_v2", C.gpurr_cuMemcpyDtoDAsync(C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(n), s.handle()))
}

// CopyDtoHost enqueues a copy of n bytes from the device to mapped host
// memory at offset off on the stream.
func (s *Stream) CopyDtoHost(dst *HostMem, off int, src DevicePtr, n int) error {
	if off < 0 || n < 0 || off+n > dst.n {
		return fmt.Errorf("cuMemcpyDtoHAsync: %d bytes at %d do not fit %d", n, off, dst.n)
	}
	return check("cuMemcpyDtoHAsync_v2", C.gpurr_cuMemcpyDtoHAsync(unsafe.Add(dst.p, off), C.CUdeviceptr(src), C.size_t(n), s.handle()))
}
