package cuda

/*
#include "dlcuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
)

// Result is a CUresult. It is an error, so errors.Is(err, cuda.ErrorNoDevice)
// tests what an *Error carries.
type Result int32

// The results this package's callers test for; cuda.h has the full list.
const (
	Success                   Result = 0
	ErrorInvalidValue         Result = 1
	ErrorOutOfMemory          Result = 2
	ErrorNotInitialized       Result = 3
	ErrorStubLibrary          Result = 34
	ErrorNoDevice             Result = 100
	ErrorInvalidDevice        Result = 101
	ErrorInvalidImage         Result = 200
	ErrorInvalidContext       Result = 201
	ErrorNoBinaryForGPU       Result = 209
	ErrorInvalidPTX           Result = 218
	ErrorUnsupportedPTX       Result = 222
	ErrorNotFound             Result = 500
	ErrorNotReady             Result = 600
	ErrorIllegalAddress       Result = 700
	ErrorLaunchOutOfResources Result = 701
	ErrorLaunchFailed         Result = 719
	ErrorSystemDriverMismatch Result = 803
	ErrorUnknown              Result = 999
)

// resultNames names the results above for when the driver cannot
// (it is not loaded, or cuGetErrorName fails).
var resultNames = map[Result]string{
	Success:                   "CUDA_SUCCESS",
	ErrorInvalidValue:         "CUDA_ERROR_INVALID_VALUE",
	ErrorOutOfMemory:          "CUDA_ERROR_OUT_OF_MEMORY",
	ErrorNotInitialized:       "CUDA_ERROR_NOT_INITIALIZED",
	ErrorStubLibrary:          "CUDA_ERROR_STUB_LIBRARY",
	ErrorNoDevice:             "CUDA_ERROR_NO_DEVICE",
	ErrorInvalidDevice:        "CUDA_ERROR_INVALID_DEVICE",
	ErrorInvalidImage:         "CUDA_ERROR_INVALID_IMAGE",
	ErrorInvalidContext:       "CUDA_ERROR_INVALID_CONTEXT",
	ErrorNoBinaryForGPU:       "CUDA_ERROR_NO_BINARY_FOR_GPU",
	ErrorInvalidPTX:           "CUDA_ERROR_INVALID_PTX",
	ErrorUnsupportedPTX:       "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	ErrorNotFound:             "CUDA_ERROR_NOT_FOUND",
	ErrorNotReady:             "CUDA_ERROR_NOT_READY",
	ErrorIllegalAddress:       "CUDA_ERROR_ILLEGAL_ADDRESS",
	ErrorLaunchOutOfResources: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	ErrorLaunchFailed:         "CUDA_ERROR_LAUNCH_FAILED",
	ErrorSystemDriverMismatch: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	ErrorUnknown:              "CUDA_ERROR_UNKNOWN",
}

// Error is the CUresult of a failed driver call.
type Error struct {
	Call        string // the driver function, e.g. "cuModuleLoadData"
	Code        Result
	Name        string // e.g. "CUDA_ERROR_NO_BINARY_FOR_GPU"
	Description string // the driver's cuGetErrorString text; may be empty
	Detail      string // what else the driver said, e.g. the JIT's error log; may be empty
}

// Error reads "cuModuleLoadData: CUDA_ERROR_NO_BINARY_FOR_GPU (no kernel
// image is available for execution on the device)".
func (e *Error) Error() string {
	s := e.Call + ": " + e.Name
	if e.Description != "" {
		s += " (" + e.Description + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// oneLine joins a driver log's lines with " | ", so an error stays one line.
func oneLine(log string) string {
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, " | ")
}

// Unwrap gives the Result, for errors.Is.
func (e *Error) Unwrap() error { return e.Code }

// Error names the result, asking the driver when it is loaded.
func (r Result) Error() string {
	name, _ := describe(r)
	return name
}

// check turns a CUresult into nil or an *Error for call.
func check(call string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	code := Result(r)
	name, desc := describe(code)
	return &Error{Call: call, Code: code, Name: name, Description: desc}
}

// describe asks the driver for the name and description of r, and falls
// back to the table above, then to "CUresult(N)".
func describe(r Result) (name, desc string) {
	var s *C.char
	if C.gpurr_cuGetErrorName(C.CUresult(r), &s) == 0 && s != nil {
		name = C.GoString(s)
	}
	s = nil
	if C.gpurr_cuGetErrorString(C.CUresult(r), &s) == 0 && s != nil {
		desc = C.GoString(s)
	}
	if name == "" {
		name = resultNames[r]
	}
	if name == "" {
		name = fmt.Sprintf("CUresult(%d)", int32(r))
	}
	return name, desc
}

// ContextLost reports whether err is a fault that leaves the CUDA context
// unusable (an illegal address, a trap, a launch failure): every later
// call in the process fails, so work must go on in a fresh process.
func ContextLost(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	// 700 to 720 are the launch-time faults, of which 701 (too many
	// resources requested) and 703 (incompatible texturing) fail the
	// launch call only.
	return e.Code >= 700 && e.Code <= 720 && e.Code != ErrorLaunchOutOfResources && e.Code != 703
}
