package cuda

/*
#include "dlcuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
)

// Reservation is a range of device virtual addresses placed with the
// virtual memory management API (cuMemAddressReserve), parts of which are
// backed by device memory (Back). Replay uses it to recreate recorded
// allocations at their recorded addresses.
type Reservation struct {
	Addr   DevicePtr // start of the range (the hint when the driver granted it)
	Size   uint64
	pieces []backing
}

type backing struct {
	addr DevicePtr
	size uint64
	h    C.ulonglong
}

func (c *Context) allocationProp() C.gp_MemAllocationProp {
	var prop C.gp_MemAllocationProp
	prop._type = C.GP_MEM_ALLOCATION_TYPE_PINNED
	prop.location._type = C.GP_MEM_LOCATION_TYPE_DEVICE
	prop.location.id = C.int(c.dev)
	return prop
}

// Granularity is the size and alignment unit of Back (usually 2 MiB).
func (c *Context) Granularity() (uint64, error) {
	prop := c.allocationProp()
	var g C.size_t
	if err := check("cuMemGetAllocationGranularity", C.gpurr_cuMemGetAllocationGranularity(&g, &prop, C.GP_MEM_ALLOC_GRANULARITY_MINIMUM)); err != nil {
		return 0, err
	}
	return uint64(g), nil
}

// Reserve reserves size bytes of device address space, asking for hint (0:
// any address). The driver treats hint as a wish: Addr says where the range
// is. size and hint must be multiples of Granularity.
func (c *Context) Reserve(hint DevicePtr, size uint64) (*Reservation, error) {
	var p C.CUdeviceptr
	if err := check("cuMemAddressReserve", C.gpurr_cuMemAddressReserve(&p, C.size_t(size), 0, C.CUdeviceptr(hint), 0)); err != nil {
		return nil, fmt.Errorf("%w (%d bytes at 0x%x)", err, size, uint64(hint))
	}
	return &Reservation{Addr: DevicePtr(p), Size: size}, nil
}

// Back maps size bytes of new device memory at offset off of the range,
// readable and writable from the device. off and size must be multiples
// of Granularity.
func (r *Reservation) Back(c *Context, off, size uint64) error {
	if off+size > r.Size {
		return fmt.Errorf("cuMemMap: %d bytes at offset %d do not fit the %d-byte reservation", size, off, r.Size)
	}
	prop := c.allocationProp()
	var h C.ulonglong
	if err := check("cuMemCreate", C.gpurr_cuMemCreate(&h, C.size_t(size), &prop, 0)); err != nil {
		return fmt.Errorf("%w (%d bytes)", err, size)
	}
	addr := r.Addr + DevicePtr(off)
	if err := check("cuMemMap", C.gpurr_cuMemMap(C.CUdeviceptr(addr), C.size_t(size), 0, h, 0)); err != nil {
		C.gpurr_cuMemRelease(h)
		return err
	}
	r.pieces = append(r.pieces, backing{addr: addr, size: size, h: h})
	access := C.gp_MemAccessDesc{flags: C.GP_MEM_ACCESS_FLAGS_PROT_READWRITE}
	access.location = prop.location
	return check("cuMemSetAccess", C.gpurr_cuMemSetAccess(C.CUdeviceptr(addr), C.size_t(size), &access, 1))
}

// Free unmaps and releases the memory and gives the address range back.
func (r *Reservation) Free() error {
	var errs []error
	for _, p := range r.pieces {
		errs = append(errs,
			check("cuMemUnmap", C.gpurr_cuMemUnmap(C.CUdeviceptr(p.addr), C.size_t(p.size))),
			check("cuMemRelease", C.gpurr_cuMemRelease(p.h)))
	}
	r.pieces = nil
	if r.Size > 0 {
		errs = append(errs, check("cuMemAddressFree", C.gpurr_cuMemAddressFree(C.CUdeviceptr(r.Addr), C.size_t(r.Size))))
		r.Size = 0
	}
	return errors.Join(errs...)
}
