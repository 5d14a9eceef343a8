// Package nanscan finds the first kernel launch after which device memory
// holds NaN or Inf (gpurr nan), from the snapshots of a recording: launches
// in order, each region's chunks decoded as every requested dtype. A chunk
// is read and counted once however many snapshots share it.
//
// Counts are kept per dtype, since the same bytes can be a NaN as one type
// and an ordinary number as another: an int64 index tensor read as f32 may
// hold NaN bit patterns, bf16 data read as f32 rarely does.
package nanscan

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/gpurr/gpurr/chunkstore"
	"github.com/gpurr/gpurr/dtype"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Counts are the NaN and Inf elements found as one dtype.
type Counts struct {
	Type     string
	NaN, Inf uint64
	First    int64 // byte offset in the region of the first NaN or Inf, -1 when none
}

// Region is a region of the found launch with NaN or Inf in it.
type Region struct {
	Index  int
	Region *pb.Region
	Counts []Counts // one per requested dtype, in the order asked
	// Before: the region held NaN or Inf before the launch too (its
	// snapshot before it says so), so they came from outside a kernel: a
	// copy from the host, a memset, memory no kernel wrote.
	Before bool
}

// Finding is the first launch after which memory holds NaN or Inf.
type Finding struct {
	Launch    *pb.Launch
	Kernel    *pb.Kernel
	Callstack *pb.Callstack
	Regions   []Region
}

// Stats says how much was looked at.
type Stats struct {
	Launches   int // launches with a snapshot after them, scanned in order
	Chunks     int // distinct chunks decoded
	NoSnapshot int // launches with memory states but no snapshot after them
}

// Scan finds the first launch of p whose snapshot after it holds NaN or Inf
// as any of types (floating-point types only). nil when none does. It reads
// the recording twice, streamed: once to list the launches with snapshots
// (8 bytes each), then those launches in launch order until one holds NaN
// or Inf, so memory does not grow with the recording.
func Scan(p *recording.Process, types []*dtype.Type) (*Finding, Stats, error) {
	var st Stats
	for _, t := range types {
		if !t.IsFloat() {
			return nil, st, fmt.Errorf("%s has no NaN or Inf: want floating-point dtypes", t.Name)
		}
	}
	if p.Info.GetMemory().GetMode() != "snapshot" {
		return nil, st, fmt.Errorf("%s was recorded without snapshots: record with --memory snapshot", p.Dir)
	}
	// First pass: which launches have a snapshot after them (8 bytes each).
	var seqs []uint64
	_, err := p.Scan(func(b *pb.Batch) error {
		for _, s := range b.Memory {
			switch {
			case s.GetPoint() != pb.MemoryState_AFTER || s.GetLost():
			case s.GetSnapshot():
				seqs = append(seqs, s.GetLaunchSeq())
			default:
				st.NoSnapshot++
			}
		}
		return nil
	})
	if err != nil {
		return nil, st, err
	}
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	store, err := chunkstore.Open(p.Dir)
	if err != nil {
		return nil, st, err
	}
	defer store.Close()
	chunkBytes := int64(cmp.Or(p.Info.GetMemory().GetChunkBytes(), 65536))
	seen := map[[16]byte][]Counts{}
	var found *Finding
	// Second pass: those launches in launch order, each with its states,
	// until one holds NaN or Inf.
	_, err = p.Ordered(seqs, func(r *recording.LaunchRecord) error {
		s := r.After
		if !s.GetSnapshot() || s.GetLost() {
			return nil
		}
		st.Launches++
		var regions []Region
		for i, rs := range s.GetRegions() {
			total, err := regionCounts(store, rs, types, chunkBytes, seen, &st)
			if err != nil {
				return fmt.Errorf("launch %d region %d: %w", s.GetLaunchSeq(), i, err)
			}
			if hasNaNOrInf(total) {
				var reg *pb.Region
				if i < len(r.Launch.GetRegions()) {
					reg = r.Launch.GetRegions()[i]
				}
				regions = append(regions, Region{Index: i, Region: reg, Counts: total})
			}
		}
		if regions == nil {
			return nil
		}
		if b := r.Before; b.GetSnapshot() && !b.GetLost() {
			for ri := range regions {
				if i := regions[ri].Index; i < len(b.GetRegions()) {
					before, err := regionCounts(store, b.GetRegions()[i], types, chunkBytes, seen, &st)
					if err != nil {
						return err
					}
					regions[ri].Before = hasNaNOrInf(before)
				}
			}
		}
		found = &Finding{Launch: r.Launch, Kernel: r.Kernel, Callstack: r.Callstack, Regions: regions}
		return recording.ErrStop
	})
	if err != nil {
		return nil, st, err
	}
	return found, st, nil
}

// regionCounts counts a region state's NaN and Inf, reading each distinct
// chunk once (seen caches the counts by chunk hash).
func regionCounts(store *chunkstore.Reader, rs *pb.RegionState, types []*dtype.Type, chunkBytes int64, seen map[[16]byte][]Counts, st *Stats) ([]Counts, error) {
	var total []Counts
	for k, h := range recording.ChunkHashes(rs) {
		c, ok := seen[[16]byte(h)]
		if !ok {
			b, err := store.Get([16]byte(h))
			if err != nil {
				return nil, fmt.Errorf("chunk %d: %w", k, err)
			}
			c = count(b, types)
			seen[[16]byte(h)] = c
			st.Chunks++
		}
		total = add(total, c, int64(k)*chunkBytes)
	}
	return total, nil
}

func count(b []byte, types []*dtype.Type) []Counts {
	out := make([]Counts, len(types))
	for ti, t := range types {
		c := Counts{Type: t.Name, First: -1}
		for off := 0; off+t.Size <= len(b); off += t.Size {
			v := t.Value(b[off : off+t.Size])
			switch {
			case math.IsNaN(v):
				c.NaN++
			case math.IsInf(v, 0):
				c.Inf++
			default:
				continue
			}
			if c.First < 0 {
				c.First = int64(off)
			}
		}
		out[ti] = c
	}
	return out
}

// add sums a chunk's counts (at byte offset off of its region) into total.
func add(total, c []Counts, off int64) []Counts {
	if total == nil {
		total = make([]Counts, len(c))
		for i := range total {
			total[i] = Counts{Type: c[i].Type, First: -1}
		}
	}
	for i := range c {
		total[i].NaN += c[i].NaN
		total[i].Inf += c[i].Inf
		if total[i].First < 0 && c[i].First >= 0 {
			total[i].First = off + c[i].First
		}
	}
	return total
}

func hasNaNOrInf(cs []Counts) bool {
	for _, c := range cs {
		if c.NaN+c.Inf > 0 {
			return true
		}
	}
	return false
}
