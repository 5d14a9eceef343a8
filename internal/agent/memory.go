package agent

/*
#include <stdlib.h>
#include "memcap.h"
*/
import "C"

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/gpurr/gpurr/internal/agentcfg"
	"github.com/gpurr/gpurr/internal/kernels"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/chunkstore"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Memory-capture defaults (docs/memory.md).
const (
	defaultResultsBytes = 32 << 20 // chunk hashes in flight: 2M chunks, 128 GiB of regions
	exitWait            = 10 * time.Second
	// Learned write sets: a parameter word is learned read-only after
	// learnAfter launches left what it points to unchanged and none changed
	// it; every auditEvery-th launch of a kernel then hashes all its regions.
	learnAfter = 3
	auditEvery = 32
	// parallelChunks: a snapshot job hashes its copied chunks on several
	// cores once each has at least this many.
	parallelChunks = 16
)

// memoryCapture turns completed GPU jobs into MemoryState records and
// snapshot chunks into the chunk store. It runs on the writer goroutine,
// under recorder.mu.
type memoryCapture struct {
	store   *chunkstore.Writer // snapshot mode only
	pending map[pointKey]*pendingPoint
	flight  *flightRecorder // --flight-recorder N > 0
	stats   pb.Stats        // Go-side memory counters
	// snapshotSelected counts launches the snapshot selection matched, to
	// say at exit when it matched none.
	snapshotSelected uint64
	// Write sets (hash mode; writeSets is --write-sets, "" when off): the
	// last hashed state of each allocation, which carried regions take,
	// and what is known of each kernel's parameter words.
	writeSets string
	last      map[uint64]allocState
	kernels   map[uint64]*kernelWords
	// Allocations freed in this frame and the last: their last states are
	// forgotten a frame later, once jobs enqueued before the free are in.
	freedNow, freedBefore []uint64
	// unstored: chunk hashes a GPU shadow may hold whose bytes were never
	// stored (they changed before the copy); see stored.
	unstored map[[16]byte]struct{}
	renamed  uint64 // chunks stored under another name than the kernel's hash
}

// allocState is an allocation's state after the last launch that hashed it.
type allocState struct {
	job, launch uint64
	state       *pb.RegionState
}

// pointKey names a point: a launch's, a step digest's, or a copy's (its call's correlation
// id, seq the last launch call before it).
type pointKey struct {
	seq   uint64
	point uint32
	call  uint32
}

// pendingPoint gathers the jobs of one launch point: a launch with more
// than kernels.MaxJobRegions regions needs several.
type pendingPoint struct {
	state    *pb.MemoryState
	parts    map[uint32][]*pb.RegionState // by first region index
	regions  map[uint32][]regionKey
	allocIDs map[uint32][]uint64 // a digest's or a copy's: the allocation of each region
	chunks   map[[16]byte][]byte // snapshot bytes that crossed PCIe (flight recorder only)
	pieced   []uint32            // regions (by index) that came in pieces: their hash is folded at the end
	received uint32
	njobs    uint32
}

type regionKey struct{ addr, size uint64 }

func newMemoryCapture(r *recorder) (*memoryCapture, error) {
	m := &memoryCapture{pending: map[pointKey]*pendingPoint{}}
	if r.cfg.Memory.Mode != recording.MemorySnapshot {
		if ws := r.cfg.Memory.WriteSets; ws != agentcfg.WriteSetsAll {
			m.writeSets = ws
			m.last = map[uint64]allocState{}
			m.kernels = map[uint64]*kernelWords{}
		}
		return m, nil
	}
	store, err := chunkstore.Create(r.w.Dir(), chunkstore.Options{})
	if err != nil {
		return nil, err
	}
	m.store = store
	if err := r.holdDiskReserve(); err != nil {
		r.logf("warn", "could not hold %d MiB back for the launch log (%v): if snapshots fill the disk, the recording ends there", diskReserveBytes>>20, err)
	}
	if n := r.cfg.Memory.FlightRecorder; n > 0 {
		m.flight = newFlightRecorder(int(n))
	}
	return m, nil
}

// drain takes every job the GPU has finished, oldest first.
func (m *memoryCapture) drain(r *recorder) {
	var v C.gp_memjob_view
	for C.gp_mem_poll(&v) != 0 {
		m.job(r, &v)
		C.gp_mem_release()
	}
}

func le16(b []byte) [16]byte { return [16]byte(b[:16]) }

// job turns one completed job into region states; the staging bytes it
// copied go to the chunk store (or the flight recorder) before the job's
// space is released.
func (m *memoryCapture) job(r *recorder, v *C.gp_memjob_view) {
	n := int(v.nregions)
	chunks := uint32(v.total_chunks)
	key := pointKey{uint64(v.launch_seq), uint32(v.point), uint32(v.call)}
	p := m.point(key, uint32(v.njobs))
	p.received++
	if v.point == C.GP_POINT_COPY { // what it wrote is said even when its state is lost
		n := int(v.nregions)
		keys, ids := make([]regionKey, n), make([]uint64, n)
		for i := range n {
			keys[i], ids[i] = regionKey{uint64(v.region_addr[i]), uint64(v.region_size[i])}, uint64(v.alloc_id[i])
		}
		p.regions[uint32(v.region_base)], p.allocIDs[uint32(v.region_base)] = keys, ids
	}
	if v.point == C.GP_POINT_DIGEST {
		p.state.Step = uint32(v.step)
		p.state.DigestOf = "optimizer"
		if v.digest_all != 0 {
			p.state.DigestOf = "all"
		}
	}
	if v.lost != 0 {
		p.state.Lost = true
		p.state.LostReason = "the agent could not launch its memory kernel (see the log)"
		m.finish(r, key, p)
		return
	}
	nanRegions := 0
	if v.nan_dtypes != 0 {
		nanRegions = n
	}
	l := kernels.Layout(chunks, nanRegions)
	res := unsafe.Slice((*byte)(unsafe.Pointer(v.result)), l.Size)
	states := make([]*pb.RegionState, n)
	firsts := make([]uint32, n+1)
	keys := make([]regionKey, n)
	for i := range n {
		size := uint64(v.region_size[i])
		keys[i] = regionKey{uint64(v.region_addr[i]), size}
		if v.carry[i] != C.GP_CARRY_NONE { // given no bytes: its chunks are not in the result
			firsts[i+1] = firsts[i]
			states[i] = m.carried(v, i)
			continue
		}
		k := kernels.Chunks(size)
		if v.piece != 0 { // a piece of a region larger than the staging ring: some of its chunks
			k = chunks
		}
		firsts[i+1] = firsts[i] + k
		chunkHashes := bytes.Clone(res[l.ChunkHashes+16*int(firsts[i]) : l.ChunkHashes+16*int(firsts[i+1])])
		region := memhash.RegionOfEncoded(chunkHashes, size).Bytes()
		states[i] = &pb.RegionState{Hash: region[:], ChunkHashes: chunkHashes}
		if nanRegions > 0 {
			counts := l.RegionNanCounts(res, i)
			for k := range kernels.NanScanTypes {
				if v.nan_dtypes&(1<<k) != 0 {
					states[i].NanCount = append(states[i].NanCount, counts[2*k])
					states[i].InfCount = append(states[i].InfCount, counts[2*k+1])
				}
			}
		}
	}
	if v.snapshot != 0 {
		m.stored(r, v, p, res, l, states, firsts, keys)
		m.stats.ChunksTotal += uint64(chunks)
	}
	if m.last != nil && v.point == C.GP_POINT_AFTER && v.snapshot == 0 {
		m.learn(r, v, states)
		for i := range n {
			if id := uint64(v.alloc_id[i]); id != 0 && v.carry[i] == C.GP_CARRY_NONE {
				m.last[id] = allocState{job: uint64(v.job_seq), launch: uint64(v.launch_seq), state: states[i]}
			}
		}
		if v.audit != 0 && v.region_base == 0 {
			m.stats.WriteSetAudits++
		}
	}
	if v.piece != 0 {
		p.piece(uint32(v.region_base), uint32(v.piece_first), states[0], keys[0])
		m.finish(r, key, p)
		return
	}
	p.parts[uint32(v.region_base)] = states
	p.regions[uint32(v.region_base)] = keys
	if v.point == C.GP_POINT_DIGEST || v.point == C.GP_POINT_COPY {
		ids := make([]uint64, n)
		for i := range n {
			ids[i] = uint64(v.alloc_id[i])
		}
		p.allocIDs[uint32(v.region_base)] = ids
	}
	m.finish(r, key, p)
}

// stored puts a snapshot job's copied chunks into the chunk store (or the
// flight recorder), each named by the hash of the bytes that arrived in
// staging, not by the hash the kernel took: the kernel reads a chunk once
// to hash it and again to copy it, and a launch on another stream may
// write it in between. Such a chunk's hash is replaced in its region's
// state, the region hash folded again, and its allocation copies every
// chunk at its next snapshot (its GPU shadow holds the unstored hash).
// A state that still names an unstored hash (a job enqueued before the
// writer saw the tear) counts that chunk missing, as a dropped one.
func (m *memoryCapture) stored(r *recorder, v *C.gp_memjob_view, p *pendingPoint, res []byte, l kernels.ResultLayout,
	states []*pb.RegionState, firsts []uint32, keys []regionKey) {
	n := len(states)
	staging := unsafe.Slice((*byte)(unsafe.Pointer(v.staging)), int(v.transferred)*memhash.ChunkSize)
	datas := make([][]byte, v.transferred)
	where := make([]int, v.transferred) // the region of each copied chunk, -1 none
	for t := range datas {
		b := binary.LittleEndian.Uint32(res[l.TransferList+4*t:])
		i := sort.Search(n, func(i int) bool { return firsts[i+1] > b })
		where[t] = i
		if i == n {
			where[t] = -1 // cannot happen: the kernel numbers chunks below total_chunks
			continue
		}
		off := (uint64(b-firsts[i]) + uint64(v.piece_first)) * memhash.ChunkSize
		length := min(uint64(memhash.ChunkSize), keys[i].size-off)
		datas[t] = staging[t*memhash.ChunkSize : t*memhash.ChunkSize+int(length)]
	}
	names := chunkNames(datas)
	var torn []uint64 // allocations with a chunk that changed while copied
	refold := make([]bool, n)
	for t, data := range datas {
		i := where[t]
		if i < 0 {
			continue
		}
		b := binary.LittleEndian.Uint32(res[l.TransferList+4*t:])
		name := names[t]
		if kernel := le16(res[l.ChunkHashes+16*int(b):]); kernel != name {
			copy(states[i].ChunkHashes[16*(b-firsts[i]):], name[:])
			refold[i] = true
			if m.unstored == nil {
				m.unstored = map[[16]byte]struct{}{}
			}
			if !m.holds(kernel) { // bytes of that hash stored before stay good
				m.unstored[kernel] = struct{}{}
			}
			torn = append(torn, uint64(v.alloc_id[i]))
			m.renamed++
		}
		delete(m.unstored, name)
		states[i].ChunksTransferred++
		m.stats.ChunksTransferred++
		if m.flight != nil {
			if _, ok := p.chunks[name]; !ok {
				p.chunks[name] = bytes.Clone(data)
			}
		} else if err := m.store.Put(name, data); err != nil {
			m.stop(r, fmt.Sprintf("chunk store: %v", err))
		}
	}
	for i, rs := range states {
		if refold[i] && v.piece == 0 { // a piece's region hash is folded once all pieces are in
			region := memhash.RegionOfEncoded(rs.ChunkHashes, keys[i].size).Bytes()
			rs.Hash = region[:]
		}
		if len(m.unstored) == 0 || v.carry[i] != C.GP_CARRY_NONE {
			continue
		}
		for off := 0; off < len(rs.ChunkHashes); off += 16 {
			if _, ok := m.unstored[le16(rs.ChunkHashes[off:])]; ok {
				rs.ChunksMissing++
			}
		}
	}
	if len(torn) > 0 {
		C.gp_mem_copy_all((*C.uint64_t)(unsafe.Pointer(&torn[0])), C.uint32_t(len(torn)))
		if m.renamed == uint64(len(torn)) { // the first: say it once
			r.logf("warn", "launch %d: %d snapshot chunk(s) changed between the GPU's hash and its copy (another stream wrote them): stored under the hash of the bytes copied", uint64(v.launch_seq), len(torn))
		}
	}
	p.state.Snapshot = true
}

// holds reports whether the chunk store (or the flight recorder) has a chunk of this hash.
func (m *memoryCapture) holds(hash [16]byte) bool {
	if m.flight != nil {
		return m.flight.held[hash] != nil
	}
	return m.store.Has(hash)
}

// chunkNames hashes each chunk as stored. Hashing runs at about 3 GB/s
// per core, far below PCIe, so a job with many chunks is spread over the
// cores the writer may use.
func chunkNames(datas [][]byte) [][16]byte {
	names := make([][16]byte, len(datas))
	workers := min(runtime.GOMAXPROCS(0), len(datas)/parallelChunks)
	if workers < 2 {
		for t, d := range datas {
			if d != nil {
				names[t] = memhash.Chunk(d).Bytes()
			}
		}
		return names
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for t := w; t < len(datas); t += workers {
				if datas[t] != nil {
					names[t] = memhash.Chunk(datas[t]).Bytes()
				}
			}
		})
	}
	wg.Wait()
	return names
}

func (m *memoryCapture) point(key pointKey, njobs uint32) *pendingPoint {
	p := m.pending[key]
	if p == nil {
		p = &pendingPoint{
			state:    &pb.MemoryState{LaunchSeq: key.seq, Point: pb.MemoryState_Point(key.point), CorrelationId: key.call},
			parts:    map[uint32][]*pb.RegionState{},
			regions:  map[uint32][]regionKey{},
			allocIDs: map[uint32][]uint64{},
			chunks:   map[[16]byte][]byte{},
			njobs:    max(njobs, 1),
		}
		m.pending[key] = p
	}
	return p
}

// piece adds a piece of region base (chunks from first), a region larger than the staging
// ring takes at once, to the region's whole state.
func (p *pendingPoint) piece(base, first uint32, part *pb.RegionState, key regionKey) {
	whole := p.parts[base]
	if whole == nil {
		whole = []*pb.RegionState{{ChunkHashes: make([]byte, 16*int(kernels.Chunks(key.size)))}}
		p.parts[base], p.regions[base] = whole, []regionKey{key}
		p.pieced = append(p.pieced, base)
	}
	rs := whole[0]
	copy(rs.ChunkHashes[16*int(first):], part.ChunkHashes)
	rs.ChunksTransferred += part.ChunksTransferred
	rs.ChunksMissing += part.ChunksMissing
	rs.NanCount = addCounts(rs.NanCount, part.NanCount)
	rs.InfCount = addCounts(rs.InfCount, part.InfCount)
}

func addCounts(sum, more []uint64) []uint64 {
	for k, n := range more {
		if k == len(sum) {
			sum = append(sum, 0)
		}
		sum[k] += n
	}
	return sum
}

// finish emits a point once all its jobs are in.
func (m *memoryCapture) finish(r *recorder, key pointKey, p *pendingPoint) {
	if p.received < p.njobs {
		return
	}
	delete(m.pending, key)
	s := p.state
	if s.Lost {
		s.Regions = nil
		s.Snapshot = false
		switch s.Point {
		case pb.MemoryState_DIGEST:
		case pb.MemoryState_COPY:
			s.CopyRegions = p.allocations()
			m.stats.CopyStatesLost++
		default:
			m.stats.MemoryStatesLost++
		}
		m.emit(r, s)
		return
	}
	for _, b := range p.pieced {
		rs := p.parts[b][0]
		region := memhash.RegionOfEncoded(rs.ChunkHashes, p.regions[b][0].size).Bytes()
		rs.Hash = region[:]
	}
	bases := make([]uint32, 0, len(p.parts))
	for b := range p.parts {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	var keys []regionKey
	for _, b := range bases {
		s.Regions = append(s.Regions, p.parts[b]...)
		keys = append(keys, p.regions[b]...)
	}
	switch s.Point {
	case pb.MemoryState_DIGEST:
		s.DigestRegions = p.allocations()
		m.emit(r, s)
		return
	case pb.MemoryState_COPY:
		s.CopyRegions = p.allocations()
		m.stats.CopyStates++
	default:
		m.stats.MemoryStates++
		if s.Snapshot {
			m.stats.Snapshots++
		}
	}
	if m.flight != nil && s.Snapshot {
		m.flight.add(r, m, s, keys, p.chunks)
		return
	}
	m.emit(r, s)
}

// allocations are the regions of a digest's or a copy's point, as Regions of its allocations,
// in region order.
func (p *pendingPoint) allocations() []*pb.Region {
	var out []*pb.Region
	for _, b := range slices.Sorted(maps.Keys(p.regions)) {
		for i, k := range p.regions[b] {
			out = append(out, &pb.Region{Address: k.addr, Size: k.size, AllocationId: p.allocIDs[b][i]})
		}
	}
	return out
}

// emit adds a finished state to the batch: a launch's to memory, a step digest to digests, a
// copy's to copy_states.
func (m *memoryCapture) emit(r *recorder, s *pb.MemoryState) {
	switch s.Point {
	case pb.MemoryState_DIGEST:
		r.batch.Digests = append(r.batch.Digests, s)
	case pb.MemoryState_COPY:
		r.batch.CopyStates = append(r.batch.CopyStates, s)
	default:
		r.batch.Memory = append(r.batch.Memory, s)
	}
	r.addedState(s)
}

// lost records a job the C side gave up on (drop-oldest, exit), or a copy state it could not
// take; raw is the whole record, whose tail names a copy's regions.
func (m *memoryCapture) lost(r *recorder, rec *C.gp_memlost_rec, raw []byte) {
	key := pointKey{uint64(rec.launch_seq), uint32(rec.point), uint32(rec.call)}
	p := m.point(key, uint32(rec.njobs))
	p.received++
	if rec.point == C.GP_POINT_COPY {
		n := int(rec.nregions)
		if regs := regions(tail(raw, unsafe.Sizeof(*rec), n*int(unsafe.Sizeof(C.gp_region_rec{}))), n, 0); regs != nil {
			keys, ids := make([]regionKey, n), make([]uint64, n)
			for i, g := range regs {
				keys[i], ids[i] = regionKey{g.Address, g.Size}, g.AllocationId
			}
			p.regions[uint32(rec.region_base)], p.allocIDs[uint32(rec.region_base)] = keys, ids
		}
	}
	p.state.Lost = true
	p.state.LostReason = cString(rec.reason[:])
	m.finish(r, key, p)
}

func (m *memoryCapture) stop(r *recorder, reason string) {
	if m.stats.MemoryStopped != "" {
		return
	}
	m.stats.MemoryStopped = reason
	r.releaseDiskReserve()  // the chunk store's trouble is most often a full disk
	cs := C.CString(reason) // the C side logs it
	C.gp_mem_stop(cs)
	C.free(unsafe.Pointer(cs))
}

// finishAll waits for the GPU to finish what was enqueued (bounded), then
// reports whatever never completed as lost, dumps the flight recorder and
// closes the chunk store.
func (m *memoryCapture) finishAll(r *recorder, reason string) {
	deadline := time.Now().Add(exitWait)
	for C.gp_mem_outstanding() > 0 && time.Now().Before(deadline) {
		m.drain(r)
		if C.gp_mem_outstanding() > 0 {
			time.Sleep(time.Millisecond)
		}
	}
	m.drain(r)
	if n := C.gp_mem_outstanding(); n > 0 {
		cs := C.CString("not finished by the GPU when the process ended")
		C.gp_mem_flush_lost(cs)
		C.free(unsafe.Pointer(cs))
		r.logf("warn", "%d memory jobs never finished on the GPU (a fault, or the process ended first)", n)
	}
	r.drain()
	m.abandonPending(r)
	if sel := r.cfg.Memory; sel.Mode == recording.MemorySnapshot && m.snapshotSelected == 0 && (sel.SnapshotKernels != "" || sel.SnapshotLaunches != "") {
		r.logf("warn", "no launch matched the snapshot selection (--snapshot-kernels %q, --snapshot-launches %q): nothing was snapshotted", sel.SnapshotKernels, sel.SnapshotLaunches)
	}
	if m.flight != nil {
		m.flight.dump(r, m, reason)
	}
	if m.store != nil {
		if err := m.store.Close(); err != nil {
			m.stop(r, fmt.Sprintf("chunk store: %v", err))
		}
	}
}

// abandonPending records as lost the points some of whose jobs were never enqueued: a step
// digest of more allocations than one job holds whose later part found no room in the rings
// (the C side counts it in digests_skipped), or a launch's regions likewise. Once every job
// has come back, nothing else can complete them, and a point left pending would be lost
// without a word.
func (m *memoryCapture) abandonPending(r *recorder) {
	keys := make([]pointKey, 0, len(m.pending))
	for k := range m.pending {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].seq < keys[j].seq || keys[i].seq == keys[j].seq && keys[i].point < keys[j].point
	})
	for _, k := range keys {
		p := m.pending[k]
		if !p.state.Lost {
			p.state.Lost = true
			p.state.LostReason = fmt.Sprintf("only %d of its %d memory jobs were enqueued: no room for the rest", p.received, p.njobs)
		}
		p.received = p.njobs
		m.finish(r, k, p)
	}
}

// fill adds the memory counters to a frame's stats.
func (m *memoryCapture) fill(s *pb.Stats) {
	s.MemoryStates = m.stats.MemoryStates
	s.MemoryStatesLost = m.stats.MemoryStatesLost
	s.Snapshots = m.stats.Snapshots
	s.ChunksTotal = m.stats.ChunksTotal
	s.ChunksTransferred = m.stats.ChunksTransferred
	s.FlightDumps = m.stats.FlightDumps
	s.RegionsCarriedProved = m.stats.RegionsCarriedProved
	s.RegionsCarriedLearned = m.stats.RegionsCarriedLearned
	s.RegionsCarriedUnknown = m.stats.RegionsCarriedUnknown
	s.BytesCarried = m.stats.BytesCarried
	s.WriteSetAudits = m.stats.WriteSetAudits
	s.WriteSetMisses = m.stats.WriteSetMisses
	s.CopyStates = m.stats.CopyStates
	s.CopyStatesLost = m.stats.CopyStatesLost
	if m.stats.MemoryStopped == "" { // stopped by the C side (the GPU stopped finishing jobs)
		m.stats.MemoryStopped = C.GoString(C.gp_mem_stop_reason())
	}
	s.MemoryStopped = m.stats.MemoryStopped
	if m.store != nil {
		st := m.store.Stats()
		s.ChunksStored = uint64(st.Chunks)
		s.ChunkBytesStored = uint64(st.StoredBytes)
	}
}

// flightRecorder keeps the snapshots of the last n launches in memory and
// writes them only when asked (exit, SIGUSR2, a CUDA error). Chunk bytes
// are shared and counted: a window snapshot's chunk may have crossed PCIe
// long before (the GPU copies only what changed), so the latest contents
// of every snapshotted region stay held too.
type flightRecorder struct {
	n      int
	window []*flightEntry
	held   map[[16]byte]*heldChunk
	latest map[regionKey][][16]byte
}

type flightEntry struct {
	state  *pb.MemoryState
	dumped bool
}

type heldChunk struct {
	data []byte
	refs int
}

func newFlightRecorder(n int) *flightRecorder {
	return &flightRecorder{n: n, held: map[[16]byte]*heldChunk{}, latest: map[regionKey][][16]byte{}}
}

func chunkList(rs *pb.RegionState) [][16]byte {
	out := make([][16]byte, len(rs.ChunkHashes)/16)
	for i := range out {
		out[i] = le16(rs.ChunkHashes[16*i:])
	}
	return out
}

func (f *flightRecorder) ref(h [16]byte, data []byte) bool {
	c := f.held[h]
	if c == nil {
		if data == nil {
			return false
		}
		c = &heldChunk{data: data}
		f.held[h] = c
	}
	c.refs++
	return true
}

func (f *flightRecorder) unref(h [16]byte) {
	if c := f.held[h]; c != nil {
		if c.refs--; c.refs <= 0 {
			delete(f.held, h)
		}
	}
}

func (f *flightRecorder) add(r *recorder, m *memoryCapture, s *pb.MemoryState, keys []regionKey, fresh map[[16]byte][]byte) {
	for i, rs := range s.Regions {
		hashes := chunkList(rs)
		for _, h := range hashes {
			if !f.ref(h, fresh[h]) {
				rs.ChunksMissing++
			}
		}
		if i < len(keys) { // the region's latest contents, which later deltas build on
			for _, h := range hashes {
				f.ref(h, fresh[h])
			}
			for _, h := range f.latest[keys[i]] {
				f.unref(h)
			}
			f.latest[keys[i]] = hashes
		}
	}
	f.window = append(f.window, &flightEntry{state: s})
	for f.launches() > f.n {
		e := f.window[0]
		f.window = f.window[1:]
		for _, rs := range e.state.Regions {
			for _, h := range chunkList(rs) {
				f.unref(h)
			}
		}
		if !e.dumped { // its hashes stay in the recording; its bytes go
			e.state.Snapshot = false
			m.emit(r, e.state)
		}
	}
}

func (f *flightRecorder) launches() int {
	seen := map[uint64]bool{}
	for _, e := range f.window {
		seen[e.state.LaunchSeq] = true
	}
	return len(seen)
}

// dump writes every snapshot in the window not written yet.
func (f *flightRecorder) dump(r *recorder, m *memoryCapture, reason string) {
	n := 0
	for _, e := range f.window {
		if e.dumped {
			continue
		}
		for _, rs := range e.state.Regions {
			for _, h := range chunkList(rs) {
				if c := f.held[h]; c != nil {
					if err := m.store.Put(h, c.data); err != nil {
						m.stop(r, fmt.Sprintf("chunk store: %v", err))
					}
				}
			}
		}
		e.dumped = true
		m.emit(r, e.state)
		n++
	}
	if n == 0 {
		return
	}
	m.stats.FlightDumps++
	r.logf("info", "flight recorder: wrote the snapshots of the last %d launch points (%s)", n, reason)
	if err := m.store.Flush(); err != nil {
		m.stop(r, fmt.Sprintf("chunk store: %v", err))
	}
}

// watchDumpSignal dumps the flight recorder on every SIGUSR2.
func (r *recorder) watchDumpSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR2)
	go func() {
		defer func() { _ = recover() }()
		for range ch {
			r.dumpFlightRecorder("SIGUSR2")
		}
	}()
}

// dumpFlightRecorder writes the window now, with everything the GPU has
// finished so far.
func (r *recorder) dumpFlightRecorder(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.mem == nil || r.mem.flight == nil {
		return
	}
	r.drain()
	r.mem.drain(r)
	r.mem.flight.dump(r, r.mem, reason)
	r.writeFrame()
}
