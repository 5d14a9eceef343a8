package agent

/*
#include <stdlib.h>
#include "agent.h"
#include "autograd.h"
#include "memcap.h"
#include "unwind.h"
*/
import "C"

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/gpurr/gpurr/internal/agentcfg"
	"github.com/gpurr/gpurr/internal/ptx"
	"github.com/gpurr/gpurr/internal/symtab"
	"github.com/gpurr/gpurr/internal/version"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/cubin"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Writer pacing: a frame is written when this many launches wait, or when
// the oldest waiting record is this old, so a killed program loses at most
// that much.
const (
	frameLaunches = 8192
	frameInterval = 100 * time.Millisecond
	// frameStateBytes bounds the chunk hashes of a frame's memory states: hashes do not
	// compress, and a frame may hold 256 MiB (recording.maxFramePayload). XLA's preallocated
	// pool made each state of a launch or copy that reached it 1.8 MB (a 7 GiB region) and a
	// frame 346 MB on an H200.
	frameStateBytes = 64 << 20
	drainInterval   = 2 * time.Millisecond
	// memDrainInterval is shorter: snapshot staging fills at PCIe speed.
	memDrainInterval = 500 * time.Microsecond
	activityFlush    = 500 * time.Millisecond
	takeBufferSize   = 4 << 20
	// symbolObjects is how many objects' symbol tables stay open to name
	// native frames: a PyTorch stack crosses about ten (libcuda, libtorch_*,
	// libc10*, python, libc), and a table holds a few words per function.
	symbolObjects = 32
)

// recorder owns one process's recording: it drains the C ring, turns raw
// records into recording messages and appends frames.
type recorder struct {
	own  ownCalls // gpurr's own copies and memsets, whose GPU records are left out
	cfg  agentcfg.Config
	info *pb.Process
	w    *recording.Writer
	log  *os.File

	mu      sync.Mutex // guards everything below; the loop and shutdown share it
	batch   *pb.Batch
	pending int // records in batch
	// stateBytes are the batch's memory states' hash bytes (frameStateBytes); writing is set
	// while writeFrame runs, which may stop memory capture and so add states
	stateBytes int
	writing    bool
	oldest     time.Time
	take       unsafe.Pointer // C buffer for gp_ring_take
	stacks     map[uint64]bool
	symbols    map[uint64]string // native symbol names by address
	objects    *symtab.Cache     // the symbol tables that name them
	devices    map[uint32]bool
	modules    []moduleInfo             // in load order
	triton     *tritonCache             // where Triton kernels' PTX is found
	hang       *hangWatch               // launches the GPU has not finished (--hang-timeout); nil when off
	writeSets  map[string]*ptx.WriteSet // by kernel name, from the PTX of modules whose PTX was found
	hung       bool                     // a hang was reported
	forcing    atomic.Bool              // a forced activity flush for the hang watch is under way
	kernels    map[uint64]*pb.Kernel
	links      *forwardLinks // backward launches to forward lines (PyTorch)
	nvtx       *nvtxState
	closed     bool
	stats      pb.Stats       // Go-side counters
	mem        *memoryCapture // nil when memory capture is off
	reserve    string         // disk space held back for the launch log (see holdDiskReserve), "" when none
	stop       chan struct{}
	wg         sync.WaitGroup
	lastTick   time.Time
}

type moduleInfo struct {
	sha256 string
	names  map[string]bool
}

func newRecorder(out string, cfg agentcfg.Config) (*recorder, error) {
	info := processInfo(cfg)
	name := processDirName(info)
	// The Process frame is written once the agent has started and filled
	// in what it learned (versions, clock), by start.
	// CreateNew, not Create: another process of the recording may have the same name.
	w, err := recording.CreateNew(out, name, nil)
	if err != nil {
		return nil, fmt.Errorf("create recording: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(w.Dir(), recording.LogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("create agent log: %w", err)
	}
	return &recorder{
		cfg:     cfg,
		info:    info,
		w:       w,
		log:     logf,
		batch:   &pb.Batch{},
		take:    C.malloc(takeBufferSize),
		stacks:  map[uint64]bool{},
		symbols: map[uint64]string{},
		objects: symtab.NewCache(symbolObjects),
		devices: map[uint32]bool{},
		kernels: map[uint64]*pb.Kernel{},
		links:   newForwardLinks(),
		nvtx:    newNvtxState(),
		triton:  newTritonCache(),
		hang:    newHangWatch(cfg.HangTimeout),
		stop:    make(chan struct{}),
	}, nil
}

func processInfo(cfg agentcfg.Config) *pb.Process {
	host, _ := os.Hostname()
	info := &pb.Process{
		Pid:             uint32(os.Getpid()),
		Ppid:            uint32(os.Getppid()),
		Hostname:        host,
		Argv:            cmdline(),
		StartUnixNs:     time.Now().UnixNano(),
		AgentVersion:    version.Version,
		CuptiPath:       cfg.CUPTI,
		CallstackMode:   cfg.Callstack,
		KernelFilter:    cfg.Kernels,
		StepRange:       cfg.StepRange,
		Probe:           cfg.Probe,
		GpuTiming:       cfg.GPUTiming != agentcfg.TimingOff,
		GpuTimingSerial: cfg.GPUTiming == agentcfg.TimingSerial,
		GpuTimingSample: cfg.GPUTimingSample,
		GpuTimingSteps:  cfg.GPUTimingSteps,
	}
	info.StepEvery = cfg.StepEvery
	if m := cfg.Memory; m.Mode == recording.MemoryHash || m.Mode == recording.MemorySnapshot || m.Mode == recording.MemoryDigest {
		info.Memory = &pb.MemoryConfig{
			Mode:             m.Mode,
			ChunkBytes:       memhash.ChunkSize,
			SnapshotKernels:  m.SnapshotKernels,
			SnapshotLaunches: m.SnapshotLaunches,
			OnFull:           m.OnFull,
			FlightRecorder:   m.FlightRecorder,
		}
		if m.Mode == recording.MemoryHash { // snapshot mode hashes every region
			info.Memory.WriteSets = m.WriteSets
			if m.WriteSets == agentcfg.WriteSetsLearned {
				info.Memory.AuditEvery = auditEvery
			}
		}
		_, info.Memory.NanScan, _ = agentcfg.ParseNanScan(m.NanScan)
		info.Memory.Digests = m.Digests()
		info.Memory.HashSteps = m.HashSteps
		info.Memory.DigestEvery = m.DigestEvery
		if m.Mode == recording.MemorySnapshot {
			info.Memory.StagingBytes = m.StagingBytes
		}
	}
	info.Rank = envInt("RANK")
	info.LocalRank = envInt("LOCAL_RANK")
	info.WorldSize = envInt("WORLD_SIZE")
	return info
}

func cmdline() []string {
	b, err := os.ReadFile("/proc/self/cmdline")
	if err != nil {
		return os.Args
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

func envInt(name string) *int32 {
	v, err := strconv.ParseInt(os.Getenv(name), 10, 32)
	if err != nil {
		return nil
	}
	n := int32(v)
	return &n
}

// processDirName names a process's directory: rank first where there is
// one, so listings sort by rank. Host and pid tell most processes apart, but
// not those of containers on one host with its network, whose pids start at
// 1 in each: recording.CreateNew numbers the later ones.
func processDirName(p *pb.Process) string {
	name := fmt.Sprintf("%s-%d", p.Hostname, p.Pid)
	if p.Rank != nil {
		name = fmt.Sprintf("rank%d-%s", *p.Rank, name)
	}
	return name
}

func (r *recorder) loop() {
	defer r.wg.Done()
	defer func() {
		if p := recover(); p != nil {
			r.logf("error", "writer stopped by an internal error: %v", p)
		}
	}()
	t := time.NewTicker(drainInterval)
	defer t.Stop()
	lastFlush := time.Now()
	sample := newTimingSampler(r.cfg, lastFlush, func(on bool) bool {
		flag := 0
		if on {
			flag = 1
		}
		return C.gp_activity_sample(C.int(flag)) == 0
	}, func() bool { return C.gp_activity_launched() != 0 })
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			sample.tick(now)
			flushed := false
			if now.Sub(lastFlush) >= activityFlush {
				// Hand over completed activity buffers so a killed program
				// still has its GPU timeline up to here; not while the hang
				// watch's forced flush, which a hung kernel may hold up, runs.
				if !r.forcing.Load() {
					C.gp_flush_activity(0)
				}
				lastFlush, flushed = now, true
			}
			r.mu.Lock()
			r.drain()
			r.drainProbes()
			C.gp_ring_prefault(C.GP_RING_AHEAD)
			if flushed && r.hang != nil && !r.hung {
				r.checkHang()
			}
			if r.pending > 0 && (len(r.batch.Launches) >= frameLaunches || now.Sub(r.oldest) >= frameInterval) {
				r.writeFrame()
			}
			r.mu.Unlock()
		}
	}
}

// checkHang reports, once, a launch the GPU has not finished within --hang-timeout: in the
// recording's log and on the program's stderr, with everything the agent holds written out
// (the launch log, the flight recorder's window); with --hang-kill it then ends the program.
func (r *recorder) checkHang() {
	now := uint64(C.gp_timestamp())
	stuck, forceFlush := r.hang.check(now)
	if forceFlush && r.forcing.CompareAndSwap(false, true) {
		// On a thread of its own: if CUPTI waits for the hung kernel, the
		// loop still reports it at the next check.
		go func() {
			defer r.forcing.Store(false)
			C.gp_flush_activity(1)
		}()
	}
	if len(stuck) == 0 {
		return
	}
	r.hung = true
	r.reportHang(stuck, now)
	if m := r.mem; m != nil {
		m.drain(r)
		if m.flight != nil {
			m.flight.dump(r, m, "hang")
		}
	}
	r.writeFrame()
	r.w.Sync()
	if r.cfg.HangKill {
		r.logf("error", "%sgpurr ends the program (--hang-kill)", recording.HangLogPrefix)
		r.writeFrame()
		r.w.Sync()
		fmt.Fprintf(os.Stderr, "gpurr: ending the program (--hang-kill); the recording holds everything up to here\n")
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
}

// memLoop consumes the memory jobs the GPU finished, every 0.5 ms: a thread
// waiting for staging space (backpressure) waits on this loop, which must
// not sit behind loop's activity flushes and frame writes.
func (r *recorder) memLoop() {
	defer r.wg.Done()
	defer func() {
		if p := recover(); p != nil {
			r.logf("error", "memory capture stopped by an internal error: %v", p)
		}
	}()
	t := time.NewTicker(memDrainInterval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.mu.Lock()
			r.mem.drain(r)
			r.mu.Unlock()
		}
	}
}

// shutdown writes everything left and marks the recording complete.
func (r *recorder) shutdown(reason string) {
	close(r.stop)
	r.wg.Wait()
	if !r.hung && !r.forcing.Load() { // else a kernel never finished, and the flush may wait for it
		C.gp_flush_activity(1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drain()
	r.finishProbes(2 * time.Second)
	r.drain() // the skips said while waiting
	if r.mem != nil {
		r.mem.finishAll(r, reason)
	}
	r.batch.End = &pb.End{EndNs: uint64(C.gp_timestamp()), Reason: reason}
	r.writeFrame()
	r.closeFiles()
}

// close ends a recording whose agent never started.
func (r *recorder) close(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batch.End = &pb.End{Reason: reason}
	r.writeFrame()
	r.closeFiles()
}

func (r *recorder) closeFiles() {
	if r.closed {
		return
	}
	r.closed = true
	r.releaseDiskReserve()
	r.w.Sync()
	r.w.Close()
	r.log.Close()
	r.objects.Close()
}

// drain empties the C ring into the current batch.
func (r *recorder) drain() {
	for {
		n := int(C.gp_ring_take((*C.uint8_t)(r.take), takeBufferSize))
		if n == 0 {
			return
		}
		buf := unsafe.Slice((*byte)(r.take), n)
		for off := 0; off < n; {
			h := (*C.gp_rec_hdr)(unsafe.Pointer(&buf[off]))
			size := int(h.size)
			if size < int(unsafe.Sizeof(C.gp_rec_hdr{})) || off+size > n {
				r.logf("error", "corrupt agent record (type %d, size %d): rest of batch dropped", h._type, size)
				return
			}
			r.record(buf[off : off+size])
			off += size
		}
	}
}

func (r *recorder) added() {
	if r.pending == 0 {
		r.oldest = time.Now()
	}
	r.pending++
}

// addedState notes a memory state added to the batch, and writes the batch out once its
// states' hashes reach frameStateBytes.
func (r *recorder) addedState(s *pb.MemoryState) {
	r.added()
	for _, rs := range s.GetRegions() {
		r.stateBytes += len(rs.GetHash()) + len(rs.GetChunkHashes()) + 8*(len(rs.GetNanCount())+len(rs.GetInfCount()))
	}
	if r.stateBytes >= frameStateBytes && !r.writing {
		r.writeFrame()
	}
}

// tail returns the bytes after a record's fixed part.
func tail(raw []byte, fixed uintptr, n int) []byte {
	start := int(fixed)
	if start+n > len(raw) {
		n = len(raw) - start
	}
	if n < 0 {
		return nil
	}
	return raw[start : start+n]
}

func dim3(v [3]C.uint32_t) *pb.Dim3 {
	return &pb.Dim3{X: uint32(v[0]), Y: uint32(v[1]), Z: uint32(v[2])}
}

// fixedSize is the size of the fixed part of a record of type typ (agent.h,
// autograd.h, memcap.h); the header's alone for a type it does not know.
func fixedSize(typ C.uint32_t) int {
	switch typ {
	case C.GP_REC_LAUNCH:
		return int(unsafe.Sizeof(C.gp_launch_rec{}))
	case C.GP_REC_KERNEL:
		return int(unsafe.Sizeof(C.gp_kernel_rec{}))
	case C.GP_REC_STACK:
		return int(unsafe.Sizeof(C.gp_stack_rec{}))
	case C.GP_REC_MODULE:
		return int(unsafe.Sizeof(C.gp_module_rec{}))
	case C.GP_REC_ACTIVITY, C.GP_REC_OWN_ACTIVITY:
		return int(unsafe.Sizeof(C.gp_activity_rec{}))
	case C.GP_REC_GRAPHNODE:
		return int(unsafe.Sizeof(C.gp_graphnode_rec{}))
	case C.GP_REC_GRAPHLAUNCH:
		return int(unsafe.Sizeof(C.gp_graphlaunch_rec{}))
	case C.GP_REC_DEVICE:
		return int(unsafe.Sizeof(C.gp_device_rec{}))
	case C.GP_REC_LOG:
		return int(unsafe.Sizeof(C.gp_log_rec{}))
	case C.GP_REC_ALLOC:
		return int(unsafe.Sizeof(C.gp_alloc_rec{}))
	case C.GP_REC_MEMLOST:
		return int(unsafe.Sizeof(C.gp_memlost_rec{}))
	case C.GP_REC_NODECLASS:
		return int(unsafe.Sizeof(C.gp_nodeclass_rec{}))
	case C.GP_REC_RANGE:
		return int(unsafe.Sizeof(C.gp_range_rec{}))
	case C.GP_REC_RANGE_END:
		return int(unsafe.Sizeof(C.gp_range_end_rec{}))
	case C.GP_REC_NVTX_NAME:
		return int(unsafe.Sizeof(C.gp_nvtx_name_rec{}))
	case C.GP_REC_PROBE_SKIP:
		return int(unsafe.Sizeof(C.gp_probe_skip_rec{}))
	case C.GP_REC_COPY:
		return int(unsafe.Sizeof(C.gp_copy_rec{}))
	case C.GP_REC_SYNC:
		return int(unsafe.Sizeof(C.gp_sync_rec{}))
	case C.GP_REC_HOSTCALL:
		return int(unsafe.Sizeof(C.gp_hostcall_rec{}))
	}
	return int(unsafe.Sizeof(C.gp_rec_hdr{}))
}

// record decodes one record, raw: its header's size bytes, 8-byte aligned.
// A record shorter than its type's fixed part is dropped with an error in
// the log: the C side never writes one, and reading it would read past it.
func (r *recorder) record(raw []byte) {
	if len(raw) < int(unsafe.Sizeof(C.gp_rec_hdr{})) {
		return
	}
	p := unsafe.Pointer(&raw[0])
	typ := (*C.gp_rec_hdr)(p)._type
	if len(raw) < fixedSize(typ) {
		if !r.closed {
			r.logf("error", "truncated agent record (type %d, %d bytes): dropped", typ, len(raw))
		}
		return
	}
	if r.closed {
		// Writing failed (a full disk): keep the ring moving so the program
		// is not slowed, and hold nothing, or memory would grow without bound.
		if typ == C.GP_REC_MODULE {
			C.free((*C.gp_module_rec)(p).image)
		}
		return
	}
	switch typ {
	case C.GP_REC_LAUNCH:
		l := (*C.gp_launch_rec)(p)
		launch := &pb.Launch{
			Seq:            uint64(l.seq),
			Tid:            uint32(l.tid),
			Device:         uint32(l.device),
			Context:        uint64(l.context),
			ContextUid:     uint32(l.context_uid),
			Stream:         uint64(l.stream),
			StreamId:       uint32(l.stream_id),
			KernelId:       uint64(l.kernel_id),
			Grid:           dim3(l.grid),
			Block:          dim3(l.block),
			SharedMemBytes: uint32(l.shared_mem),
			Params:         bytes.Clone(tail(raw, unsafe.Sizeof(*l), int(l.params_len))),
			CorrelationId:  uint32(l.correlation_id),
			HostNs:         uint64(l.host_ns),
			EndNs:          uint64(l.end_ns),
			CallstackId:    uint64(l.callstack_id),
			Captured:       l.captured != 0,
			GraphNodeId:    uint64(l.graph_node_id),
			Api:            uint32(l.api),
			Result:         int32(l.result),
			Untimed:        l.untimed != 0,
			Cooperative:    l.cooperative != 0,
			RangeId:        uint64(l.range_id),
		}
		if l.cluster[0] != 0 {
			launch.Cluster = dim3(l.cluster)
		}
		if l.ag_present != 0 {
			r.links.launch(launch, uint64(l.ag_thread), uint64(l.ag_seq), uint32(l.ag_class), &r.stats)
		}
		if l.mem_status != 0 {
			launch.Memory = &pb.MemoryPlan{
				Status:           pb.MemoryPlan_Status(l.mem_status),
				SnapshotSelected: l.snapshot_selected != 0,
			}
			if l.snapshot_selected != 0 && r.mem != nil {
				r.mem.snapshotSelected++
			}
			if at := int(unsafe.Sizeof(*l)) + (int(l.params_len)+7)&^7; at <= len(raw) {
				launch.Regions = regions(raw[at:], int(l.nregions), int(l.npointers))
			}
		}
		r.batch.Launches = append(r.batch.Launches, launch)
		r.hang.launch(launch)
	case C.GP_REC_KERNEL:
		k := (*C.gp_kernel_rec)(p)
		layout := tail(raw, unsafe.Sizeof(*k), int(k.nparams)*8)
		name := string(tail(raw, unsafe.Sizeof(*k)+uintptr(len(layout)), int(k.name_len)))
		kernel := &pb.Kernel{
			Id:         uint64(k.kernel_id),
			Name:       name,
			Demangled:  recording.Demangle(name),
			ParamBytes: uint32(k.param_bytes),
		}
		ws := r.writeSets[name]
		for i := 0; i+8 <= len(layout); i += 8 {
			p := &pb.ParamInfo{Offset: leU32(layout[i:]), Size: leU32(layout[i+4:])}
			p.ProvedReadOnly = ws != nil && !ws.MayWriteAt(int(p.Offset), int(p.Size))
			kernel.Params = append(kernel.Params, p)
		}
		if r.mem != nil {
			r.mem.kernel(kernel.Id, name, kernel.ParamBytes, ws)
		}
		kernel.ModuleSha256 = r.moduleOf(name)
		kernel.Identity = recording.KernelIdentity(kernel.ModuleSha256, name)
		r.kernels[kernel.Id] = kernel
		r.batch.Kernels = append(r.batch.Kernels, kernel)
	case C.GP_REC_STACK:
		r.stack((*C.gp_stack_rec)(p), raw)
	case C.GP_REC_MODULE:
		r.module((*C.gp_module_rec)(p))
	case C.GP_REC_PROBE_SKIP:
		r.probeSkipped((*C.gp_probe_skip_rec)(p))
	case C.GP_REC_COPY:
		if c := copyRecord((*C.gp_copy_rec)(p)); !r.own.take(c.CorrelationId) {
			r.batch.Copies = append(r.batch.Copies, c)
		}
	case C.GP_REC_SYNC:
		r.batch.Syncs = append(r.batch.Syncs, syncRecord((*C.gp_sync_rec)(p)))
	case C.GP_REC_HOSTCALL:
		if h := (*C.gp_hostcall_rec)(p); h.own != 0 {
			r.own.add(uint32(h.correlation_id))
		} else {
			r.batch.HostCalls = append(r.batch.HostCalls, hostCall(h))
		}
	case C.GP_REC_ACTIVITY, C.GP_REC_OWN_ACTIVITY:
		a := (*C.gp_activity_rec)(p)
		act := &pb.KernelActivity{
			CorrelationId:        uint32(a.correlation_id),
			Device:               uint32(a.device),
			ContextUid:           uint32(a.context_uid),
			StreamId:             uint32(a.stream_id),
			StartNs:              uint64(a.start),
			EndNs:                uint64(a.end),
			Name:                 string(tail(raw, unsafe.Sizeof(*a), int(a.name_len))),
			GraphId:              uint32(a.graph_id),
			GraphNodeId:          uint64(a.graph_node_id),
			Grid:                 dim3(a.grid),
			Block:                dim3(a.block),
			RegistersPerThread:   uint32(a.registers),
			SharedMemBytes:       uint32(a.dynamic_smem),
			StaticSharedMemBytes: uint32(a.static_smem),
		}
		if typ == C.GP_REC_OWN_ACTIVITY {
			r.batch.OwnActivities = append(r.batch.OwnActivities, act)
		} else {
			r.batch.Activities = append(r.batch.Activities, act)
			r.hang.finished(act)
		}
	case C.GP_REC_GRAPHNODE:
		g := (*C.gp_graphnode_rec)(p)
		r.batch.GraphNodes = append(r.batch.GraphNodes, &pb.GraphNode{
			NodeId:          uint64(g.node_id),
			GraphId:         uint32(g.graph_id),
			OriginalNodeId:  uint64(g.original_node_id),
			LaunchSeq:       uint64(g.launch_seq),
			NodeType:        uint32(g.node_type),
			UpdatedAfterSeq: uint64(g.updated_after_seq),
		})
	case C.GP_REC_GRAPHLAUNCH:
		g := (*C.gp_graphlaunch_rec)(p)
		r.batch.GraphLaunches = append(r.batch.GraphLaunches, &pb.GraphLaunch{
			Seq:           uint64(g.seq),
			Tid:           uint32(g.tid),
			GraphExec:     uint64(g.graph_exec),
			Stream:        uint64(g.stream),
			StreamId:      uint32(g.stream_id),
			CorrelationId: uint32(g.correlation_id),
			HostNs:        uint64(g.host_ns),
			CallstackId:   uint64(g.callstack_id),
			Device:        uint32(g.device),
			Result:        int32(g.result),
			RangeId:       uint64(g.range_id),
		})
	case C.GP_REC_DEVICE:
		d := (*C.gp_device_rec)(p)
		if r.devices[uint32(d.ordinal)] {
			return
		}
		r.devices[uint32(d.ordinal)] = true
		r.batch.Devices = append(r.batch.Devices, &pb.Device{
			Ordinal:     uint32(d.ordinal),
			Uuid:        formatUUID(C.GoBytes(unsafe.Pointer(&d.uuid[0]), 16)),
			Name:        cString(d.name[:]),
			CcMajor:     uint32(d.cc_major),
			CcMinor:     uint32(d.cc_minor),
			SmCount:     uint32(d.sm_count),
			MemoryBytes: uint64(d.memory_bytes),
			ContextUid:  uint32(d.context_uid),
		})
	case C.GP_REC_ALLOC:
		a := (*C.gp_alloc_rec)(p)
		r.batch.Allocations = append(r.batch.Allocations, &pb.Allocation{
			Id:          uint64(a.id),
			Kind:        pb.Allocation_Kind(a.kind),
			Address:     uint64(a.address),
			Size:        uint64(a.size),
			HostNs:      uint64(a.host_ns),
			Freed:       a.freed != 0,
			Device:      uint32(a.device),
			Owner:       ownerNames[a.owner],
			CallstackId: uint64(a.callstack_id),
			Cleared:     a.cleared != 0,
			LaunchSeq:   uint64(a.launch_seq),
		})
		if a.freed != 0 && r.mem != nil {
			r.mem.freed(uint64(a.id))
		}
	case C.GP_REC_MEMLOST:
		if r.mem != nil {
			r.mem.lost(r, (*C.gp_memlost_rec)(p), raw)
		}
		return
	case C.GP_REC_NODECLASS:
		c := (*C.gp_nodeclass_rec)(p)
		name := string(tail(raw, unsafe.Sizeof(*c), int(c.name_len)))
		r.links.classes[uint32(c.id)] = nodeClassName(name, c.kind == C.GP_NODECLASS_CXX)
		return
	case C.GP_REC_RANGE:
		r.rangeOpen((*C.gp_range_rec)(p), raw)
	case C.GP_REC_RANGE_END:
		r.rangeEnd((*C.gp_range_end_rec)(p))
	case C.GP_REC_NVTX_NAME:
		r.nvtxName((*C.gp_nvtx_name_rec)(p), raw)
		return
	case C.GP_REC_LOG:
		l := (*C.gp_log_rec)(p)
		r.addLog(uint64(l.host_ns), []string{"info", "warn", "error"}[min(int(l.level), 2)],
			string(tail(raw, unsafe.Sizeof(*l), int(l.len))))
		return
	default:
		r.logf("error", "unknown agent record type %d", typ)
		return
	}
	r.added()
}

// cString reads a fixed-size C string field up to its first NUL, or whole
// when it holds none.
func cString(field []C.char) string {
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(field))), len(field))
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func leU32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func (r *recorder) stack(s *C.gp_stack_rec, raw []byte) {
	id := uint64(s.id)
	if r.stacks[id] {
		return // another thread resolved the same stack concurrently
	}
	r.stacks[id] = true
	cs := &pb.Callstack{Id: id, Cut: stackCuts[s.cut]}
	switch s.source {
	case 1:
		cs.Source = "python"
	case 2:
		cs.Source = "native"
	default:
		cs.Source = "python+native"
	}
	off := int(unsafe.Sizeof(*s))
	for i := 0; i < int(s.nframes) && off+int(unsafe.Sizeof(C.gp_frame_rec{})) <= len(raw); i++ {
		f := (*C.gp_frame_rec)(unsafe.Pointer(&raw[off]))
		body := off + int(unsafe.Sizeof(*f))
		fl, gl := int(f.file_len), int(f.func_len)
		if body+fl+gl > len(raw) {
			break
		}
		frame := &pb.Frame{
			File:     string(raw[body : body+fl]),
			Function: string(raw[body+fl : body+fl+gl]),
			Line:     uint32(f.line),
		}
		if f.kind == C.GP_FRAME_PYTHON {
			frame.Kind = pb.Frame_PYTHON
		} else {
			frame.Kind = pb.Frame_NATIVE
			frame.Pc = uint64(f.pc)
			frame.Offset = uint64(f.offset)
			frame.Function = r.symbol(frame)
		}
		cs.Frames = append(cs.Frames, frame)
		off += (int(unsafe.Sizeof(*f)) + fl + gl + 7) &^ 7
	}
	r.hang.callstack(cs)
	r.batch.Callstacks = append(r.batch.Callstacks, cs)
	r.stats.Callstacks++
	r.added()
}

// stackCuts names gp_stack_rec.cut's GP_UNWIND_* values (Callstack.cut).
var stackCuts = map[C.uint32_t]string{
	C.GP_UNWIND_MAX:         "depth",
	C.GP_UNWIND_NO_INFO:     "no unwind info",
	C.GP_UNWIND_UNSUPPORTED: "unsupported unwind rule",
	C.GP_UNWIND_CORRUPT:     "corrupt frame",
	C.GP_UNWIND_NO_STACK:    "foreign stack",
}

// symbol names the function of a native frame, demangled, "" when unknown,
// from its object's symbol tables (.symtab too: static and Go functions
// have names). It runs here on the writer, once per address, and never on
// the program's threads.
func (r *recorder) symbol(f *pb.Frame) string {
	if name, ok := r.symbols[f.Pc]; ok {
		return name
	}
	// A frame's address is a return address, just after its call, which
	// may be the last instruction of its function: the call names it.
	addr := f.Offset
	if addr > 0 {
		addr--
	}
	name, err := r.objects.Name(f.File, addr)
	if err != nil {
		r.logf("warn", "native frames in %s have no function names: %v", f.File, err)
	}
	name = recording.Demangle(name)
	r.symbols[f.Pc] = name
	return name
}

// module stores a module image and lists the functions it holds.
func (r *recorder) module(m *C.gp_module_rec) {
	image := C.GoBytes(m.image, C.int(m.size))
	C.free(m.image)
	mod := &pb.Module{
		CuptiModuleId: uint32(m.module_id),
		Size:          uint64(m.size),
		HostNs:        uint64(m.host_ns),
		KernelNames:   moduleFunctions(image),
	}
	digest, err := r.w.PutModule(image)
	mod.Sha256 = digest
	mod.Stored = err == nil
	if recording.DeviceLaunches(image) {
		r.logf("warn", "%smodule %s (%d kernels) launches kernels from the device (dynamic parallelism): "+
			"CUPTI's callbacks do not see those launches, whose kernels have no launch, parameters or line",
			recording.DeviceLaunchLogPrefix, digest, len(mod.KernelNames))
	}
	if err != nil {
		r.stats.ModulesFailed++
		r.logf("error", "module %s not stored: %v", digest, err)
	}
	// The program's thread found and analysed it as the module loaded (hash mode's write
	// sets); otherwise the writer looks itself.
	found, ok := takeLoadedModule(digest)
	if !ok {
		if found.ptx = r.triton.ptx(digest, mod.KernelNames); found.ptx != nil {
			found.sets = moduleWriteSets(found.ptx)
		}
	}
	from := "triton-cache"
	if found.ptx == nil && len(mod.KernelNames) > 0 {
		// A module of nvcc's: the program's fat binary holding this cubin, or its
		// executable's, may hold its PTX (race, probe). No write sets: they would prove
		// what the cubin does from the PTX.
		found.ptx, from = programPTX(image, mod.KernelNames)
	}
	if text := found.ptx; text != nil {
		if err := r.w.PutModulePTX(digest, text); err != nil {
			r.logf("warn", "the PTX of module %s (%s) not stored: %v", digest, from, err)
		} else {
			mod.Ptx = from
		}
		for name, ws := range found.sets {
			if r.writeSets == nil {
				r.writeSets = map[string]*ptx.WriteSet{}
			}
			r.writeSets[name] = ws
		}
	}
	names := make(map[string]bool, len(mod.KernelNames))
	for _, n := range mod.KernelNames {
		names[n] = true
	}
	r.modules = append(r.modules, moduleInfo{sha256: digest, names: names})
	r.batch.Modules = append(r.batch.Modules, mod)
}

// moduleOf finds the module a kernel came from: the most recently loaded
// module that defines the name (a program that recompiles a kernel under
// the same name launches the newest one).
func (r *recorder) moduleOf(name string) string {
	for i := len(r.modules) - 1; i >= 0; i-- {
		if r.modules[i].names[name] {
			return r.modules[i].sha256
		}
	}
	return ""
}

// moduleFunctions lists the functions a module image defines, none when
// it is not a cubin that can be read.
func moduleFunctions(image []byte) []string {
	f, err := cubin.Parse(image)
	if err != nil {
		return nil
	}
	names, _ := f.Functions()
	return names
}

func formatUUID(b []byte) string {
	if len(b) != 16 {
		return ""
	}
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (r *recorder) addLog(hostNs uint64, level, msg string) {
	if level == "error" {
		r.stats.Errors++
	}
	r.batch.Log = append(r.batch.Log, &pb.LogEntry{HostNs: hostNs, Level: level, Message: msg})
	fmt.Fprintf(r.log, "%s %s: %s\n", time.Now().Format(time.RFC3339Nano), level, msg)
	r.added()
}

// logf records a message from the Go side; callers hold r.mu or own r.
func (r *recorder) logf(level, format string, args ...any) {
	r.addLog(uint64(C.gp_timestamp()), level, fmt.Sprintf(format, args...))
}

// writeFrame appends the current batch with up-to-date counters.
func (r *recorder) writeFrame() {
	if r.closed {
		r.batch = &pb.Batch{}
		r.pending, r.stateBytes = 0, 0
		return
	}
	r.writing = true
	defer func() { r.writing = false }()
	var c C.gp_counters
	C.gp_read_counters(&c)
	if r.mem != nil {
		r.mem.forgetFreed()
	}
	r.stats.FramesWritten++
	r.batch.Stats = &pb.Stats{
		Launches:                  uint64(c.launches),
		LaunchesFiltered:          uint64(c.launches_filtered),
		LaunchesDropped:           uint64(c.launches_dropped),
		GraphLaunches:             uint64(c.graph_launches),
		Activities:                uint64(c.activities),
		ActivitiesDropped:         uint64(c.activities_dropped),
		Callstacks:                r.stats.Callstacks,
		CallstacksFailed:          uint64(c.callstacks_failed),
		Modules:                   uint64(c.modules),
		ModulesFailed:             uint64(c.modules_dropped) + r.stats.ModulesFailed,
		Errors:                    r.stats.Errors,
		RingBytesDropped:          uint64(c.ring_bytes_dropped),
		FramesWritten:             r.stats.FramesWritten,
		AgentCallbackNs:           cyclesNS(c.callback_cycles),
		AgentLaunchNs:             cyclesNS(c.launch_callback_cycles),
		AgentStackNs:              cyclesNS(c.stack_cycles),
		AgentAutogradNs:           cyclesNS(c.autograd_cycles),
		AgentRingNs:               cyclesNS(c.ring_cycles),
		AgentMemoryNs:             cyclesNS(c.memory_cycles),
		WriteEpochs:               uint64(c.write_epochs),
		MemoryHashKernels:         uint64(c.memory_hash_kernels),
		SideBatches:               uint64(c.side_batches),
		SideStreamWaits:           uint64(c.side_stream_waits),
		SideHostWaits:             uint64(c.side_host_waits),
		Digests:                   uint64(c.digests),
		DigestsSkipped:            uint64(c.digests_skipped),
		Copies:                    uint64(c.copies),
		Syncs:                     uint64(c.syncs),
		HostCalls:                 uint64(c.host_calls),
		HostCallsDropped:          uint64(c.host_calls_dropped),
		CuptiClients:              uint64(c.cupti_clients),
		CuptiClientRecords:        uint64(c.cupti_client_records),
		CuptiClientRecordsDropped: uint64(c.cupti_client_records_dropped),
		AgentMemoryLaunchNs:       cyclesNS(c.memory_launch_cycles),
		StacksNew:                 uint64(c.stacks_new),
		AgentStackNewNs:           cyclesNS(c.stack_new_cycles),
		Allocations:               uint64(c.allocations),
		MemoryLaunches:            uint64(c.memory_launches),
		MemorySkipped:             uint64(c.memory_skipped),
		BytesHashed:               uint64(c.bytes_hashed),
		StagingWaitNs:             uint64(c.staging_wait_ns),
		MemoryCaptureGpuNs:        uint64(c.memcap_gpu_ns),
		BackwardLaunches:          r.stats.BackwardLaunches,
		BackwardLinked:            r.stats.BackwardLinked,
		Ranges:                    uint64(c.ranges),
		ProbeLaunches:             uint64(c.probe_launches),
		ProbeSkipped:              uint64(c.probe_skipped),
		RangesDropped:             uint64(c.ranges_dropped) + r.nvtx.unmatched,
	}
	if r.mem != nil {
		r.mem.fill(r.batch.Stats)
	}
	err := r.w.Write(r.batch)
	if err != nil && r.releaseDiskReserve() {
		// The disk filled up (snapshots, most likely): stop memory capture
		// and write the launch log on into the space held back for it.
		if r.mem != nil {
			r.mem.stop(r, fmt.Sprintf("writing the recording failed: %v", err))
			r.mem.fill(r.batch.Stats)
		}
		err = r.w.Write(r.batch)
	}
	if err != nil {
		// Disk full or similar: say so once on stderr and stop writing;
		// the program goes on (invariant 1).
		fmt.Fprintf(os.Stderr, "gpurr: agent: writing %s failed, recording stopped: %v\n", r.w.Dir(), err)
		r.closeFiles()
	}
	r.batch = &pb.Batch{}
	r.pending, r.stateBytes = 0, 0
	clear(r.nvtx.inBatch)
}

// regions decodes a launch record's region tail: gp_region_rec entries,
// then gp_pointer_rec entries naming which parameter word hit which region.
func regions(b []byte, n, npointers int) []*pb.Region {
	const regionSize, pointerSize = 24, 8
	if n*regionSize+npointers*pointerSize > len(b) {
		return nil
	}
	le := binary.LittleEndian
	out := make([]*pb.Region, n)
	for i := range out {
		e := b[i*regionSize:]
		out[i] = &pb.Region{Address: le.Uint64(e), Size: le.Uint64(e[8:]), AllocationId: le.Uint64(e[16:])}
	}
	ptrs := b[n*regionSize:]
	for i := range npointers {
		off, reg := le.Uint32(ptrs[i*pointerSize:]), le.Uint32(ptrs[i*pointerSize+4:])
		if int(reg) < n {
			out[reg].ParamOffsets = append(out[reg].ParamOffsets, off)
		}
	}
	return out
}

// diskReserveBytes is held back, in snapshot mode, for the launch log: about
// 100,000 launches' records once snapshots have filled the disk.
const diskReserveBytes = 16 << 20

// holdDiskReserve allocates diskReserveBytes in the process directory, so
// that when snapshots fill the disk, memory capture can stop and the launch
// log still has room to say so and to go on. Without it, the first frame
// after the disk filled would fail and end the recording.
func (r *recorder) holdDiskReserve() error {
	path := filepath.Join(r.w.Dir(), ".disk-reserve")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, diskReserveBytes); err != nil {
		os.Remove(path)
		return err
	}
	r.reserve = path
	return nil
}

// releaseDiskReserve frees the reserve; it reports whether there was one.
func (r *recorder) releaseDiskReserve() bool {
	if r.reserve == "" {
		return false
	}
	os.Remove(r.reserve)
	r.reserve = ""
	return true
}

// cyclesNS turns a counter of TSC cycles into nanoseconds.
func cyclesNS(cycles C.uint64_t) uint64 {
	return uint64(float64(cycles) * float64(C.gp_tsc_ns_per_cycle()))
}
