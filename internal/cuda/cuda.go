// Package cuda is a minimal binding of the CUDA driver API, opened with
// dlopen at run time, for the parts of gpurr that run GPU work: demo,
// doctor, and later replay.
//
// No CUDA SDK is needed to build it: the few types it uses are declared by
// hand in dlcuda.h, and each function is looked up in libcuda.so.1 under the
// versioned name that CUDA 13's cuda.h maps it to (cuMemAlloc_v2,
// cuDeviceGetUuid_v2, ...), falling back to the older export where one has
// the same signature. Call Load (or Probe) first; a call made before Load
// succeeded fails with CUDA_ERROR_NOT_INITIALIZED instead of crashing.
//
// A CUDA context is current per OS thread, so Device.PrimaryContext locks the
// calling goroutine to its thread until Context.Close. Every failing call
// returns an *Error naming the call and the CUresult.
package cuda

/*
#cgo CFLAGS: -fvisibility=hidden
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "dlcuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// Library is the file name Load opens.
const Library = "libcuda.so.1"

// ErrNoDriver is wrapped by every error Load returns.
var ErrNoDriver = errors.New("no CUDA driver")

var loadOnce = sync.OnceValue(func() error { return open(Library) })

// Load opens libcuda.so.1 and resolves every function this package uses.
// It does the work once; later calls return the first call's result. The
// error wraps ErrNoDriver and reads, for example, "no CUDA driver:
// libcuda.so.1 not found (is the NVIDIA driver installed?)".
func Load() error { return loadOnce() }

func open(name string) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var what *C.char
	switch C.gpurr_cuda_open(cname, &what) {
	case 0:
		return nil
	case 1:
		return openError(name, C.GoString(what))
	default:
		return fmt.Errorf("%w: %s lacks %s (the NVIDIA driver is too old: CUDA 11 or newer is needed)",
			ErrNoDriver, name, C.GoString(what))
	}
}

// Proc returns the address of the function libcuda.so.1 exports as name
// (the exported name, such as cuMemAlloc_v2), or 0 when it exports none.
// It is how code with its own C calls into the driver (the gpurr agent)
// uses the library Load opened instead of opening it again. Call Load first.
func Proc(name string) uintptr {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return uintptr(C.gpurr_cuda_sym(cname))
}

// openError turns a dlopen failure into one line: a missing library is the
// common case and gets the plain explanation.
func openError(name, dlerr string) error {
	if strings.Contains(dlerr, "No such file or directory") || dlerr == "" {
		return fmt.Errorf("%w: %s not found (is the NVIDIA driver installed?)", ErrNoDriver, name)
	}
	return fmt.Errorf("%w: cannot load %s: %s", ErrNoDriver, name, dlerr)
}

// CheckLibrary reports whether the shared library at path can be loaded
// into this process: it dlopens the file and closes it again. The error
// holds the dynamic loader's message (a missing dependency, say).
func CheckLibrary(path string) error {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	if msg := C.gpurr_dl_check(cpath); msg != nil {
		return errors.New(C.GoString(msg))
	}
	return nil
}

// Exit ends the process through the C library's exit(), so that atexit
// handlers run. os.Exit and a return from main skip them, and an injected
// CUDA tool such as the gpurr agent finishes its work (flushes CUPTI
// buffers, writes the end of the recording) in one.
func Exit(code int) {
	C.exit(C.int(code))
}

// Init calls cuInit(0).
func Init() error {
	if err := Load(); err != nil {
		return err
	}
	return check("cuInit", C.gpurr_cuInit(0))
}

// DriverVersion returns the CUDA version the driver supports, as
// cuDriverGetVersion gives it (13000 for 13.0).
func DriverVersion() (int, error) {
	if err := Load(); err != nil {
		return 0, err
	}
	var v C.int
	if err := check("cuDriverGetVersion", C.gpurr_cuDriverGetVersion(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// FormatVersion writes a cuDriverGetVersion number as "13.0".
func FormatVersion(v int) string {
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

// System is what Probe learned about the machine.
type System struct {
	DriverVersion int // cuDriverGetVersion; 0 when unknown
	Devices       []Properties
}

// Probe loads the driver, initializes it and describes every device. It
// stops at the first failure and returns what it learned until then with
// the error, so a caller can tell which step failed: errors.Is(err,
// ErrNoDriver) when libcuda.so.1 cannot be loaded. A driver that works but
// sees no device is an error too ("cuInit: CUDA_ERROR_NO_DEVICE ...").
func Probe() (System, error) {
	var sys System
	if err := Load(); err != nil {
		return sys, err
	}
	v, err := DriverVersion()
	if err != nil {
		return sys, err
	}
	sys.DriverVersion = v
	if err := Init(); err != nil {
		return sys, err
	}
	n, err := DeviceCount()
	if err != nil {
		return sys, err
	}
	if n == 0 {
		return sys, errors.New("the CUDA driver sees no device")
	}
	for i := range n {
		d, err := DeviceGet(i)
		if err != nil {
			return sys, err
		}
		p, err := d.Properties()
		if err != nil {
			return sys, err
		}
		sys.Devices = append(sys.Devices, p)
	}
	return sys, nil
}
