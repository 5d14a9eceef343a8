package cuda

/*
#include "dlcuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// DeviceCount returns the number of devices the driver sees (after Init).
func DeviceCount() (int, error) {
	var n C.int
	if err := check("cuDeviceGetCount", C.gpurr_cuDeviceGetCount(&n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Device is a CUdevice: a device ordinal handle.
type Device int32

// DeviceGet returns the device with the given ordinal (after Init).
func DeviceGet(ordinal int) (Device, error) {
	var d C.CUdevice
	if err := check("cuDeviceGet", C.gpurr_cuDeviceGet(&d, C.int(ordinal))); err != nil {
		return 0, err
	}
	return Device(d), nil
}

// DeviceAttribute is a CUdevice_attribute.
type DeviceAttribute int32

// The attributes gpurr reads; the values are cuda.h's.
const (
	AttrMultiprocessorCount    DeviceAttribute = 16
	AttrComputeCapabilityMajor DeviceAttribute = 75
	AttrComputeCapabilityMinor DeviceAttribute = 76
)

// Name returns the device's marketing name, e.g. "NVIDIA H100 80GB HBM3".
func (d Device) Name() (string, error) {
	var buf [256]C.char
	if err := check("cuDeviceGetName", C.gpurr_cuDeviceGetName(&buf[0], C.int(len(buf)), C.CUdevice(d))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// UUID returns the device's 16-byte UUID.
func (d Device) UUID() ([16]byte, error) {
	var u C.CUuuid
	var out [16]byte
	if err := check("cuDeviceGetUuid_v2", C.gpurr_cuDeviceGetUuid(&u, C.CUdevice(d))); err != nil {
		return out, err
	}
	copy(out[:], unsafe.Slice((*byte)(unsafe.Pointer(&u.bytes[0])), 16))
	return out, nil
}

// FormatUUID writes a device UUID as nvidia-smi does:
// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
func FormatUUID(u [16]byte) string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// Attribute returns one device attribute.
func (d Device) Attribute(a DeviceAttribute) (int, error) {
	var v C.int
	if err := check("cuDeviceGetAttribute", C.gpurr_cuDeviceGetAttribute(&v, C.int(a), C.CUdevice(d))); err != nil {
		return 0, err
	}
	return int(v), nil
}

// TotalMem returns the device's memory in bytes.
func (d Device) TotalMem() (uint64, error) {
	var n C.size_t
	if err := check("cuDeviceTotalMem_v2", C.gpurr_cuDeviceTotalMem(&n, C.CUdevice(d))); err != nil {
		return 0, err
	}
	return uint64(n), nil
}

// Properties describes a device.
type Properties struct {
	Ordinal     int
	Name        string
	UUID        string // "GPU-..."
	CCMajor     int    // compute capability
	CCMinor     int
	SMCount     int
	MemoryBytes uint64
}

// Arch returns the compute capability as "sm_90".
func (p Properties) Arch() string { return fmt.Sprintf("sm_%d%d", p.CCMajor, p.CCMinor) }

// Properties reads the device's name, UUID, compute capability, SM count
// and memory size.
func (d Device) Properties() (Properties, error) {
	p := Properties{Ordinal: int(d)}
	var err error
	if p.Name, err = d.Name(); err != nil {
		return p, err
	}
	u, err := d.UUID()
	if err != nil {
		return p, err
	}
	p.UUID = FormatUUID(u)
	if p.CCMajor, err = d.Attribute(AttrComputeCapabilityMajor); err != nil {
		return p, err
	}
	if p.CCMinor, err = d.Attribute(AttrComputeCapabilityMinor); err != nil {
		return p, err
	}
	if p.SMCount, err = d.Attribute(AttrMultiprocessorCount); err != nil {
		return p, err
	}
	if p.MemoryBytes, err = d.TotalMem(); err != nil {
		return p, err
	}
	return p, nil
}
