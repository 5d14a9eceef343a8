package diff

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Step digests (format 1.12, gpurr record --memory digest): at the end of each training step
// the agent hashes the program's allocations (those the step's optimizer reached, or all).
// Two runs whose digests of a step agree agree on their parameters, gradients and optimizer
// state there, whatever their launches did in between; the first step whose digests differ
// is where they parted, to within a step (or --digest-every steps), at a cost low enough to
// leave on. gpurr bisect then hashes only that step's launches to find the launch.

// AllocKey names a program allocation the same way in every run of a program: the n-th
// allocation (from 0) of its size made by the same call (callstack) of the program's. Allocation
// ids and addresses are not: another thread's or a library's allocations shift them.
type AllocKey struct {
	Callstack uint64 `json:"callstack_id"`
	Size      uint64 `json:"size"`
	N         uint32 `json:"n"`
}

// DigestAlloc is one allocation of a step digest.
type DigestAlloc struct {
	ID      uint64   `json:"allocation_id"`
	Address uint64   `json:"address"`
	Key     AllocKey `json:"key"`
	Hash    [16]byte `json:"-"`
	// NaN and Inf count the elements that are NaN, and +-Inf, read as the first type the
	// digests counted (DigestRun.NanTypes), when Counted.
	NaN     uint64 `json:"nan,omitempty"`
	Inf     uint64 `json:"inf,omitempty"`
	Counted bool   `json:"-"`
}

// StepDigest is one step digest of a process.
type StepDigest struct {
	Step   uint32        `json:"step"` // the step that had just ended
	Seq    uint64        `json:"seq"`  // the launch call it was taken before: the next step's first
	Of     string        `json:"of"`   // "optimizer" or "all" (MemoryState.digest_of)
	Lost   bool          `json:"lost"` // enqueued but never completed: no hashes
	Allocs []DigestAlloc `json:"allocs,omitempty"`
}

// NonFinite is how many elements of the digest's allocations are NaN or Inf as the type counted.
func (d *StepDigest) NonFinite() uint64 {
	var n uint64
	for _, a := range d.Allocs {
		n += a.NaN + a.Inf
	}
	return n
}

// DigestRun is the step digests of one process, in step order.
type DigestRun struct {
	Process  *recording.Process
	Digests  []StepDigest
	Every    uint32   // MemoryConfig.digest_every: digests of every Nth step only (0, 1: every step)
	NanTypes []string // the types digests counted NaN and Inf as, first one kept (MemoryConfig.nan_scan)
	Complete bool     // the recording has its End record
	Skipped  uint64   // step boundaries whose digest the agent could not take (Stats.digests_skipped)
	Launches uint64   // launch calls recorded (Stats.launches)
	lines    map[uint64]string
	stacks   map[uint64]uint64 // allocation id -> its callstack
}

// ScanDigests reads a process's step digests in one pass over its recording, with what names
// their allocations: each program allocation's key and the line that made it.
func ScanDigests(p *recording.Process) (*DigestRun, error) {
	r := &DigestRun{Process: p, lines: map[uint64]string{}, stacks: map[uint64]uint64{}}
	keys := map[uint64]AllocKey{}    // program allocation id -> key
	counts := map[[2]uint64]uint32{} // (callstack, size) -> allocations made so far
	res, err := p.Scan(func(b *pb.Batch) error {
		if b.Process != nil {
			m := b.Process.GetMemory()
			r.Every, r.NanTypes = m.GetDigestEvery(), m.GetNanScan()
		}
		for _, c := range b.Callstacks {
			if line := recording.Line(c); line != "" {
				r.lines[c.GetId()] = line
			}
		}
		for _, a := range b.Allocations {
			if a.GetFreed() || a.GetOwner() != "" {
				continue
			}
			k := [2]uint64{a.GetCallstackId(), a.GetSize()}
			keys[a.GetId()] = AllocKey{Callstack: k[0], Size: k[1], N: counts[k]}
			counts[k]++
			r.stacks[a.GetId()] = a.GetCallstackId()
		}
		for _, st := range b.Digests { // its allocations were recorded before it was taken
			r.add(st, keys)
		}
		if b.Stats != nil {
			r.Skipped, r.Launches = b.Stats.GetDigestsSkipped(), b.Stats.GetLaunches()
		}
		if b.End != nil {
			r.Complete = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if res.Truncated {
		r.Complete = false
	}
	slices.SortStableFunc(r.Digests, func(x, y StepDigest) int { return cmp.Compare(x.Step, y.Step) })
	return r, nil
}

func (r *DigestRun) add(st *pb.MemoryState, keys map[uint64]AllocKey) {
	d := StepDigest{Step: st.GetStep(), Seq: st.GetLaunchSeq(), Of: st.GetDigestOf(), Lost: st.GetLost()}
	regions := st.GetDigestRegions()
	for i, rs := range st.GetRegions() {
		if i >= len(regions) {
			break
		}
		reg := regions[i]
		key, ok := keys[reg.GetAllocationId()]
		if !ok { // not an allocation record of the program's: named by its size alone
			key = AllocKey{Size: reg.GetSize()}
		}
		a := DigestAlloc{ID: reg.GetAllocationId(), Address: reg.GetAddress(), Key: key}
		copy(a.Hash[:], rs.GetHash())
		if len(rs.GetNanCount()) > 0 && len(rs.GetInfCount()) > 0 {
			a.NaN, a.Inf, a.Counted = rs.GetNanCount()[0], rs.GetInfCount()[0], true
		}
		d.Allocs = append(d.Allocs, a)
	}
	r.Digests = append(r.Digests, d)
}

// Line is the line of the program that made allocation id, "" when unknown.
func (r *DigestRun) Line(id uint64) string { return r.lines[r.stacks[id]] }

// Step returns the digest of step s, nil when the run has none.
func (r *DigestRun) Step(s uint32) *StepDigest {
	i, ok := slices.BinarySearchFunc(r.Digests, s, func(d StepDigest, s uint32) int { return cmp.Compare(d.Step, s) })
	if !ok {
		return nil
	}
	return &r.Digests[i]
}

// FirstNonFinite is the first digest that holds NaN or Inf, nil when none does.
func (r *DigestRun) FirstNonFinite() *StepDigest {
	for i := range r.Digests {
		if d := &r.Digests[i]; !d.Lost && d.NonFinite() > 0 {
			return d
		}
	}
	return nil
}

// Rise is a digest whose NaN and Inf count rose over the digest before it.
type Rise struct {
	Digest *StepDigest
	Prev   uint64 // the count in the digest before it
}

// NonFiniteRise is the first digest after step's whose NaN and Inf count is higher than the
// digest's before it, nil when none is.
func (r *DigestRun) NonFiniteRise(step uint32) *Rise {
	var prev uint64
	seen := false
	for i := range r.Digests {
		d := &r.Digests[i]
		if d.Lost {
			continue
		}
		if seen && d.Step > step && d.NonFinite() > prev {
			return &Rise{Digest: d, Prev: prev}
		}
		if d.Step >= step {
			seen = true
		}
		prev = d.NonFinite()
	}
	return nil
}

// DigestState is an allocation's state in a step digest.
type DigestState struct {
	State *pb.RegionState // its hash, and NaN counts as MemoryConfig.nan_scan's types
	Seq   uint64          // the launch call the digest was taken before
	Step  uint32
}

// LastDigest reads p's step digests taken before launch call seq and returns each program
// allocation's state in the last one that holds it, by allocation id, and whether there was
// any digest before seq: then an allocation it does not hold was made after it.
func LastDigest(p *recording.Process, seq uint64) (map[uint64]DigestState, bool, error) {
	out, any := map[uint64]DigestState{}, false
	_, err := p.Scan(func(b *pb.Batch) error {
		for _, st := range b.Digests {
			if st.GetLost() || st.GetLaunchSeq() > seq {
				continue
			}
			any = true
			regions := st.GetDigestRegions()
			for i, rs := range st.GetRegions() {
				if i >= len(regions) {
					break
				}
				id := regions[i].GetAllocationId()
				if prev, ok := out[id]; !ok || prev.Seq <= st.GetLaunchSeq() {
					out[id] = DigestState{State: rs, Seq: st.GetLaunchSeq(), Step: st.GetStep()}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", p.Name, err)
	}
	return out, any, nil
}

// AllocDiff is an allocation whose state differs between the runs' digests of a step.
type AllocDiff struct {
	A     DigestAlloc `json:"a"`
	B     DigestAlloc `json:"b"`
	Size  uint64      `json:"size"`
	Line  string      `json:"line,omitempty"` // where A's program made it
	Chunk int         `json:"first_chunk"`    // the first 64 KiB chunk that differs, -1 when not read (DigestChunks)
}

// DigestComparison is what two runs' digests say.
type DigestComparison struct {
	Compared int `json:"compared"` // steps digested, and not lost, on both sides
	// Agreed is the last step digested on both sides whose digests agree before First (or the
	// last of all when they agree); -1 when none.
	Agreed int `json:"last_agreed"`
	// First is the first step whose digests differ, nil when none does.
	First *StepDiff `json:"first,omitempty"`
	// OnlyA and OnlyB count the steps digested on one side only (a run that went through more
	// steps, or a digest that was lost or skipped).
	OnlyA int `json:"steps_only_a"`
	OnlyB int `json:"steps_only_b"`
}

// StepDiff is the first step whose digests differ.
type StepDiff struct {
	Step      uint32      `json:"step"`
	SeqA      uint64      `json:"seq_a"`
	SeqB      uint64      `json:"seq_b"`
	Matched   int         `json:"matched"`   // allocations in both digests
	Unmatched int         `json:"unmatched"` // allocations in one only (not compared)
	Allocs    []AllocDiff `json:"differ"`    // matched allocations that differ, largest first
	// AtEnd: the digests were taken as the runs ended (the last step's, which no next step's
	// first call took: SeqA and SeqB are one past their last launch calls).
	AtEnd bool `json:"at_end,omitempty"`
}

// CompareDigests compares two runs' digests step by step, each allocation with the one of the
// same key (AllocKey) in the other run.
func CompareDigests(a, b *DigestRun) *DigestComparison {
	c := &DigestComparison{Agreed: -1}
	i, j := 0, 0
	for i < len(a.Digests) || j < len(b.Digests) {
		switch {
		case j == len(b.Digests) || i < len(a.Digests) && a.Digests[i].Step < b.Digests[j].Step:
			c.OnlyA++
			i++
			continue
		case i == len(a.Digests) || b.Digests[j].Step < a.Digests[i].Step:
			c.OnlyB++
			j++
			continue
		}
		da, db := &a.Digests[i], &b.Digests[j]
		i, j = i+1, j+1
		if da.Lost || db.Lost {
			c.OnlyA += btoi(!da.Lost)
			c.OnlyB += btoi(!db.Lost)
			continue
		}
		c.Compared++
		if c.First != nil {
			continue
		}
		if d := compareStep(a, da, db); len(d.Allocs) > 0 {
			c.First = d
		} else {
			c.Agreed = int(da.Step)
		}
	}
	return c
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func compareStep(a *DigestRun, da, db *StepDigest) *StepDiff {
	d := &StepDiff{Step: da.Step, SeqA: da.Seq, SeqB: db.Seq, AtEnd: a.Launches > 0 && da.Seq > a.Launches}
	byKey := make(map[AllocKey]*DigestAlloc, len(db.Allocs))
	for k := range db.Allocs {
		byKey[db.Allocs[k].Key] = &db.Allocs[k]
	}
	for _, x := range da.Allocs {
		y := byKey[x.Key]
		if y == nil {
			d.Unmatched++
			continue
		}
		delete(byKey, x.Key)
		d.Matched++
		if x.Hash != y.Hash {
			d.Allocs = append(d.Allocs, AllocDiff{A: x, B: *y, Size: x.Key.Size, Line: a.Line(x.ID), Chunk: -1})
		}
	}
	d.Unmatched += len(byKey)
	slices.SortStableFunc(d.Allocs, func(x, y AllocDiff) int { return cmp.Compare(y.Size, x.Size) })
	return d
}

// FirstChunks reads, for the allocations of a step whose digests differ, the first 64 KiB
// chunk that differs: a second pass over each recording, for that step's digest alone.
func FirstChunks(a, b *recording.Process, d *StepDiff) error {
	ca, err := digestChunks(a, d.Step)
	if err != nil {
		return err
	}
	cb, err := digestChunks(b, d.Step)
	if err != nil {
		return err
	}
	for i := range d.Allocs {
		x, y := ca[d.Allocs[i].A.ID], cb[d.Allocs[i].B.ID]
		for k := 0; k*recording.HashBytes < min(len(x), len(y)); k++ {
			if !bytes.Equal(x[k*recording.HashBytes:(k+1)*recording.HashBytes], y[k*recording.HashBytes:(k+1)*recording.HashBytes]) {
				d.Allocs[i].Chunk = k
				break
			}
		}
	}
	return nil
}

// digestChunks reads the chunk hashes of step's digest of p, by allocation id.
func digestChunks(p *recording.Process, step uint32) (map[uint64][]byte, error) {
	out := map[uint64][]byte{}
	_, err := p.Scan(func(b *pb.Batch) error {
		for _, st := range b.Digests {
			if st.GetStep() != step || st.GetLost() {
				continue
			}
			regions := st.GetDigestRegions()
			for i, rs := range st.GetRegions() {
				if i < len(regions) {
					out[regions[i].GetAllocationId()] = rs.GetChunkHashes()
				}
			}
			return recording.ErrStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, recording.ErrStop) {
		return nil, fmt.Errorf("%s: %w", p.Name, err)
	}
	return out, nil
}
