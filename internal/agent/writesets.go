package agent

/*
#include <stdlib.h>
#include "memcap.h"
*/
import "C"

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sync"
	"unsafe"

	"github.com/gpurr/gpurr/internal/ptx"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// moduleWriteSets reads a module's PTX and proves, kernel by kernel, which parameter words no
// store goes through (internal/ptx): the writer marks those ParamInfos proved_read_only, and
// hash mode carries the regions only such words point into. Nil when the PTX does not parse:
// nothing is proved.
func moduleWriteSets(text []byte) map[string]*ptx.WriteSet {
	m, err := ptx.Parse(text)
	if err != nil {
		return nil
	}
	out := map[string]*ptx.WriteSet{}
	sets := m.WriteSets()
	for i := range sets {
		out[sets[i].Kernel] = &sets[i]
	}
	return out
}

// loadedWriteSets is what the PTX of the modules the program loaded proves, by kernel name (the
// most recent module defining a name wins, as the driver's lookups by name do). It is filled on
// the program's thread as each module loads and read at each kernel's first launch, so that
// launch already knows its write set: a kernel that stores through loaded pointers must end
// carries from its first launch on, not from when the writer gets to it. byDigest keeps each
// module's PTX and write sets until the writer takes them with the module's record, so the
// writer does not find and analyse them again.
var loadedWriteSets struct {
	sync.Mutex
	on       bool
	byName   map[string]*ptx.WriteSet
	byDigest map[string]analysedModule
}

// analysedModule is a module's PTX (Triton's cache) and what it proves.
type analysedModule struct {
	ptx  []byte
	sets map[string]*ptx.WriteSet
}

func startLoadedWriteSets() {
	loadedWriteSets.Lock()
	defer loadedWriteSets.Unlock()
	loadedWriteSets.on = true
	loadedWriteSets.byName = map[string]*ptx.WriteSet{}
	loadedWriteSets.byDigest = map[string]analysedModule{}
}

// gpurrModuleWriteSets is called on the program's thread as a module loads (hash mode with
// write sets): Triton's cache may hold the PTX of its cubin.
//
//export gpurrModuleWriteSets
func gpurrModuleWriteSets(image unsafe.Pointer, size C.size_t) {
	defer func() { _ = recover() }()
	if !loadedWriteSets.on || image == nil || size == 0 {
		return
	}
	if !programTritonHoldsAny() { // no Triton kernel compiled anywhere yet: not worth reading the image (cuBLAS's are megabytes)
		return
	}
	img := C.GoBytes(image, C.int(size))
	names := moduleFunctions(img)
	if len(names) == 0 {
		return
	}
	sum := sha256.Sum256(img)
	digest := hex.EncodeToString(sum[:])
	var a analysedModule
	if a.ptx = programTritonPTX(digest, names); a.ptx != nil {
		a.sets = moduleWriteSets(a.ptx)
	}
	loadedWriteSets.Lock()
	defer loadedWriteSets.Unlock()
	if a.ptx != nil {
		loadedWriteSets.byDigest[digest] = a
	}
	for _, n := range names {
		if ws := a.sets[n]; ws != nil {
			loadedWriteSets.byName[n] = ws
		} else {
			delete(loadedWriteSets.byName, n) // a newer module without PTX defines it: nothing known
		}
	}
}

// takeLoadedModule hands the writer what the program's thread found for the module with this
// digest, and forgets it; ok is false when it found nothing (write sets off, or no PTX).
func takeLoadedModule(digest string) (a analysedModule, ok bool) {
	loadedWriteSets.Lock()
	defer loadedWriteSets.Unlock()
	a, ok = loadedWriteSets.byDigest[digest]
	delete(loadedWriteSets.byDigest, digest)
	return a, ok
}

// loadedWriteSet is what the latest loaded module defining name proves, nil when nothing.
func loadedWriteSet(name string) *ptx.WriteSet {
	loadedWriteSets.Lock()
	defer loadedWriteSets.Unlock()
	return loadedWriteSets.byName[name]
}

// gpurrKernelReadOnly is called at a kernel's first launch, on the program's thread: what its
// PTX proves of its parameter words, for the agent to keep (malloc'd), or NULL.
//
//export gpurrKernelReadOnly
func gpurrKernelReadOnly(name *C.char, paramBytes C.uint32_t) (ro *C.gp_readonly) {
	defer func() {
		if recover() != nil {
			ro = nil
		}
	}()
	ws := loadedWriteSet(C.GoString(name))
	if ws == nil {
		return nil
	}
	return newReadOnly(provedWords(uint32(paramBytes), ws))
}

// kernelWords is what the writer knows of one kernel's parameter words
// (by 8-byte word index): proved read-only from its PTX, learned read-only
// from its launches, and the counts learning goes by.
type kernelWords struct {
	proved, learned []uint64 // bit sets
	anywhere        bool     // its PTX stores through pointers loaded from memory
	unchanged       map[uint32]uint32
	changed         map[uint32]uint32
}

func (k *kernelWords) has(set []uint64, w uint32) bool {
	return int(w/64) < len(set) && set[w/64]&(1<<(w%64)) != 0
}

// kernel notes a kernel as its description arrives: what its PTX proves,
// published to the agent at once so its next launches carry.
func (m *memoryCapture) kernel(id uint64, name string, paramBytes uint32, ws *ptx.WriteSet) {
	if m.kernels == nil {
		return
	}
	// The agent took loadedWriteSet's at the kernel's first launch; only the writer's own
	// finding (the module's PTX reached Triton's cache after it loaded) is news to it.
	fromWriter := false
	if loaded := loadedWriteSet(name); loaded != nil {
		ws = loaded
	} else {
		fromWriter = ws != nil
	}
	k := provedWords(paramBytes, ws)
	k.unchanged, k.changed = map[uint32]uint32{}, map[uint32]uint32{}
	m.kernels[id] = k
	if fromWriter {
		publishWords(id, k)
	}
}

// provedWords is what ws proves of a kernel's parameter words (none when ws is nil). A
// parameter buffer's layout may be unknown (launches that pass it packed): the bit sets then
// grow as learning meets words.
func provedWords(paramBytes uint32, ws *ptx.WriteSet) *kernelWords {
	words := (paramBytes + 7) / 8
	n64 := (words + 63) / 64
	k := &kernelWords{proved: make([]uint64, n64), learned: make([]uint64, n64)}
	if ws == nil {
		return k
	}
	k.anywhere = ws.Any
	for w := range words {
		if !ws.Any && !ws.MayWriteAt(int(8*w), 8) {
			k.proved[w/64] |= 1 << (w % 64)
		}
	}
	return k
}

// grow makes room for word w in the bit sets.
func (k *kernelWords) grow(w uint32) {
	for int(w/64) >= len(k.proved) {
		k.proved = append(k.proved, 0)
		k.learned = append(k.learned, 0)
	}
}

// newReadOnly lays k out as a gp_readonly (malloc'd: the agent keeps it).
func newReadOnly(k *kernelWords) *C.gp_readonly {
	n64 := len(k.proved)
	size := C.size_t(unsafe.Sizeof(C.gp_readonly{})) + C.size_t(16*n64)
	ro := (*C.gp_readonly)(C.malloc(size))
	ro.nwords = C.uint32_t(64 * n64)
	ro.n64 = C.uint32_t(n64)
	ro.writes_anywhere = 0
	if k.anywhere {
		ro.writes_anywhere = 1
	}
	bits := unsafe.Slice((*uint64)(unsafe.Add(unsafe.Pointer(ro), unsafe.Sizeof(C.gp_readonly{}))), 2*n64)
	copy(bits, k.proved)
	copy(bits[n64:], k.learned)
	return ro
}

// publishWords hands the agent a new gp_readonly for the kernel. The agent
// keeps every one it was given (a launch may be reading the old one).
func publishWords(id uint64, k *kernelWords) {
	C.gp_kernel_readonly(C.uint64_t(id), newReadOnly(k))
}

// carried fills region i of a job from the state it carries: that of the
// job the agent named, if that job's results arrived; unknown otherwise.
func (m *memoryCapture) carried(v *C.gp_memjob_view, i int) *pb.RegionState {
	s := &pb.RegionState{Carried: pb.RegionState_PROVED_READ_ONLY}
	if v.carry[i] == C.GP_CARRY_LEARNED {
		s.Carried = pb.RegionState_LEARNED_READ_ONLY
		m.stats.RegionsCarriedLearned++
	} else {
		m.stats.RegionsCarriedProved++
	}
	m.stats.BytesCarried += uint64(v.region_size[i])
	prev, ok := m.last[uint64(v.alloc_id[i])]
	if !ok || prev.job != uint64(v.prev_job[i]) {
		s.Unknown = true
		m.stats.RegionsCarriedUnknown++
		return s
	}
	// The chunk hashes stay with the state carried from: repeating them would double what the
	// writer writes for learned sets (16 bytes per 64 KiB carried, about half of a step's).
	s.CarriedFrom = prev.launch
	s.Hash = prev.state.Hash
	s.NanCount, s.InfCount = prev.state.NanCount, prev.state.InfCount
	return s
}

func (m *memoryCapture) freed(id uint64) {
	if m.last != nil {
		m.freedNow = append(m.freedNow, id)
	}
}

// forgetFreed drops the states of allocations freed a frame ago (frames
// are about 100 ms apart: jobs enqueued before the free are long done; a
// later one carrying from it says unknown).
func (m *memoryCapture) forgetFreed() {
	for _, id := range m.freedBefore {
		delete(m.last, id)
	}
	m.freedBefore, m.freedNow = m.freedNow, m.freedBefore[:0]
}

// learn compares each hashed region of a job with its state before the
// launch (where the agent named it and it arrived): a region no launch of
// the kernel changes makes the words pointing into it learned read-only;
// a learned region that changed (an audit found it) is a miss.
func (m *memoryCapture) learn(r *recorder, v *C.gp_memjob_view, states []*pb.RegionState) {
	if m.writeSets != "learned" || v.npointers > C.GP_JOB_POINTERS {
		return
	}
	k := m.kernels[uint64(v.kernel_id)]
	if k == nil || k.anywhere {
		return
	}
	words := map[uint32][]uint32{} // region -> the words pointing into it
	for _, p := range v.pointers[:v.npointers] {
		if p.offset%8 == 0 {
			words[uint32(p.region)] = append(words[uint32(p.region)], uint32(p.offset)/8)
		}
	}
	publish := false
	var newly []uint32
	for ri, ws := range words {
		if v.carry[ri] != C.GP_CARRY_NONE {
			continue
		}
		prev, ok := m.last[uint64(v.alloc_id[ri])]
		if v.alloc_id[ri] == 0 || !ok || prev.job != uint64(v.prev_job[ri]) {
			continue // its state before the launch is not known
		}
		changed := !bytes.Equal(prev.state.Hash, states[ri].Hash)
		trusted := true // every word into it proved or learned: it was meant to be carried
		for _, w := range ws {
			if !k.has(k.proved, w) && !k.has(k.learned, w) {
				trusted = false
			}
		}
		for _, w := range ws {
			if k.has(k.proved, w) {
				continue
			}
			if !changed {
				k.unchanged[w]++
				if !k.has(k.learned, w) && k.changed[w] == 0 && k.unchanged[w] >= learnAfter {
					k.grow(w)
					k.learned[w/64] |= 1 << (w % 64)
					publish = true
					newly = append(newly, 8*w)
				}
				continue
			}
			if !k.has(k.learned, w) {
				k.changed[w]++
			} else if trusted {
				k.learned[w/64] &^= 1 << (w % 64)
				k.changed[w]++
				publish = true
			}
		}
		if changed && trusted {
			miss := &pb.WriteSetMiss{KernelId: uint64(v.kernel_id), AuditSeq: uint64(v.launch_seq),
				SinceSeq: prev.launch, AllocationId: uint64(v.alloc_id[ri])}
			for _, w := range ws {
				miss.ParamOffsets = append(miss.ParamOffsets, 8*w)
			}
			m.stats.WriteSetMisses++
			r.batch.WriteSetMisses = append(r.batch.WriteSetMisses, miss)
			r.logf("warn", "write sets: launch %d changed a region its kernel's earlier launches never wrote (words at %v, unchanged since launch %d): those words are hashed from now on, and diff says where its answer rests on them",
				v.launch_seq, miss.ParamOffsets, prev.launch)
		}
	}
	if publish {
		publishWords(uint64(v.kernel_id), k)
	}
	if len(newly) > 0 {
		slices.Sort(newly)
		r.logf("info", "write sets: kernel %d's parameter words at %v learned read-only (launch %d)", v.kernel_id, newly, v.launch_seq)
	}
}
