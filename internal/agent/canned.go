package agent

/*
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "internal.h"
#include "autograd.h"
#include "nvtxhost.h"

*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/gpurr/gpurr/internal/kernels"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Records laid out as the C side lays them out (agent.h, memcap.h,
// autograd.h), built from Go through cgo's view of the same structs, for the
// record decoder's tests (records_test.go): test files cannot use cgo.
// Nothing here runs in the agent.

// cannedRecord returns the bytes of a fixed record followed by tail, its
// header's type and size (padded to 8) set.
func cannedRecord[T any](rec *T, typ C.uint32_t, tail []byte) []byte {
	fixed := int(unsafe.Sizeof(*rec))
	out := make([]byte, (fixed+len(tail)+7)&^7)
	copy(out, unsafe.Slice((*byte)(unsafe.Pointer(rec)), fixed))
	copy(out[fixed:], tail)
	h := (*C.gp_rec_hdr)(unsafe.Pointer(&out[0]))
	h._type = typ
	h.size = C.uint32_t(len(out))
	return out
}

func cDim3(d *pb.Dim3) [3]C.uint32_t {
	if d == nil {
		return [3]C.uint32_t{}
	}
	return [3]C.uint32_t{C.uint32_t(d.X), C.uint32_t(d.Y), C.uint32_t(d.Z)}
}

// cannedAutograd is what a launch record says of PyTorch's autograd.
type cannedAutograd struct {
	thread, seq uint64
	class       uint32
}

// cannedLaunch lays l out as a gp_launch_rec: its parameters, then, when it
// has a memory plan, its regions and the parameter words that point into
// them. ag, when not nil, is the autograd context.
func cannedLaunch(l *pb.Launch, ag *cannedAutograd) []byte {
	var r C.gp_launch_rec
	r.seq = C.uint64_t(l.Seq)
	r.host_ns = C.uint64_t(l.HostNs)
	r.kernel_id = C.uint64_t(l.KernelId)
	r.context = C.uint64_t(l.Context)
	r.stream = C.uint64_t(l.Stream)
	r.graph_node_id = C.uint64_t(l.GraphNodeId)
	r.callstack_id = C.uint64_t(l.CallstackId)
	r.tid = C.uint32_t(l.Tid)
	r.device = C.uint32_t(l.Device)
	r.context_uid = C.uint32_t(l.ContextUid)
	r.stream_id = C.uint32_t(l.StreamId)
	r.correlation_id = C.uint32_t(l.CorrelationId)
	r.api = C.uint32_t(l.Api)
	r.result = C.int32_t(l.Result)
	r.grid, r.block, r.cluster = cDim3(l.Grid), cDim3(l.Block), cDim3(l.Cluster)
	r.shared_mem = C.uint32_t(l.SharedMemBytes)
	r.range_id = C.uint64_t(l.RangeId)
	r.params_len = C.uint32_t(len(l.Params))
	if l.Captured {
		r.captured = 1
	}
	if l.Untimed {
		r.untimed = 1
	}
	if ag != nil {
		r.ag_thread, r.ag_seq, r.ag_class, r.ag_present = C.uint64_t(ag.thread), C.uint64_t(ag.seq), C.uint32_t(ag.class), 1
	}
	tail := append([]byte(nil), l.Params...)
	if m := l.Memory; m != nil {
		r.mem_status = C.uint8_t(m.Status)
		if m.SnapshotSelected {
			r.snapshot_selected = 1
		}
		tail = append(tail, make([]byte, (len(tail)+7)&^7-len(tail))...)
		var ptrs []C.gp_pointer_rec
		for i, g := range l.Regions {
			reg := C.gp_region_rec{base: C.uint64_t(g.Address), size: C.uint64_t(g.Size), alloc_id: C.uint64_t(g.AllocationId)}
			tail = append(tail, unsafe.Slice((*byte)(unsafe.Pointer(&reg)), unsafe.Sizeof(reg))...)
			for _, off := range g.ParamOffsets {
				ptrs = append(ptrs, C.gp_pointer_rec{offset: C.uint32_t(off), region: C.uint32_t(i)})
			}
		}
		for i := range ptrs {
			tail = append(tail, unsafe.Slice((*byte)(unsafe.Pointer(&ptrs[i])), unsafe.Sizeof(ptrs[i]))...)
		}
		r.nregions, r.npointers = C.uint32_t(len(l.Regions)), C.uint32_t(len(ptrs))
	}
	return cannedRecord(&r, C.GP_REC_LAUNCH, tail)
}

// cannedKernel lays k out as a gp_kernel_rec of CUfunction function.
func cannedKernel(function uint64, k *pb.Kernel) []byte {
	var r C.gp_kernel_rec
	r.function = C.uint64_t(function)
	r.kernel_id = C.uint64_t(k.Id)
	r.nparams = C.uint32_t(len(k.Params))
	r.param_bytes = C.uint32_t(k.ParamBytes)
	r.name_len = C.uint32_t(len(k.Name))
	var tail []byte
	for _, p := range k.Params {
		tail = append(tail, leBytes32(p.Offset)...)
		tail = append(tail, leBytes32(p.Size)...)
	}
	return cannedRecord(&r, C.GP_REC_KERNEL, append(tail, k.Name...))
}

// recordFixedSize is fixedSize of rec's type.
func recordFixedSize(rec []byte) int { return fixedSize(C.uint32_t(leU32(rec))) }

func leBytes32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

// cannedStack lays s out as a gp_stack_rec (source: 1 python, 2 native,
// cut: a GP_UNWIND_* value), each frame a gp_frame_rec with its text after
// it, padded to 8.
func cannedStack(s *pb.Callstack, source, cut uint32) []byte {
	var r C.gp_stack_rec
	r.id = C.uint64_t(s.Id)
	r.nframes = C.uint32_t(len(s.Frames))
	r.source = C.uint32_t(source)
	r.cut = C.uint32_t(cut)
	var tail []byte
	for _, f := range s.Frames {
		var fr C.gp_frame_rec
		fr.pc, fr.offset, fr.line = C.uint64_t(f.Pc), C.uint64_t(f.Offset), C.uint32_t(f.Line)
		fr.kind = C.GP_FRAME_NATIVE
		if f.Kind == pb.Frame_PYTHON {
			fr.kind = C.GP_FRAME_PYTHON
		}
		fr.file_len, fr.func_len = C.uint16_t(len(f.File)), C.uint16_t(len(f.Function))
		frame := append(unsafe.Slice((*byte)(unsafe.Pointer(&fr)), unsafe.Sizeof(fr)), f.File...)
		frame = append(frame, f.Function...)
		tail = append(tail, frame...)
		tail = append(tail, make([]byte, (len(frame)+7)&^7-len(frame))...)
	}
	return cannedRecord(&r, C.GP_REC_STACK, tail)
}

// cannedModule lays out a gp_module_rec holding a malloc'd copy of image,
// which the decoder frees, as it frees the C side's.
func cannedModule(image []byte, moduleID uint32, hostNs uint64) []byte {
	var r C.gp_module_rec
	if len(image) > 0 {
		r.image = C.CBytes(image)
	}
	r.size = C.uint64_t(len(image))
	r.host_ns = C.uint64_t(hostNs)
	r.module_id = C.uint32_t(moduleID)
	return cannedRecord(&r, C.GP_REC_MODULE, nil)
}

// cannedActivity lays a out as a gp_activity_rec, of gpurr's own kernel
// when own is set.
func cannedActivity(a *pb.KernelActivity, own bool) []byte {
	var r C.gp_activity_rec
	r.start, r.end, r.graph_node_id = C.uint64_t(a.StartNs), C.uint64_t(a.EndNs), C.uint64_t(a.GraphNodeId)
	r.correlation_id, r.device = C.uint32_t(a.CorrelationId), C.uint32_t(a.Device)
	r.context_uid, r.stream_id, r.graph_id = C.uint32_t(a.ContextUid), C.uint32_t(a.StreamId), C.uint32_t(a.GraphId)
	r.grid, r.block = cDim3(a.Grid), cDim3(a.Block)
	r.registers, r.dynamic_smem, r.static_smem = C.uint32_t(a.RegistersPerThread), C.uint32_t(a.SharedMemBytes), C.uint32_t(a.StaticSharedMemBytes)
	r.name_len = C.uint32_t(len(a.Name))
	typ := C.uint32_t(C.GP_REC_ACTIVITY)
	if own {
		typ = C.GP_REC_OWN_ACTIVITY
	}
	return cannedRecord(&r, typ, []byte(a.Name))
}

func cannedGraphNode(g *pb.GraphNode) []byte {
	var r C.gp_graphnode_rec
	r.node_id, r.original_node_id, r.launch_seq = C.uint64_t(g.NodeId), C.uint64_t(g.OriginalNodeId), C.uint64_t(g.LaunchSeq)
	r.graph_id, r.node_type = C.uint32_t(g.GraphId), C.uint32_t(g.NodeType)
	r.updated_after_seq = C.uint64_t(g.UpdatedAfterSeq)
	return cannedRecord(&r, C.GP_REC_GRAPHNODE, nil)
}

func cannedGraphLaunch(g *pb.GraphLaunch) []byte {
	var r C.gp_graphlaunch_rec
	r.seq, r.host_ns, r.graph_exec = C.uint64_t(g.Seq), C.uint64_t(g.HostNs), C.uint64_t(g.GraphExec)
	r.stream, r.callstack_id = C.uint64_t(g.Stream), C.uint64_t(g.CallstackId)
	r.tid, r.device, r.stream_id = C.uint32_t(g.Tid), C.uint32_t(g.Device), C.uint32_t(g.StreamId)
	r.correlation_id, r.result = C.uint32_t(g.CorrelationId), C.int32_t(g.Result)
	r.range_id = C.uint64_t(g.RangeId)
	return cannedRecord(&r, C.GP_REC_GRAPHLAUNCH, nil)
}

// cannedDevice lays d out as a gp_device_rec with uuid; name fills the
// whole field when it is that long, without a NUL.
func cannedDevice(d *pb.Device, uuid [16]byte) []byte {
	var r C.gp_device_rec
	r.memory_bytes = C.uint64_t(d.MemoryBytes)
	r.ordinal, r.context_uid = C.uint32_t(d.Ordinal), C.uint32_t(d.ContextUid)
	r.cc_major, r.cc_minor, r.sm_count = C.uint32_t(d.CcMajor), C.uint32_t(d.CcMinor), C.uint32_t(d.SmCount)
	for i, b := range uuid {
		r.uuid[i] = C.uint8_t(b)
	}
	for i := 0; i < len(d.Name) && i < len(r.name); i++ {
		r.name[i] = C.char(d.Name[i])
	}
	return cannedRecord(&r, C.GP_REC_DEVICE, nil)
}

func cannedAlloc(a *pb.Allocation) []byte {
	var r C.gp_alloc_rec
	r.id, r.address, r.size, r.host_ns = C.uint64_t(a.Id), C.uint64_t(a.Address), C.uint64_t(a.Size), C.uint64_t(a.HostNs)
	r.kind, r.device = C.uint32_t(a.Kind), C.uint32_t(a.Device)
	r.launch_seq = C.uint64_t(a.LaunchSeq)
	if a.Freed {
		r.freed = 1
	}
	if a.Cleared {
		r.cleared = 1
	}
	return cannedRecord(&r, C.GP_REC_ALLOC, nil)
}

// cannedMemLost lays out a gp_memlost_rec; reason fills the whole field
// when it is that long, without a NUL.
func cannedMemLost(launchSeq uint64, point, njobs uint32, reason string) []byte {
	var r C.gp_memlost_rec
	r.launch_seq, r.point, r.njobs, r.nregions = C.uint64_t(launchSeq), C.uint32_t(point), C.uint32_t(njobs), 1
	for i := 0; i < len(reason) && i < len(r.reason); i++ {
		r.reason[i] = C.char(reason[i])
	}
	return cannedRecord(&r, C.GP_REC_MEMLOST, nil)
}

// cannedCopyLost lays out the gp_memlost_rec of a copy state the agent could not take: call's,
// after launch call seq, naming the regions the copy wrote.
func cannedCopyLost(seq uint64, call uint32, regs []*pb.Region, reason string) []byte {
	var r C.gp_memlost_rec
	r.launch_seq, r.point, r.njobs, r.nregions, r.call = C.uint64_t(seq), C.GP_POINT_COPY, 1, C.uint32_t(len(regs)), C.uint32_t(call)
	for i := 0; i < len(reason) && i < len(r.reason); i++ {
		r.reason[i] = C.char(reason[i])
	}
	var tail []byte
	for _, g := range regs {
		tail = binary.LittleEndian.AppendUint64(tail, g.Address)
		tail = binary.LittleEndian.AppendUint64(tail, g.Size)
		tail = binary.LittleEndian.AppendUint64(tail, g.AllocationId)
	}
	return cannedRecord(&r, C.GP_REC_MEMLOST, tail)
}

// cannedCopyJob makes a canned job that of the copy state of call, after launch call seq.
func cannedCopyJob(v *C.gp_memjob_view, seq uint64, call uint32) {
	v.point, v.launch_seq, v.call = C.GP_POINT_COPY, C.uint64_t(seq), C.uint32_t(call)
}

// cannedJobLost marks a canned job lost: its kernel could not be launched.
func cannedJobLost(v *C.gp_memjob_view) { v.lost = 1 }

// cannedNodeClass lays out a gp_nodeclass_rec; cxx: name is a C++ type's
// mangled name, else a Python class's.
func cannedNodeClass(id uint32, cxx bool, name string) []byte {
	var r C.gp_nodeclass_rec
	r.id, r.kind, r.name_len = C.uint32_t(id), C.GP_NODECLASS_PYTHON, C.uint32_t(len(name))
	if cxx {
		r.kind = C.GP_NODECLASS_CXX
	}
	return cannedRecord(&r, C.GP_REC_NODECLASS, []byte(name))
}

// The C ring itself, for tests that push records through it as the
// program's threads do and drain them as the writer does.

// cannedRing gives the ring a fresh buffer of bytes (a power of two).
func cannedRing(bytes int) {
	C.gp_ring_init((*C.uint8_t)(C.calloc(C.size_t(bytes), 1)), C.uint64_t(bytes))
}

// mappedRing gives the ring a fresh anonymous mapping of bytes, nothing of
// it faulted in, as gp_start does; it returns the mapping (C memory).
func mappedRing(bytes int) unsafe.Pointer {
	p := C.mmap(nil, C.size_t(bytes), C.PROT_READ|C.PROT_WRITE, C.MAP_PRIVATE|C.MAP_ANONYMOUS, -1, 0)
	C.gp_ring_init((*C.uint8_t)(p), C.uint64_t(bytes))
	return p
}

// residentPages counts the pages of [base+off, base+off+n) that are in memory.
func residentPages(base unsafe.Pointer, off, n int) int {
	page := int(C.sysconf(C._SC_PAGESIZE))
	vec := make([]C.uchar, (n+page-1)/page)
	if C.mincore(unsafe.Add(base, off), C.size_t(n), &vec[0]) != 0 {
		return -1
	}
	in := 0
	for _, v := range vec {
		in += int(v & 1)
	}
	return in
}

// ringPrefault is gp_ring_prefault.
func ringPrefault(ahead uint64) uint64 { return uint64(C.gp_ring_prefault(C.uint64_t(ahead))) }

// ringPush pushes one record; false when the ring is full.
func ringPush(rec []byte) bool { return C.gp_ring_push(unsafe.Pointer(&rec[0])) != 0 }

// ringLog pushes a log record through the agent's own gp_log.
func ringLog(level int, msg string) {
	cs := C.CString(msg)
	defer C.free(unsafe.Pointer(cs))
	C.gp_log(C.int(level), cs)
}

// ringCounters reads what the ring counted.
func ringCounters() (recordsDropped, bytesDropped uint64) {
	var c C.gp_counters
	C.gp_read_counters(&c)
	return uint64(c.records_dropped), uint64(c.ring_bytes_dropped)
}

// Start-up without CUDA, against a stand-in library (testdata/fakecuda).

// cannedBind binds every driver function the agent calls from the library
// at path, as bindDriver does from libcuda.so.1; "" unbinds them all.
func cannedBind(path string) error {
	var h unsafe.Pointer
	if path != "" {
		cpath := C.CString(path)
		defer C.free(unsafe.Pointer(cpath))
		if h = C.dlopen(cpath, C.RTLD_NOW|C.RTLD_LOCAL); h == nil {
			return fmt.Errorf("dlopen %s: %s", path, C.GoString(C.dlerror()))
		}
	}
	for i := C.size_t(0); C.gp_driver_symbol(i) != nil; i++ {
		var fn unsafe.Pointer
		if h != nil {
			fn = C.dlsym(h, C.gp_driver_symbol(i))
		}
		C.gp_driver_bind(i, C.uintptr_t(uintptr(fn)))
	}
	return nil
}

// cannedStart runs gp_start with CUPTI at cuptiPath, memory capture in hash
// mode when memory is set, and driverError as bindDriver's error; it
// returns gp_start's error, "" when it started.
func cannedStart(cuptiPath string, memory bool, driverError string) string {
	cfg := C.gp_config{ring_bytes: 1 << 16, callstack_mode: C.GP_STACK_OFF, gpu_timing: 1, results_bytes: 1 << 20}
	cfg.cupti_path = C.CString(cuptiPath)
	defer C.free(unsafe.Pointer(cfg.cupti_path))
	if memory {
		cfg.memory_mode = C.GP_MEM_HASH
	}
	if driverError != "" {
		cfg.driver_error = C.CString(driverError)
		defer C.free(unsafe.Pointer(cfg.driver_error))
	}
	var errbuf [512]C.char
	if C.gp_start(&cfg, &errbuf[0], C.size_t(len(errbuf))) != 0 {
		return ""
	}
	return C.GoString(&errbuf[0])
}

// startedVersions are the versions gp_start read from CUPTI and the driver.
func startedVersions() (cupti uint32, driver int) {
	return uint32(C.gp_cupti_version()), int(C.gp_driver_version())
}

// NVTX calls made the way NVTX makes them once the agent took its slots
// (nvtxhost.h), on the calling thread, for tests of the range stack and its
// records. Messages stay allocated, as a program's string literals do.

// nvtxInject hands the agent a fresh set of NVTX slot tables; false when
// it refused them.
func nvtxInject() bool { return C.nvtxhost_inject() == 1 }

// nvtxStart starts recording NVTX calls (gp_nvtx_start).
func nvtxStart() { C.gp_nvtx_start() }

// nvtxPushA is nvtxRangePushA(msg), returning the range's level.
func nvtxPushA(msg string) int { return int(C.nvtxhost_push_a(C.CString(msg))) }

// nvtxPushW is nvtxRangePushW with a wide-character message, returning its level.
func nvtxPushW() int {
	msg := []C.int{'w', 'i', 'd', 'e', 0} // wchar_t is 32 bits on Linux
	return int(C.nvtxhost_push_w(unsafe.Pointer(&msg[0])))
}

// nvtxDomainCreateW is nvtxDomainCreateW with a wide-character name, returning its handle.
func nvtxDomainCreateW() uintptr {
	name := []C.int{'d', 'o', 'm', 0}
	return uintptr(C.nvtxhost_domain_create_w(unsafe.Pointer(&name[0])))
}

// nvtxPop is nvtxRangePop, or nvtxDomainRangePop(domain) for a domain.
func nvtxPop(domain uintptr) int {
	if domain == 0 {
		return int(C.nvtxhost_pop())
	}
	return int(C.nvtxhost_domain_pop(C.uintptr_t(domain)))
}

// nvtxDomainCreate is nvtxDomainCreateA(name), returning its handle.
func nvtxDomainCreate(name string) uintptr {
	return uintptr(C.nvtxhost_domain_create(C.CString(name)))
}

// nvtxRegisterString is nvtxDomainRegisterStringA(domain, s), returning its handle.
func nvtxRegisterString(domain uintptr, s string) uintptr {
	return uintptr(C.nvtxhost_register_string(C.uintptr_t(domain), C.CString(s)))
}

// nvtxDomainPush is nvtxDomainRangePushEx(domain, attributes) with an
// ASCII message, or the registered string registered when it is not 0.
func nvtxDomainPush(domain uintptr, msg string, registered uintptr, category uint32) {
	a := cAlloc[C.gp_nvtxEventAttributes]()
	a.version, a.size, a.category = 2, C.uint16_t(unsafe.Sizeof(*a)), C.uint32_t(category)
	if registered != 0 {
		a.messageType = C.GP_NVTX_MESSAGE_REGISTERED
		*(*uintptr)(unsafe.Pointer(&a.message)) = registered
	} else {
		a.messageType = C.GP_NVTX_MESSAGE_ASCII
		*(**C.char)(unsafe.Pointer(&a.message)) = C.CString(msg)
	}
	C.nvtxhost_domain_push_ex(C.uintptr_t(domain), a)
	C.free(unsafe.Pointer(a))
}

// nvtxStartA is nvtxRangeStartA(msg), returning its range id.
func nvtxStartA(msg string) uint64 { return uint64(C.nvtxhost_start_a(C.CString(msg))) }

// nvtxEnd is nvtxRangeEnd(id).
func nvtxEnd(id uint64) { C.nvtxhost_end(C.uint64_t(id)) }

func cAlloc[T any]() *T {
	var zero T
	return (*T)(C.calloc(1, C.size_t(unsafe.Sizeof(zero))))
}

// rangeCounters are the C side's NVTX range counters.
func rangeCounters() (ranges, dropped uint64) {
	var c C.gp_counters
	C.gp_read_counters(&c)
	return uint64(c.ranges), uint64(c.ranges_dropped)
}

// cannedRangeOpen lays out a range open record with an ASCII message.
func cannedRangeOpen(g *pb.Range, nvtxID uint64) []byte {
	var r C.gp_range_rec
	r.id, r.parent_id, r.start_ns, r.nvtx_id = C.uint64_t(g.Id), C.uint64_t(g.ParentId), C.uint64_t(g.StartNs), C.uint64_t(nvtxID)
	r.tid, r.category = C.uint32_t(g.Tid), C.uint32_t(g.Category)
	r.message_kind, r.message_len = C.GP_RANGE_MSG_ASCII, C.uint32_t(len(g.Message))
	if g.Pushed {
		r.pushed = 1
	}
	return cannedRecord(&r, C.GP_REC_RANGE, []byte(g.Message))
}

// cannedRangeEnd lays out a range end record.
func cannedRangeEnd(id, nvtxID, endNs uint64) []byte {
	var r C.gp_range_end_rec
	r.id, r.nvtx_id, r.end_ns = C.uint64_t(id), C.uint64_t(nvtxID), C.uint64_t(endNs)
	return cannedRecord(&r, C.GP_REC_RANGE_END, nil)
}

// cannedNvtxName lays out a domain's (domain true) or registered string's name.
func cannedNvtxName(handle uint64, domain bool, name string) []byte {
	var r C.gp_nvtx_name_rec
	r.handle, r.kind, r.len = C.uint64_t(handle), C.GP_NVTX_NAME_STRING, C.uint32_t(len(name))
	if domain {
		r.kind = C.GP_NVTX_NAME_DOMAIN
	}
	return cannedRecord(&r, C.GP_REC_NVTX_NAME, []byte(name))
}

// writeClass is the agent's sorting of a driver call by how it writes device memory (GP_WRITE_*).
func writeClass(name string) int {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return int(C.gp_mem_write_class(cs))
}

// callOrder is the agent's sorting of a driver call by what it waits for while hashes run beside
// the program (GP_ORDER_*), and where its parameters name its stream (-1: nowhere).
func callOrder(name string) (order, streamAt int) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var at C.uint8_t
	order = int(C.gp_mem_call_order(cs, &at))
	return order, int(at) - 1
}

// cannedJobRegion is one region of a canned memory job: hashed with these
// chunk hashes, or carried (GP_CARRY_*) from prevJob.
type cannedJobRegion struct {
	addr, size, allocID, prevJob uint64
	carry                        int
	chunkHashes                  [][16]byte
}

// cannedJob lays out a completed hash job as gp_mem_poll shows it to the
// writer: the view, and the result area it points into (C memory, never freed: tests only).
func cannedJob(launchSeq, jobSeq, kernelID uint64, audit bool, regions []cannedJobRegion, pointers [][2]uint32) (*C.gp_memjob_view, []byte) {
	v := cAlloc[C.gp_memjob_view]()
	var hashes []byte
	for i, g := range regions {
		v.region_addr[i] = C.uint64_t(g.addr)
		v.region_size[i] = C.uint64_t(g.size)
		v.alloc_id[i] = C.uint64_t(g.allocID)
		v.prev_job[i] = C.uint64_t(g.prevJob)
		v.carry[i] = C.uint8_t(g.carry)
		for _, h := range g.chunkHashes {
			hashes = append(hashes, h[:]...)
		}
	}
	n := 64 + len(hashes) + 4*len(hashes)/16 + 8
	res := unsafe.Slice((*byte)(C.calloc(C.size_t(n), 1)), n) // the agent's results ring is C memory too
	copy(res[64:], hashes)
	v.launch_seq = C.uint64_t(launchSeq)
	v.job_seq = C.uint64_t(jobSeq)
	v.kernel_id = C.uint64_t(kernelID)
	v.point = C.GP_POINT_AFTER
	v.nregions = C.uint32_t(len(regions))
	v.njobs = 1
	v.total_chunks = C.uint32_t(len(hashes) / 16)
	if audit {
		v.audit = 1
	}
	v.npointers = C.uint32_t(len(pointers))
	for i, p := range pointers {
		v.pointers[i] = C.gp_pointer_rec{offset: C.uint32_t(p[0]), region: C.uint32_t(p[1])}
	}
	v.result = (*C.uint8_t)(unsafe.Pointer(&res[0]))
	return v, res
}

// cannedStaging makes a canned job a snapshot job whose kernel copied chunk
// chunks[k] (numbered across the job's regions) into staging slot k with
// the bytes data[k]: what arrived in the staging ring, whatever the kernel hashed.
func cannedStaging(v *C.gp_memjob_view, res []byte, chunks []uint32, data [][]byte) {
	staging := unsafe.Slice((*byte)(C.calloc(C.size_t(len(chunks)*memhash.ChunkSize+1), 1)), len(chunks)*memhash.ChunkSize+1)
	l := kernels.Layout(uint32(v.total_chunks), 0)
	for k, b := range chunks {
		binary.LittleEndian.PutUint32(res[l.TransferList+4*k:], b)
		copy(staging[k*memhash.ChunkSize:], data[k])
	}
	v.snapshot = 1
	v.transferred = C.uint32_t(len(chunks))
	v.staging = (*C.uint8_t)(unsafe.Pointer(&staging[0]))
}

// cannedPiece makes a canned job of one region the piece of it from chunk first, one of njobs
// jobs of its launch point.
func cannedPiece(v *C.gp_memjob_view, first, njobs uint32) {
	v.piece, v.piece_first, v.njobs = 1, C.uint32_t(first), C.uint32_t(njobs)
}

// jobToWriter hands a canned job to the writer's memory capture.
func jobToWriter(r *recorder, v *C.gp_memjob_view) { r.mem.job(r, v) }

// kernelWordsPublished reports what the writer knows of a kernel's word w: proved, learned.
func kernelWordsPublished(m *memoryCapture, kernelID uint64, w uint32) (proved, learned bool) {
	k := m.kernels[kernelID]
	if k == nil {
		return false, false
	}
	return k.has(k.proved, w), k.has(k.learned, w)
}

// renumberJob makes a canned job that of launch seq, job seq, each region's state before it
// the state job prev left.
func renumberJob(v *C.gp_memjob_view, seq, job, prev uint64) {
	v.launch_seq, v.job_seq = C.uint64_t(seq), C.uint64_t(job)
	for r := range int(v.nregions) {
		v.prev_job[r] = C.uint64_t(prev)
	}
}

// moduleLoaded hands the agent's write sets a module image as the program loads it, and
// returns what a kernel of it then gets at its first launch: its proved words (nil for none)
// and whether it stores through loaded pointers.
func moduleLoaded(image []byte, kernel string, paramBytes uint32) (proved []uint64, anywhere bool) {
	img := C.CBytes(image)
	defer C.free(img)
	gpurrModuleWriteSets(img, C.size_t(len(image)))
	name := C.CString(kernel)
	defer C.free(unsafe.Pointer(name))
	ro := gpurrKernelReadOnly(name, C.uint32_t(paramBytes))
	if ro == nil {
		return nil, false
	}
	defer C.free(unsafe.Pointer(ro))
	bits := unsafe.Slice((*uint64)(unsafe.Add(unsafe.Pointer(ro), unsafe.Sizeof(C.gp_readonly{}))), 2*int(ro.n64))
	return append([]uint64(nil), bits[:ro.n64]...), ro.writes_anywhere != 0
}

func cannedCopy(c *pb.Copy) []byte {
	var r C.gp_copy_rec
	r.bytes, r.start, r.end, r.graph_node_id = C.uint64_t(c.Bytes), C.uint64_t(c.StartNs), C.uint64_t(c.EndNs), C.uint64_t(c.GraphNodeId)
	r.device, r.context_uid, r.stream_id = C.uint32_t(c.Device), C.uint32_t(c.ContextUid), C.uint32_t(c.StreamId)
	r.correlation_id, r.graph_id, r.value = C.uint32_t(c.CorrelationId), C.uint32_t(c.GraphId), C.uint32_t(c.Value)
	r.copy_kind, r.src_kind, r.dst_kind = C.uint8_t(c.CopyKind), C.uint8_t(c.SrcKind), C.uint8_t(c.DstKind)
	if c.Memset {
		r.memset = 1
	}
	if c.Async {
		r.async = 1
	}
	return cannedRecord(&r, C.GP_REC_COPY, nil)
}

// cannedSync is s as the agent writes it: a stream or event it does not name is CUPTI's
// invalid value.
func cannedSync(s *pb.Sync) []byte {
	var r C.gp_sync_rec
	r._type, r.start, r.end = C.uint32_t(s.Type), C.uint64_t(s.StartNs), C.uint64_t(s.EndNs)
	r.correlation_id, r.context_uid = C.uint32_t(s.CorrelationId), C.uint32_t(s.ContextUid)
	r.stream_id, r.event_id = C.GP_SYNC_NONE, C.GP_SYNC_NONE
	if s.StreamId != nil {
		r.stream_id = C.uint32_t(*s.StreamId)
	}
	if s.EventId != nil {
		r.event_id = C.uint32_t(*s.EventId)
	}
	return cannedRecord(&r, C.GP_REC_SYNC, nil)
}

// cannedHostCall is a call of hostcall.h's table with callback id cbid; own: gpurr's own.
func cannedHostCall(h *pb.HostCall, cbid uint32, own bool) []byte {
	var r C.gp_hostcall_rec
	r.start, r.end, r.callstack_id, r.range_id = C.uint64_t(h.StartNs), C.uint64_t(h.EndNs), C.uint64_t(h.CallstackId), C.uint64_t(h.RangeId)
	r.cbid, r.correlation_id, r.tid, r.device = C.uint32_t(cbid), C.uint32_t(h.CorrelationId), C.uint32_t(h.Tid), C.uint32_t(h.Device)
	r.result = C.int32_t(h.Result)
	if own {
		r.own = 1
	}
	return cannedRecord(&r, C.GP_REC_HOSTCALL, nil)
}
