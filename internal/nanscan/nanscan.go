// Package nanscan finds the first kernel launch after which device memory
// holds NaN or Inf (gpurr nan). A recording made with --nan-scan holds
// counts the GPU took after every launch, and the first launch with any is
// found from them alone. Otherwise the snapshots are read in launch order,
// each region's chunks decoded as every requested dtype; a chunk is read
// and counted once however many snapshots share it.
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
	"strings"

	"github.com/gpurr/gpurr/internal/diff"
	"github.com/gpurr/gpurr/internal/dtype"
	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memview"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Counts are the NaN and Inf elements found as one dtype.
type Counts struct {
	Type  string `json:"type"`
	NaN   uint64 `json:"nan"`
	Inf   uint64 `json:"inf"`
	First int64  `json:"first_byte"` // byte offset in the region of the first NaN or Inf, -1 when none
	// FirstElement is that element's index (First over the type's size), -1 when none.
	FirstElement int64 `json:"first_element"`
	// Decoded from snapshots only: how the bytes fit the type (types.go).
	Computed uint64 `json:"-"` // NaN and Inf with the bit patterns arithmetic makes
	Finite   uint64 `json:"-"` // finite elements
	Odd      uint64 `json:"-"` // finite elements of magnitudes real data of the type does not have
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

// Source says where a Finding's counts come from.
type Source int

const (
	// Snapshots: decoded from the stored bytes, with First offsets.
	Snapshots Source = iota
	// GPUCounts: counted on the GPU at record time (--nan-scan); First is
	// -1 unless the launch also has a snapshot after it.
	GPUCounts
)

// Finding is the first launch after which memory holds NaN or Inf.
type Finding struct {
	Launch    *pb.Launch
	Kernel    *pb.Kernel
	Callstack *pb.Callstack
	Forward   *pb.Callstack // a backward launch's forward callstack (LaunchRecord.Forward)
	Regions   []Region
	Source    Source
	// Disagree lists regions whose snapshot decodes to other counts than
	// the GPU counted at record time (both are in the recording): a fault
	// in the recording, to report, not to trust.
	Disagree []string
	// Inputs says whether the launch made the NaN or passed it on: whether its regions held
	// NaN or Inf before it.
	Inputs *Inputs
}

// Stats says how much was looked at.
type Stats struct {
	Source   Source
	Launches int // launches looked at before the finding (all of them when none)
	// Unclear counts launches before the finding (all of them when none) with regions that
	// hold NaN bit patterns as some type asked but whose bytes fit none: their type is unknown.
	Unclear int
	Chunks  int // distinct chunks decoded
	// NotScanned counts launches with memory states but nothing to look
	// at: with Snapshots, hash-only states; with GPUCounts, states the GPU
	// did not count (lost ones, or a device without memory for the
	// counters).
	NotScanned int
	// Unknown counts the region states of the launches looked at that were not scanned
	// because they are unknown: carried from a state that was lost (write sets, format 1.11),
	// they hold neither counts nor bytes.
	Unknown int
	// Library counts the region states looked at and left out because a communication library
	// made their memory for its own use (NCCL's flags and FIFOs hold bit patterns that read as
	// NaN), by owner; empty with Options.IncludeLibrary.
	Library map[string]int
	// Compile counts the launches left out because XLA made them while it compiled and
	// autotuned; 0 with Options.IncludeCompile.
	Compile int
	// Stale counts the launches before the finding whose regions held NaN or Inf that their
	// memory already held (GPU counts only): they passed it on, and made none.
	Stale int
	// Warnings say, a line each, what the recording lacks beyond what was looked at: it ended
	// short (recording.Shortfall), or lost or failed to record something
	// (recording.LossWarning). A launch after the end, or a state lost, may be the first with
	// NaN.
	Warnings []string
}

// Options say how Scan looks.
type Options struct {
	// Explicit: the user named the types. Otherwise a snapshotted region counts only as the
	// type its bytes are (types.go): f32 data is not reported as f16 NaN.
	Explicit bool
	// IncludeLibrary looks at communication libraries' own memory too (Allocation.owner),
	// which is left out by default.
	IncludeLibrary bool
	// IncludeCompile looks at the launches XLA made while it compiled and autotuned too
	// (recording.Links.Compile), which are left out by default: autotuning runs candidates on
	// scratch buffers whose bytes may read as NaN.
	IncludeCompile bool
}

// Scan finds the first launch of p after which one of its regions holds
// NaN or Inf as any of types (floating-point types only); nil when none
// does. It uses the GPU's counts when the recording has them for every
// type asked, else the snapshots. Both read the recording streamed, so
// memory does not grow with it.
func Scan(p *recording.Process, types []*dtype.Type, o Options) (*Finding, Stats, error) {
	for _, t := range types {
		if !t.IsFloat() {
			return nil, Stats{}, fmt.Errorf("%s has no NaN or Inf: want floating-point dtypes", t.Name)
		}
	}
	mem := p.Info.GetMemory()
	index := make([]int, len(types)) // types[i]'s counts are entry index[i] of the GPU's, -1 when not counted
	allCounted := len(types) > 0
	for i, t := range types {
		index[i] = slices.Index(mem.GetNanScan(), t.Name)
		allCounted = allCounted && index[i] >= 0
	}
	s := &scanner{p: p, types: types, index: index, view: memview.New(p), explicit: o.Explicit,
		includeLibrary: o.IncludeLibrary, lib: diff.NewLibraryMemory()}
	if !o.IncludeCompile {
		s.links, s.compile = recording.NewLinks(), map[uint64]bool{}
	}
	defer s.view.Close()
	switch {
	case allCounted:
		return s.fromCounts()
	case mem.GetMode() == recording.MemorySnapshot:
		return s.fromSnapshots()
	case len(mem.GetNanScan()) > 0:
		return nil, Stats{}, fmt.Errorf("%s: the GPU counted NaN as %s only and there are no snapshots to decode: ask for --dtype %s, or record with --nan-scan %s",
			p.Dir, strings.Join(mem.GetNanScan(), ","), strings.Join(mem.GetNanScan(), ","), typeNames(types))
	default:
		return nil, Stats{}, fmt.Errorf("%s was recorded without snapshots or NaN counts: record with --memory hash --nan-scan %s (or --memory snapshot)",
			p.Dir, typeNames(types))
	}
}

type scanner struct {
	p        *recording.Process
	types    []*dtype.Type
	explicit bool
	index    []int // types[i]'s entry in the recording's nan_scan counts
	st       Stats
	view     *memview.View
	seen     map[[16]byte][]Counts // counts of the chunks decoded, by hash
	calls    []uint64              // every launch's seq, ascending (8 bytes a launch): what Inputs reads up to the finding
	writes   bool                  // the recording holds copy states or allocations gpurr cleared (diff.PriorStatesRead)
	// lib knows the libraries' own allocations (the first pass reads them), whose regions are
	// left out unless includeLibrary.
	lib            *diff.LibraryMemory
	includeLibrary bool
	// links and compile know the launches of XLA's compilation, left out unless
	// Options.IncludeCompile (then both are nil).
	links   *recording.Links
	compile map[uint64]bool
}

// library is the owner of region i of launch l when it is a library's memory that is left
// out, else "".
func (s *scanner) library(l *pb.Launch, i int) string {
	if s.includeLibrary || i >= len(l.GetRegions()) {
		return ""
	}
	return s.lib.Owner(l.GetRegions()[i])
}

// fromCounts: one pass for the launches whose AFTER state counts NaN or Inf, then their
// records in launch order (kernel, callstack, snapshots if any) until one is a finding: a
// count the kernel's type rules out (finding) is not one. A launch is one only where a
// region's count rose above what the same allocation held after the last counted launch
// that reached it (XLA's autotuning included): memory that already held NaN, such as a pool
// whose scratch bytes autotuning left, is passed on by every launch that reaches it, and the
// first of those made none (Stats.Stale counts them).
func (s *scanner) fromCounts() (*Finding, Stats, error) {
	s.st.Source = GPUCounts
	var seqs, candidates, counted []uint64 // the counted launches; those with counts; both, XLA's compilation's too
	unknown := map[uint64]int{}            // region states without counts, of counted launches
	var copies []copyCount                 // what copies and memsets left in the memory they wrote
	err := s.scan(func(b *pb.Batch) {
		copies = s.copyCounts(copies, b)
		for _, m := range b.Memory {
			if m.GetPoint() != pb.MemoryState_AFTER {
				continue
			}
			// A region carried from a lost state has no counts, and may come first.
			if m.GetLost() || !slices.ContainsFunc(m.GetRegions(), func(rs *pb.RegionState) bool { return len(rs.GetNanCount()) > 0 }) {
				if !s.compile[m.GetLaunchSeq()] {
					s.st.NotScanned++
				}
				continue
			}
			counted = append(counted, m.GetLaunchSeq())
			if s.compile[m.GetLaunchSeq()] {
				continue
			}
			if n := recording.UnknownRegions(m); n > 0 {
				unknown[m.GetLaunchSeq()] += n
			}
			seqs = append(seqs, m.GetLaunchSeq())
			if s.hasGPUCounts(m) {
				candidates = append(candidates, m.GetLaunchSeq())
			}
		}
	})
	if err != nil {
		return nil, s.st, err
	}
	slices.Sort(candidates)
	candidates = slices.Compact(candidates)
	var found *Finding
	var record *recording.LaunchRecord
	// Where no launch added a NaN, the first to pass one on is the answer: a NaN that a copy
	// or memset brought in, which launches only carried along.
	var passedOn *Finding
	var passedOnRecord *recording.LaunchRecord
	delivered := 0
	if len(candidates) > 0 {
		slices.Sort(counted)
		counted = slices.Compact(counted)
		counted = counted[:sortedUpTo(counted, candidates[len(candidates)-1])]
		held := map[diff.AllocationKey][]uint64{} // NaN + Inf per type asked, after the last counted launch or copy that reached it
		slices.SortStableFunc(copies, func(a, b copyCount) int { return cmp.Compare(a.after, b.after) })
		next := 0
		_, err = s.p.Ordered(counted, func(r *recording.LaunchRecord) error {
			seq := r.Launch.GetSeq()
			// A copy or memset that left NaN (a pool filled with 0xff) made it, not the next launch to reach it.
			for ; next < len(copies) && copies[next].after < seq; next++ {
				held[copies[next].key] = copies[next].counts
			}
			_, isCandidate := slices.BinarySearch(candidates, seq)
			if isCandidate {
				delivered++
			}
			rose, held0 := s.rose(r, held)
			if !isCandidate || !rose {
				if isCandidate {
					s.countLibrary(r)
					if held0 {
						s.st.Stale++
						if passedOn == nil {
							f, err := s.finding(r)
							if err != nil {
								return err
							}
							passedOn, passedOnRecord = f, r
						}
					}
				}
				return nil
			}
			f, err := s.finding(r)
			if err != nil || f == nil {
				return err
			}
			found, record = f, r
			return recording.ErrStop
		})
	}
	if err == nil && found == nil && passedOn != nil {
		found, record = passedOn, passedOnRecord
		s.st.Stale = 0 // every launch that passed a NaN over came at or after it
	}
	last := uint64(math.MaxUint64)
	if found != nil {
		last = found.Launch.GetSeq()
	}
	for _, seq := range seqs {
		if seq <= last {
			s.st.Launches++
			s.st.Unknown += unknown[seq]
		}
	}
	if err == nil && found == nil && delivered < len(candidates) {
		err = fmt.Errorf("launches with NaN counts are not in the recording (%d of %d found)", delivered, len(candidates))
	}
	if err == nil && found != nil {
		found.Inputs, err = s.inputs(found, record)
	}
	return found, s.st, err
}

// copyCount is what a copy or memset made between launches left in an allocation it wrote: NaN
// + Inf per type asked, as rose keeps them.
type copyCount struct {
	after  uint64 // the last launch call made before it
	key    diff.AllocationKey
	counts []uint64
}

// copyCounts appends to copies the counts of b's copy states (left out: those without counts,
// and libraries' own memory unless asked, as rose leaves them out).
func (s *scanner) copyCounts(copies []copyCount, b *pb.Batch) []copyCount {
	for _, c := range b.GetCopyStates() {
		if c.GetLost() {
			continue
		}
		for j, reg := range c.GetCopyRegions() {
			if j >= len(c.GetRegions()) || (!s.includeLibrary && s.lib.Owner(reg) != "") {
				continue
			}
			rs := c.GetRegions()[j]
			if rs.GetUnknown() || len(rs.GetNanCount()) == 0 {
				continue
			}
			copies = append(copies, copyCount{after: c.GetLaunchSeq(), key: diff.AllocationOf(reg), counts: s.nonFinite(rs)})
		}
	}
	return copies
}

// nonFinite is NaN + Inf of a region's state as each type asked, as held keeps them.
func (s *scanner) nonFinite(rs *pb.RegionState) []uint64 {
	out := make([]uint64, len(s.index))
	for t, k := range s.index {
		if nan, inf, ok := gpuCount(rs, k); ok {
			out[t] = nan + inf
		}
	}
	return out
}

// rose notes in held the counts of r's regions (communication libraries' own memory left out,
// unless asked) and reports whether one of them rose above what its allocation held before,
// and whether one holds NaN or Inf at all.
func (s *scanner) rose(r *recording.LaunchRecord, held map[diff.AllocationKey][]uint64) (up, any bool) {
	for i, rs := range r.After.GetRegions() {
		if i >= len(r.Launch.GetRegions()) || rs.GetUnknown() || len(rs.GetNanCount()) == 0 || s.library(r.Launch, i) != "" {
			continue
		}
		key := diff.AllocationOf(r.Launch.GetRegions()[i])
		before, now := held[key], s.nonFinite(rs)
		for t := range now {
			if t >= len(before) && now[t] > 0 || t < len(before) && now[t] > before[t] {
				up = true
			}
			any = any || now[t] > 0
		}
		held[key] = now
	}
	return up, any
}

// countLibrary counts the regions of r left out as communication libraries' own memory.
func (s *scanner) countLibrary(r *recording.LaunchRecord) {
	for i := range r.After.GetRegions() {
		if owner := s.library(r.Launch, i); owner != "" {
			if s.st.Library == nil {
				s.st.Library = map[string]int{}
			}
			s.st.Library[owner]++
		}
	}
}

// sortedUpTo is how many of the ascending seqs are at most seq.
func sortedUpTo(seqs []uint64, seq uint64) int {
	n, found := slices.BinarySearch(seqs, seq)
	if found {
		n++
	}
	return n
}

// scan is the first pass over the recording: fn sees every batch, and the pass notes in
// st.Warnings whether the recording ended short or lost something.
func (s *scanner) scan(fn func(*pb.Batch)) error {
	stats, ended := &pb.Stats{}, false
	res, err := s.p.Scan(func(b *pb.Batch) error {
		if b.Stats != nil {
			stats = b.Stats
		}
		ended = ended || b.End != nil
		if s.links != nil {
			s.links.Add(b, false)
		}
		for _, l := range b.Launches {
			s.calls = append(s.calls, l.GetSeq())
			if s.links != nil && s.links.Compile(l) {
				s.compile[l.GetSeq()] = true
				s.st.Compile++
			}
		}
		for _, a := range b.Allocations {
			s.lib.Add(a)
			s.writes = s.writes || a.GetCleared()
		}
		s.writes = s.writes || len(b.CopyStates) > 0
		fn(b)
		return nil
	})
	slices.Sort(s.calls)
	for _, w := range []string{recording.Shortfall(s.p.Name, res.Truncated, ended), recording.LossWarning(s.p.Name, stats)} {
		if w != "" {
			s.st.Warnings = append(s.st.Warnings, w)
		}
	}
	return err
}

// hasGPUCounts: some region of an AFTER state counts NaN or Inf as one of
// the types asked.
func (s *scanner) hasGPUCounts(m *pb.MemoryState) bool {
	for _, rs := range m.GetRegions() {
		for _, k := range s.index {
			if nan, inf, ok := gpuCount(rs, k); ok && nan+inf > 0 {
				return true
			}
		}
	}
	return false
}

func (s *scanner) gpuCounts(rs *pb.RegionState) []Counts {
	out := make([]Counts, len(s.types))
	for i, t := range s.types {
		out[i] = Counts{Type: t.Name, First: -1, FirstElement: -1}
		out[i].NaN, out[i].Inf, _ = gpuCount(rs, s.index[i])
	}
	return out
}

// gpuCount is entry k of a region state's NaN counts; ok is false where
// the state has no such entry (not counted, or a damaged recording).
func gpuCount(rs *pb.RegionState, k int) (nan, inf uint64, ok bool) {
	if k < 0 || k >= len(rs.GetNanCount()) || k >= len(rs.GetInfCount()) {
		return 0, 0, false
	}
	return rs.GetNanCount()[k], rs.GetInfCount()[k], true
}

// fromSnapshots: a first pass lists the launches with a snapshot after
// them (8 bytes each), a second reads those in launch order until one
// holds NaN or Inf.
func (s *scanner) fromSnapshots() (*Finding, Stats, error) {
	var seqs []uint64
	err := s.scan(func(b *pb.Batch) {
		for _, m := range b.Memory {
			switch {
			case m.GetPoint() != pb.MemoryState_AFTER || m.GetLost() || s.compile[m.GetLaunchSeq()]:
			case memview.HasBytes(m):
				seqs = append(seqs, m.GetLaunchSeq())
			default:
				s.st.NotScanned++
			}
		}
	})
	if err != nil {
		return nil, s.st, err
	}
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	var found *Finding
	var record *recording.LaunchRecord
	_, err = s.p.Ordered(seqs, func(r *recording.LaunchRecord) error {
		if !memview.HasBytes(r.After) {
			return nil
		}
		s.st.Launches++
		f, err := s.finding(r)
		if err != nil || f == nil {
			return err
		}
		found, record = f, r
		return recording.ErrStop
	})
	if err == nil && found != nil {
		found.Inputs, err = s.inputs(found, record)
	}
	return found, s.st, err
}

// finding is what launch r's AFTER state says: nil when no region holds
// NaN or Inf. Snapshots, where the launch has them, give offsets and
// whether the NaN was there before the launch.
func (s *scanner) finding(r *recording.LaunchRecord) (*Finding, error) {
	l := memview.FromRecord(r)
	after := r.After
	_, err := s.view.State(l, memview.After)
	snap := err == nil
	src := Snapshots
	if !snap {
		src = GPUCounts
	}
	var regions []Region
	var disagree []string
	var hint *dtype.Type
	if r.Kernel != nil {
		hint = KernelType(recording.Demangle(r.Kernel.GetName()), s.types)
	}
	unclear := false
	s.countLibrary(r)
	for i, rs := range after.GetRegions() {
		if s.library(r.Launch, i) != "" {
			continue
		}
		if rs.GetUnknown() {
			if s.st.Source == Snapshots { // from the counts, their first pass counted it
				s.st.Unknown++
			}
			continue
		}
		var total []Counts
		if snap {
			var err error
			if total, err = s.regionCounts(rs); err != nil {
				return nil, fmt.Errorf("launch %d region %d: %w", after.GetLaunchSeq(), i, err)
			}
			disagree = append(disagree, s.crossCheck(i, rs, total)...)
			if !s.explicit {
				var u bool
				total, u = judge(total, hint)
				unclear = unclear || u
			}
		} else {
			total = s.gpuCounts(rs)
			if !s.explicit && hint != nil {
				// No bytes to judge, but the kernel's name says which count is the region's.
				total = slices.DeleteFunc(total, func(c Counts) bool { return c.Type != hint.Name })
			}
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
		if unclear {
			s.st.Unclear++
		}
		return nil, nil
	}
	if b, err := s.view.State(l, memview.Before); err == nil {
		for ri := range regions {
			if i := regions[ri].Index; i < len(b.GetRegions()) && !b.GetRegions()[i].GetUnknown() {
				before, err := s.regionCounts(b.GetRegions()[i])
				if err != nil {
					return nil, err
				}
				before = slices.DeleteFunc(before, func(c Counts) bool {
					return !slices.ContainsFunc(regions[ri].Counts, func(k Counts) bool { return k.Type == c.Type })
				})
				regions[ri].Before = hasNaNOrInf(before)
			}
		}
	}
	return &Finding{Launch: r.Launch, Kernel: r.Kernel, Callstack: r.Callstack, Forward: r.Forward, Regions: regions, Source: src, Disagree: disagree}, nil
}

// crossCheck compares the counts decoded from region i's snapshot with
// those the GPU took of the same bytes, where the recording has both.
func (s *scanner) crossCheck(i int, rs *pb.RegionState, decoded []Counts) []string {
	var out []string
	for ti, k := range s.index {
		nan, inf, ok := gpuCount(rs, k)
		if !ok {
			continue
		}
		gpu, snap := [2]uint64{nan, inf}, [2]uint64{decoded[ti].NaN, decoded[ti].Inf}
		if gpu != snap {
			out = append(out, fmt.Sprintf("region %d as %s: the GPU counted %d NaN, %d Inf; the snapshot holds %d NaN, %d Inf",
				i, s.types[ti].Name, gpu[0], gpu[1], snap[0], snap[1]))
		}
	}
	return out
}

func typeNames(types []*dtype.Type) string {
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = t.Name
	}
	return strings.Join(names, ",")
}

// regionCounts counts a snapshotted region state's NaN and Inf, reading
// each distinct chunk once (seen caches the counts by chunk hash).
func (s *scanner) regionCounts(rs *pb.RegionState) ([]Counts, error) {
	if s.seen == nil {
		if _, err := s.view.Store(); err != nil {
			return nil, err
		}
		s.seen = map[[16]byte][]Counts{}
	}
	chunkBytes := int64(s.view.ChunkBytes())
	var total []Counts
	for k, h := range recording.ChunkHashes(rs) {
		c, ok := s.seen[[16]byte(h)]
		if !ok {
			b, err := s.view.Get([16]byte(h))
			if err != nil {
				return nil, fmt.Errorf("chunk %d: %w", k, err)
			}
			c = Count(b, s.types)
			s.seen[[16]byte(h)] = c
			s.st.Chunks++
		}
		total = add(total, c, int64(k)*chunkBytes)
	}
	return total, nil
}

// Count counts the NaN and Inf elements of b as each of types, from b's
// first byte, and how the bytes fit each type (types.go).
func Count(b []byte, types []*dtype.Type) []Counts {
	out := make([]Counts, len(types))
	for ti, t := range types {
		out[ti] = countAs(b, t)
	}
	return out
}

// add sums a chunk's counts (at byte offset off of its region) into total.
func add(total, c []Counts, off int64) []Counts {
	if total == nil {
		total = make([]Counts, len(c))
		for i := range total {
			total[i] = Counts{Type: c[i].Type, First: -1, FirstElement: -1}
		}
	}
	for i := range c {
		total[i].NaN += c[i].NaN
		total[i].Inf += c[i].Inf
		total[i].Computed += c[i].Computed
		total[i].Finite += c[i].Finite
		total[i].Odd += c[i].Odd
		if total[i].First < 0 && c[i].First >= 0 {
			total[i].First = off + c[i].First
			total[i].FirstElement = total[i].First / int64(elementSize(c[i].Type))
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
