package recording

import (
	"cmp"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// HashBytes is the size of a gpurr-h128 hash (docs/hash.md).
const HashBytes = 16

// Memory capture modes (gpurr record --memory), as MemoryConfig.mode holds them. A process
// recorded without memory capture has no MemoryConfig: its mode reads "", never MemoryOff.
const (
	MemoryOff      = "off"      // no memory capture
	MemoryHash     = "hash"     // a hash of every region after every launch
	MemorySnapshot = "snapshot" // the bytes of the selected launches' regions, before and after them
	MemoryDigest   = "digest"   // a hash of the program's memory at training step boundaries only
)

// Allocation.owner values (format 1.12): the libraries whose own memory (communication
// buffers, flags, FIFOs) differs from run to run by design.
const (
	OwnerNCCL    = "nccl"
	OwnerNVSHMEM = "nvshmem"
	OwnerUCX     = "ucx"
)

// indexMemory indexes the records of memory capture: states by launch,
// allocations by id.
func (l *Links) indexMemory(d *Data) {
	l.memory = make(map[uint64][]*pb.MemoryState)
	for _, s := range d.Memory {
		l.memory[s.GetLaunchSeq()] = append(l.memory[s.GetLaunchSeq()], s)
	}
	for _, states := range l.memory {
		// The GPU finishes BEFORE ahead of AFTER, but the two can land in
		// different frames; readers want them in stream order.
		slices.SortStableFunc(states, func(a, b *pb.MemoryState) int { return cmp.Compare(a.GetPoint(), b.GetPoint()) })
	}
	l.allocs = make(map[uint64]*pb.Allocation)
	l.frees = make(map[uint64]*pb.Allocation)
	for _, a := range d.Allocations {
		if a.GetFreed() {
			l.frees[a.GetId()] = a
		} else {
			l.allocs[a.GetId()] = a
		}
	}
}

// MemoryFor returns the memory states recorded for the launch with sequence
// number seq, BEFORE ahead of AFTER: one AFTER state in hash mode; BEFORE
// and AFTER for a launch snapshot mode selected. nil when there are none:
// memory capture was off or skipped for the launch (Launch.memory says
// which), or the recording ended before the GPU finished them.
func (l *Links) MemoryFor(seq uint64) []*pb.MemoryState { return l.memory[seq] }

// StateRegion returns the launch region that s.regions[i] describes (a
// memory state's regions are in its launch's Launch.regions order), or nil
// when the launch is not in the recording or has no region i.
func (l *Links) StateRegion(s *pb.MemoryState, i int) *pb.Region {
	regions := l.launchBySeq[s.GetLaunchSeq()].GetRegions()
	if i < 0 || i >= len(regions) {
		return nil
	}
	return regions[i]
}

// Allocation returns the record that allocated id (Region.allocation_id,
// Allocation.id), or nil when the recording does not hold it.
func (l *Links) Allocation(id uint64) *pb.Allocation { return l.allocs[id] }

// Freed returns the record that freed allocation id, or nil when it was
// not freed while the process was recorded.
func (l *Links) Freed(id uint64) *pb.Allocation { return l.frees[id] }

// ChunkHashes splits a region state's chunk hashes into one 16-byte hash
// per chunk, chunk 0 first; chunk i covers bytes [i·chunk_bytes,
// (i+1)·chunk_bytes) of the region (MemoryConfig.chunk_bytes). The slices
// share the record's bytes. Bytes short of a whole hash at the end (a
// damaged record) are left out.
func ChunkHashes(rs *pb.RegionState) [][]byte {
	b := rs.GetChunkHashes()
	out := make([][]byte, 0, len(b)/HashBytes)
	for off := 0; off+HashBytes <= len(b); off += HashBytes {
		out = append(out, b[off:off+HashBytes:off+HashBytes])
	}
	return out
}

// HashText writes a hash as gpurr prints it: lower-case hex, 32 digits for
// a gpurr-h128 hash (docs/hash.md, "Encoding"); "" when there is none.
func HashText(h []byte) string { return hex.EncodeToString(h) }

// EnumText writes an enum value of the format as gpurr prints it: its name
// in lower case (MemoryPlan.SKIPPED_CAPTURE is "skipped_capture",
// MemoryState.AFTER "after"); "" for the unspecified zero value, and the
// number for a value added by a newer format than this reader knows.
func EnumText(e protoreflect.Enum) string {
	if e.Number() == 0 {
		return ""
	}
	v := e.Descriptor().Values().ByNumber(e.Number())
	if v == nil {
		return strconv.Itoa(int(e.Number()))
	}
	return strings.ToLower(string(v.Name()))
}

// CarriedText writes RegionState.carried (format 1.11) as gpurr prints it: "" for a region
// hashed after its launch; "proved" or "learned" for one whose state was carried from an
// earlier launch, not hashed, because the kernel's PTX proves it does not write the region, or
// its earlier launches never did; the number for a value added by a newer format.
func CarriedText(c pb.RegionState_Carried) string {
	switch c {
	case pb.RegionState_NOT_CARRIED:
		return ""
	case pb.RegionState_PROVED_READ_ONLY:
		return "proved"
	case pb.RegionState_LEARNED_READ_ONLY:
		return "learned"
	}
	return strconv.Itoa(int(c))
}

// UnknownRegions counts the regions of s whose state is unknown (RegionState.unknown, format
// 1.11): carried from a launch whose state was lost, they have no hash. A reader treats such a
// region as it treats a lost state: neither equal to nor different from any other.
func UnknownRegions(s *pb.MemoryState) int {
	n := 0
	for _, rs := range s.GetRegions() {
		if rs.GetUnknown() {
			n++
		}
	}
	return n
}
