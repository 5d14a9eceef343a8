package testrec

import (
	"cmp"
	"encoding/binary"
	"regexp"
	"slices"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/chunkstore"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// memory is the program's device memory and the agent's memory capture
// over it (gpurr record --memory): the allocations a launch's parameters
// point into become its regions, and their hashes (and, in snapshot mode,
// contents) are taken in stream order around the launch. Contents are
// synthetic and versioned: a kernel bumps the version of the allocation its
// first pointer parameter names, which changes the allocation's first chunk
// only, so snapshots deduplicate the rest.
type memory struct {
	config   *pb.MemoryConfig
	snapshot *regexp.Regexp // kernels snapshot mode selects
	live     []*devAlloc    // by address
	nextID   uint64
	stored   map[[16]byte]bool        // chunk hashes in the chunk store
	chunks   map[chunkKey]memhash.Sum // chunk hashes computed so far
	bf16NaN  map[chunkKey][2]uint64   // NaN and Inf as bf16 of chunks counted so far (nan-scan)
	pending  []*pendingState          // enqueued on the GPU, not yet written
	stopped  bool
	// finite makes every chunk hold finite numbers as any float type,
	// where the usual contents hold NaN bit patterns here and there: for
	// a program whose first NaN must be one a kernel wrote (writeNaN).
	finite bool
	// What the next kernel to run writes besides a new version: NaN, or
	// a result that differs from another run's (one version more).
	writeNaN, skew bool
	// store, when set, is handed each chunk as it enters the chunk store: what writes the store.
	store func(hash [16]byte, data []byte)
}

type devAlloc struct {
	rec     *pb.Allocation
	version int
	nan     bool // a kernel wrote NaN into it
}

// chunkKey names a chunk's synthetic contents: the allocation, the chunk's
// index and length, and the allocation's version and NaN (first chunk
// only), and whether the contents are finite.
type chunkKey struct {
	id                 uint64
	chunk, length, ver int
	nan, finite        bool
}

// pendingState is a memory state with what the agent counts when it
// completes.
type pendingState struct {
	state         *pb.MemoryState
	launch        *pb.Launch // the launch it observes, for the hash kernel's time and stream
	bytes         uint64     // region bytes hashed
	chunksStored  uint64     // chunks new to the chunk store
	chunkBytesNew uint64
}

func newMemory(config *pb.MemoryConfig) *memory {
	return &memory{
		config:   config,
		snapshot: regexp.MustCompile(config.SnapshotKernels),
		nextID:   1,
		stored:   map[[16]byte]bool{},
		chunks:   map[chunkKey]memhash.Sum{},
		bf16NaN:  map[chunkKey][2]uint64{},
	}
}

// alloc makes an allocation live and returns its record.
func (p *program) alloc(kind pb.Allocation_Kind, address, size uint64) *pb.Allocation {
	m := p.mem
	a := &pb.Allocation{Id: m.nextID, Kind: kind, Address: address, Size: size, HostNs: p.tick(), Device: uint32(p.rank)}
	m.nextID++
	m.live = append(m.live, &devAlloc{rec: a})
	slices.SortFunc(m.live, func(x, y *devAlloc) int { return cmp.Compare(x.rec.Address, y.rec.Address) })
	p.stats.Allocations++
	return a
}

// free ends allocation id and returns the record of its free.
func (p *program) free(id uint64) *pb.Allocation {
	m := p.mem
	i := slices.IndexFunc(m.live, func(a *devAlloc) bool { return a.rec.Id == id })
	a := m.live[i].rec
	m.live = slices.Delete(m.live, i, i+1)
	p.stats.Allocations++
	return &pb.Allocation{Id: id, Kind: a.Kind, Address: a.Address, Size: a.Size, HostNs: p.tick(), Freed: true, Device: a.Device}
}

// holding returns the live allocation that holds address, or nil.
func (m *memory) holding(address uint64) *devAlloc {
	for _, a := range m.live {
		if address >= a.rec.Address && address < a.rec.Address+a.rec.Size {
			return a
		}
	}
	return nil
}

// regions finds what the agent finds: every 8-byte-aligned word of the
// parameter buffer that holds an address inside a live allocation makes
// that whole allocation a region, in the order of the first such word.
func (m *memory) regions(params []byte) ([]*pb.Region, []*devAlloc) {
	var regions []*pb.Region
	var allocs []*devAlloc
	for off := 0; off+8 <= len(params); off += 8 {
		a := m.holding(binary.LittleEndian.Uint64(params[off:]))
		if a == nil {
			continue
		}
		i := slices.Index(allocs, a)
		if i < 0 {
			i = len(allocs)
			allocs = append(allocs, a)
			regions = append(regions, &pb.Region{Address: a.rec.Address, Size: a.rec.Size, AllocationId: a.rec.Id})
		}
		regions[i].ParamOffsets = append(regions[i].ParamOffsets, uint32(off))
	}
	return regions, allocs
}

// run is the kernel of a launch running: it writes the allocation its
// first pointer parameter points into.
func (m *memory) run(params []byte) {
	for off := 0; off+8 <= len(params); off += 8 {
		if a := m.holding(binary.LittleEndian.Uint64(params[off:])); a != nil {
			a.version++
			if m.skew {
				a.version++
			}
			a.nan = a.nan || m.writeNaN
			m.writeNaN, m.skew = false, false
			return
		}
	}
}

// describeMemory adds the launch's regions and memory plan, and enqueues its
// memory states. A captured launch runs nothing, so it changes no memory.
func (p *program) describeMemory(l *pb.Launch, kernel string) {
	m := p.mem
	if m == nil {
		return
	}
	regions, allocs := m.regions(l.Params)
	l.Regions = regions
	plan := &pb.MemoryPlan{SnapshotSelected: m.config.Mode == recording.MemorySnapshot && m.snapshot.MatchString(kernel)}
	l.Memory = plan
	var size uint64
	for _, r := range regions {
		size += r.Size
	}
	switch {
	case len(regions) == 0:
		plan.Status = pb.MemoryPlan_SKIPPED_NO_REGIONS
		return
	case m.stopped:
		plan.Status = pb.MemoryPlan_SKIPPED_STOPPED
	case l.Captured:
		plan.Status = pb.MemoryPlan_SKIPPED_CAPTURE
	case plan.SnapshotSelected && size > m.config.StagingBytes:
		plan.Status = pb.MemoryPlan_SKIPPED_RING_TOO_SMALL
	case plan.SnapshotSelected:
		plan.Status = pb.MemoryPlan_SNAPSHOT
	default:
		plan.Status = pb.MemoryPlan_HASH
	}
	switch plan.Status {
	case pb.MemoryPlan_HASH:
		p.stats.MemoryLaunches++
		p.stats.MemoryHashKernels += p.stats.MemoryLaunches % 2 // as if --defer-hashes hashed two launches per kernel
		p.stats.SideBatches = p.stats.MemoryHashKernels         // ... beside the program
		p.stats.SideStreamWaits += p.stats.MemoryLaunches / 4 % 2 * (p.stats.MemoryLaunches % 2)
		m.run(l.Params)
		m.enqueue(l, pb.MemoryState_AFTER, allocs, false)
	case pb.MemoryPlan_SNAPSHOT:
		p.stats.MemoryLaunches++
		p.stats.StagingWaitNs += 420_000 // backpressure: the copies waited for staging space
		m.enqueue(l, pb.MemoryState_BEFORE, allocs, true)
		m.run(l.Params)
		m.enqueue(l, pb.MemoryState_AFTER, allocs, true)
	default:
		p.stats.MemorySkipped++
		if !l.Captured {
			m.run(l.Params)
		}
	}
}

// hashes returns an allocation's region hash and chunk hashes as they are
// now.
func (m *memory) hashes(a *devAlloc) (memhash.Sum, []memhash.Sum) {
	var sums []memhash.Sum
	for _, key := range m.chunkKeys(a) {
		sum, ok := m.chunks[key]
		if !ok {
			sum = memhash.Chunk(chunkContents(key))
			m.chunks[key] = sum
		}
		sums = append(sums, sum)
	}
	return memhash.Region(sums, a.rec.Size), sums
}

// chunkKeys names the chunks of an allocation as they are now: a write
// changes the first chunk (a new version).
func (m *memory) chunkKeys(a *devAlloc) []chunkKey {
	chunkBytes := uint64(m.config.ChunkBytes)
	var keys []chunkKey
	for c := uint64(0); c*chunkBytes < a.rec.Size; c++ {
		key := chunkKey{id: a.rec.Id, chunk: int(c), length: int(min(chunkBytes, a.rec.Size-c*chunkBytes)), finite: m.finite}
		if c == 0 {
			key.ver, key.nan = a.version, a.nan
		}
		keys = append(keys, key)
	}
	return keys
}

// countBF16 counts an allocation's NaN and Inf as bf16, as the agent's
// --nan-scan bf16 does on the GPU: an all-ones exponent with a non-zero
// mantissa is NaN, with a zero one Inf.
func (m *memory) countBF16(a *devAlloc) (nan, inf uint64) {
	for _, key := range m.chunkKeys(a) {
		n, ok := m.bf16NaN[key]
		if !ok {
			b := chunkContents(key)
			for i := 0; i+1 < len(b); i += 2 {
				switch v := uint16(b[i]) | uint16(b[i+1]&0x7f)<<8; {
				case v > 0x7f80:
					n[0]++
				case v == 0x7f80:
					n[1]++
				}
			}
			m.bf16NaN[key] = n
		}
		nan, inf = nan+n[0], inf+n[1]
	}
	return nan, inf
}

// chunkContents is the synthetic bytes of one chunk of an allocation.
// Finite contents keep the top two bits of every byte clear, so no f32,
// f16 or bf16 exponent is all ones; a NaN chunk starts with an f32 NaN,
// which as bf16 is a zero and a NaN.
func chunkContents(k chunkKey) []byte {
	b := make([]byte, k.length)
	for i := range b {
		b[i] = byte(i*7 + int(k.id)*31 + k.chunk*13 + k.ver*101)
		if k.finite {
			b[i] &= 0x3f
		}
	}
	if k.nan {
		copy(b, []byte{0x00, 0x00, 0xc0, 0x7f})
	}
	return b
}

func (m *memory) enqueue(l *pb.Launch, point pb.MemoryState_Point, allocs []*devAlloc, snapshot bool) {
	ps := &pendingState{launch: l, state: &pb.MemoryState{LaunchSeq: l.Seq, Point: point, Snapshot: snapshot}}
	for _, a := range allocs {
		region, chunks := m.hashes(a)
		keys := m.chunkKeys(a)
		h := region.Bytes()
		rs := &pb.RegionState{Hash: h[:]}
		for i, c := range chunks {
			cb := c.Bytes()
			rs.ChunkHashes = append(rs.ChunkHashes, cb[:]...)
			if !snapshot || m.stored[cb] {
				continue
			}
			// Only chunks the store lacks cross PCIe.
			m.stored[cb] = true
			if m.store != nil {
				m.store(cb, chunkContents(keys[i]))
			}
			rs.ChunksTransferred++
			ps.chunksStored++
			ps.chunkBytesNew += min(uint64(m.config.ChunkBytes), a.rec.Size-uint64(i)*uint64(m.config.ChunkBytes))
		}
		if point == pb.MemoryState_AFTER && len(m.config.NanScan) > 0 {
			nan, inf := m.countBF16(a)
			rs.NanCount, rs.InfCount = []uint64{nan}, []uint64{inf}
		}
		ps.state.Regions = append(ps.state.Regions, rs)
		ps.bytes += a.rec.Size
	}
	m.pending = append(m.pending, ps)
}

// stop is memory capture giving up: states still on the GPU are lost, and
// later launches are skipped.
func (p *program) stopMemory(why string) {
	m := p.mem
	m.stopped = true
	p.stats.MemoryStopped = why
	for _, ps := range m.pending {
		ps.state.Regions = nil
		ps.state.Lost = true
		ps.state.LostReason = "memory capture stopped before the GPU completed it"
	}
}

// completed returns the memory states the GPU finished since the last
// call, counting them as the agent does when it writes them, and the runs
// of gpurr's hash kernel that computed them.
func (p *program) completed() (out []*pb.MemoryState, own []*pb.KernelActivity) {
	m := p.mem
	if m == nil {
		return nil, nil
	}
	for _, ps := range m.pending {
		s := ps.state
		out = append(out, s)
		if s.Lost {
			p.stats.MemoryStatesLost++
			continue
		}
		p.stats.MemoryStates++
		p.stats.BytesHashed += ps.bytes
		gpuNS := ps.bytes / 2000 // about 2 TB/s
		p.stats.MemoryCaptureGpuNs += gpuNS
		// The hash kernel runs on the launch's stream, just before it
		// (BEFORE) or just after its kernel (AFTER).
		start := ps.launch.HostNs + queueNS - gpuNS - 200
		if s.Point == pb.MemoryState_AFTER {
			start = ps.launch.HostNs + queueNS + kernels[ps.launch.KernelId-1].gpuNS + uint64(p.rank)*100 + 200
		}
		own = append(own, &pb.KernelActivity{CorrelationId: 90_000 + uint32(len(own)), Device: ps.launch.Device, ContextUid: 1,
			StreamId: ps.launch.StreamId, StartNs: start, EndNs: start + gpuNS, Name: "gpurr_memcap",
			Grid: dim(uint32(len(s.Regions)), 1, 1), Block: dim(512, 1, 1)})
		if s.Snapshot {
			p.stats.Snapshots++
			for _, rs := range s.Regions {
				p.stats.ChunksTotal += uint64(len(rs.ChunkHashes) / 16)
				p.stats.ChunksTransferred += uint64(rs.ChunksTransferred)
			}
			p.stats.ChunksStored += ps.chunksStored
			p.stats.ChunkBytesStored += ps.chunkBytesNew / 3 // compressed
		}
	}
	m.pending = nil
	return out, own
}

// RegionState is the state the agent records of a region holding data:
// its hash and chunk hashes, and in snapshot mode (store not nil) its
// chunks put into the chunk store.
func RegionState(data []byte, store *chunkstore.Writer) (*pb.RegionState, error) {
	region, chunks := memhash.Hash(data)
	rh := region.Bytes()
	rs := &pb.RegionState{Hash: rh[:]}
	for k, c := range chunks {
		h := c.Bytes()
		rs.ChunkHashes = append(rs.ChunkHashes, h[:]...)
		if store != nil {
			lo := k * memhash.ChunkSize
			if err := store.Put(h, data[lo:min(lo+memhash.ChunkSize, len(data))]); err != nil {
				return nil, err
			}
		}
	}
	return rs, nil
}
