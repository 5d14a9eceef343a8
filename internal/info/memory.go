package info

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Memory summarizes memory capture (gpurr record --memory hash|snapshot).
type Memory struct {
	Mode             string   `json:"mode"` // hash | snapshot
	ChunkBytes       uint32   `json:"chunk_bytes"`
	SnapshotKernels  string   `json:"snapshot_kernels,omitempty"`
	SnapshotLaunches string   `json:"snapshot_launches,omitempty"`
	OnFull           string   `json:"on_full"`
	StagingBytes     uint64   `json:"staging_bytes"`
	FlightRecorder   uint64   `json:"flight_recorder,omitempty"` // keeps the last N launches' snapshots
	NanScan          []string `json:"nan_scan,omitempty"`        // types the GPU counted NaN and Inf as

	// Launches by what memory capture did for them (MemoryPlan.status in
	// lower case: hash, snapshot, skipped_capture, ...), in that order.
	Launches []Counter `json:"launches"`

	// The agent's counters.
	MemoryLaunches    uint64    `json:"memory_launches"`
	MemorySkipped     uint64    `json:"memory_skipped"`
	States            uint64    `json:"memory_states"`
	StatesLost        uint64    `json:"memory_states_lost"`
	BytesHashed       uint64    `json:"bytes_hashed"`
	Snapshots         uint64    `json:"snapshots"`
	ChunksTotal       uint64    `json:"chunks_total"`
	ChunksTransferred uint64    `json:"chunks_transferred"`
	ChunksStored      uint64    `json:"chunks_stored"`
	ChunkBytesStored  uint64    `json:"chunk_bytes_stored"`
	StagingWaitNS     uint64    `json:"staging_wait_ns"`
	HashKernels       uint64    `json:"memory_hash_kernels"` // gpurr_memcap launches (--defer-hashes: a batch of jobs each)
	SideBatches       uint64    `json:"side_batches"`        // --defer-hashes: of those, run beside the program
	SideStreamWaits   uint64    `json:"side_stream_waits"`   // ... and program streams made to wait for them
	SideHostWaits     uint64    `json:"side_host_waits"`     // ... and the host
	CaptureGPUNS      uint64    `json:"memory_capture_gpu_ns"`
	FlightDumps       uint64    `json:"flight_dumps"`
	SnapshotSelected  uint64    `json:"snapshot_selected"`
	Stopped           string    `json:"memory_stopped,omitempty"` // why capture stopped early
	ChunksMissing     uint64    `json:"chunks_missing"`           // snapshot chunks dropped (drop-oldest), from the states
	LostReasons       []Counter `json:"lost_reasons,omitempty"`   // lost states by reason, from the states

	// Copy states (format 1.17): the state of what each copy or memset of the program into
	// device memory wrote; those gpurr could not take, by reason.
	CopyStates      uint64    `json:"copy_states"`
	CopyStatesLost  uint64    `json:"copy_states_lost"`
	CopyLostReasons []Counter `json:"copy_lost_reasons,omitempty"`

	// Of the bytes of the regions of launches hashed or snapshotted after they ran, those in
	// regions that only parameter words the kernel's PTX proves read-only point into
	// (ParamInfo.proved_read_only): what hashing only what a launch can write would save.
	RegionBytes         uint64 `json:"region_bytes"`
	ProvedReadOnlyBytes uint64 `json:"proved_read_only_bytes"`

	// Write sets (format 1.11): which regions a launch left unhashed, carrying the state after
	// the last launch that hashed them (gpurr record --write-sets): proved, learned or all;
	// "" for a recording made before them, which hashed every region.
	WriteSets             string `json:"write_sets,omitempty"`
	AuditEvery            uint32 `json:"audit_every,omitempty"` // learned: every Nth launch of a kernel hashed all its regions
	RegionsCarriedProved  uint64 `json:"regions_carried_proved"`
	RegionsCarriedLearned uint64 `json:"regions_carried_learned"`
	BytesCarried          uint64 `json:"bytes_carried"`           // what was not hashed
	RegionsCarriedUnknown uint64 `json:"regions_carried_unknown"` // carried from a lost state: no hash (a problem)
	WriteSetAudits        uint64 `json:"write_set_audits"`
	WriteSetMisses        uint64 `json:"write_set_misses"` // audits that found a learned read-only region changed (a problem)
	// Misses are the WriteSetMiss records: where carried states may be stale.
	Misses []WriteSetMiss `json:"misses,omitempty"`

	// Step digests (format 1.12): taken at each step boundary (--memory digest, --hash-steps),
	// of every DigestEvery-th step; DigestBytes is the most one hashed, DigestsLost those
	// enqueued but never completed, DigestsSkipped the boundaries whose digest was not taken.
	Digests        uint64 `json:"digests,omitempty"`
	DigestEvery    uint32 `json:"digest_every,omitempty"`
	DigestBytes    uint64 `json:"digest_bytes,omitempty"`
	DigestOf       string `json:"digest_of,omitempty"` // optimizer, all, or both ("optimizer, all")
	DigestsLost    uint64 `json:"digests_lost,omitempty"`
	DigestsSkipped uint64 `json:"digests_skipped,omitempty"`
	HashSteps      string `json:"hash_steps,omitempty"`
	// Library is the memory communication libraries allocated for their own use (format
	// 1.12), by owner: diff, verify, nan and digests leave it out.
	Library []LibraryMemory `json:"library,omitempty"`

	statuses map[pb.MemoryPlan_Status]uint64
	complete bool // the recording has its End: counters are final
}

// LibraryMemory is the memory one library allocated for its own use.
type LibraryMemory struct {
	Owner       string `json:"owner"`
	Allocations uint64 `json:"allocations"`
	Bytes       uint64 `json:"bytes"`
}

// WriteSetMiss is an audit launch that hashed a region a learned write set called read-only
// and found it changed since the last launch that hashed it: the region's states carried in
// between may be stale.
type WriteSetMiss struct {
	Kernel       string   `json:"kernel"` // demangled
	ParamOffsets []uint32 `json:"param_offsets"`
	AuditSeq     uint64   `json:"audit_seq"`
	SinceSeq     uint64   `json:"since_seq"`
	AllocationID uint64   `json:"allocation_id"`
}

// failedStatuses are the launches memory capture should have covered and
// could not: each is a problem. Skipping stream capture, launches without
// regions, and launches after capture stopped (reported once, as the stop)
// are not.
var failedStatuses = []pb.MemoryPlan_Status{
	pb.MemoryPlan_SKIPPED_RING_TOO_SMALL,
	pb.MemoryPlan_SKIPPED_RING_FULL,
	pb.MemoryPlan_SKIPPED_ERROR,
}

// memoryCounter adds up what memory capture did, launch by launch and state by state.
type memoryCounter struct {
	statuses map[pb.MemoryPlan_Status]uint64
	selected uint64
	// proved are the parameters of each kernel (by id) that its PTX proves no store goes
	// through.
	proved        map[uint64][]*pb.ParamInfo
	all, readOnly uint64 // readOnlyBytes
	reasons       map[string]uint64
	chunksMissing uint64
	unknown       uint64
	copies        uint64             // copy states, lost ones included
	copyReasons   map[string]uint64  // lost copy states by reason
	misses        []*pb.WriteSetMiss // every one is reported; an audit finds few
	digests       uint64
	digestsLost   uint64
	digestBytes   uint64
	digestOf      map[string]bool
	library       map[string]*LibraryMemory
}

func newMemoryCounter() *memoryCounter {
	return &memoryCounter{statuses: map[pb.MemoryPlan_Status]uint64{}, proved: map[uint64][]*pb.ParamInfo{}, reasons: map[string]uint64{},
		digestOf: map[string]bool{}, library: map[string]*LibraryMemory{}, copyReasons: map[string]uint64{}}
}

func (c *memoryCounter) kernel(k *pb.Kernel) {
	for _, p := range k.GetParams() {
		if p.GetProvedReadOnly() {
			c.proved[k.GetId()] = append(c.proved[k.GetId()], p)
		}
	}
}

// launch counts a launch by its memory status and sums its regions: all those of the launches
// memory capture covered, and of those the regions every pointer into which is a parameter
// word the kernel's PTX proves no store goes through (a region no pointer word is known for
// counts as written).
func (c *memoryCounter) launch(l *pb.Launch) {
	if p := l.GetMemory(); p != nil {
		c.statuses[p.GetStatus()]++
		if p.GetSnapshotSelected() {
			c.selected++
		}
	}
	if st := l.GetMemory().GetStatus(); st != pb.MemoryPlan_HASH && st != pb.MemoryPlan_SNAPSHOT {
		return
	}
	params := c.proved[l.GetKernelId()]
	covered := func(off uint32) bool {
		for _, p := range params {
			if off >= p.GetOffset() && off+8 <= p.GetOffset()+p.GetSize() {
				return true
			}
		}
		return false
	}
	for _, r := range l.GetRegions() {
		c.all += r.GetSize()
		ro := len(params) > 0 && len(r.GetParamOffsets()) > 0
		for _, off := range r.GetParamOffsets() {
			ro = ro && covered(off)
		}
		if ro {
			c.readOnly += r.GetSize()
		}
	}
}

// digest counts a step digest.
func (c *memoryCounter) digest(st *pb.MemoryState) {
	c.digests++
	if st.GetLost() {
		c.digestsLost++
		return
	}
	c.digestOf[st.GetDigestOf()] = true
	var bytes uint64
	for _, r := range st.GetDigestRegions() {
		bytes += r.GetSize()
	}
	c.digestBytes = max(c.digestBytes, bytes)
}

// allocation counts the memory a library allocated for itself.
func (c *memoryCounter) allocation(a *pb.Allocation) {
	if a.GetOwner() == "" || a.GetFreed() {
		return
	}
	l := c.library[a.GetOwner()]
	if l == nil {
		l = &LibraryMemory{Owner: a.GetOwner()}
		c.library[a.GetOwner()] = l
	}
	l.Allocations++
	l.Bytes += a.GetSize()
}

// copyState counts the state of what a copy or memset wrote.
func (c *memoryCounter) copyState(st *pb.MemoryState) {
	c.copies++
	if st.GetLost() {
		c.copyReasons[cmp.Or(st.GetLostReason(), "no reason given")]++
	}
	for _, r := range st.GetRegions() {
		c.chunksMissing += uint64(r.GetChunksMissing())
	}
}

func (c *memoryCounter) state(st *pb.MemoryState) {
	if st.GetLost() {
		c.reasons[cmp.Or(st.GetLostReason(), "no reason given")]++
	}
	for _, r := range st.GetRegions() {
		c.chunksMissing += uint64(r.GetChunksMissing())
	}
	c.unknown += uint64(recording.UnknownRegions(st))
}

// summarize is nil when the recording has no memory capture. links names the kernels.
func (c *memoryCounter) summarize(info *pb.Process, s *pb.Stats, end *pb.End, links *recording.Links) *Memory {
	cfg := info.GetMemory()
	if cfg == nil {
		return nil
	}
	m := &Memory{
		Mode: cfg.GetMode(), ChunkBytes: cfg.GetChunkBytes(), SnapshotKernels: cfg.GetSnapshotKernels(),
		SnapshotLaunches: cfg.GetSnapshotLaunches(), OnFull: cfg.GetOnFull(), StagingBytes: cfg.GetStagingBytes(),
		FlightRecorder: cfg.GetFlightRecorder(), NanScan: cfg.GetNanScan(),

		MemoryLaunches: s.GetMemoryLaunches(), MemorySkipped: s.GetMemorySkipped(),
		States: s.GetMemoryStates(), StatesLost: s.GetMemoryStatesLost(), BytesHashed: s.GetBytesHashed(),
		Snapshots: s.GetSnapshots(), ChunksTotal: s.GetChunksTotal(), ChunksTransferred: s.GetChunksTransferred(),
		ChunksStored: s.GetChunksStored(), ChunkBytesStored: s.GetChunkBytesStored(), StagingWaitNS: s.GetStagingWaitNs(),
		HashKernels: s.GetMemoryHashKernels(), SideBatches: s.GetSideBatches(), SideStreamWaits: s.GetSideStreamWaits(),
		SideHostWaits: s.GetSideHostWaits(),
		CaptureGPUNS:  s.GetMemoryCaptureGpuNs(), FlightDumps: s.GetFlightDumps(), Stopped: s.GetMemoryStopped(),

		WriteSets: cfg.GetWriteSets(), AuditEvery: cfg.GetAuditEvery(),
		RegionsCarriedProved: s.GetRegionsCarriedProved(), RegionsCarriedLearned: s.GetRegionsCarriedLearned(),
		BytesCarried: s.GetBytesCarried(), RegionsCarriedUnknown: s.GetRegionsCarriedUnknown(),
		WriteSetAudits: s.GetWriteSetAudits(), WriteSetMisses: max(s.GetWriteSetMisses(), uint64(len(c.misses))),

		SnapshotSelected: c.selected, ChunksMissing: c.chunksMissing, RegionBytes: c.all, ProvedReadOnlyBytes: c.readOnly,
	}
	for _, w := range c.misses {
		name := fmt.Sprintf("kernel %d", w.GetKernelId())
		if k := links.Kernel(w.GetKernelId()); k != nil {
			name = links.KernelName(k)
		}
		m.Misses = append(m.Misses, WriteSetMiss{Kernel: name, ParamOffsets: w.GetParamOffsets(), AuditSeq: w.GetAuditSeq(),
			SinceSeq: w.GetSinceSeq(), AllocationID: w.GetAllocationId()})
	}
	m.Digests, m.DigestsLost, m.DigestBytes, m.DigestsSkipped = c.digests, c.digestsLost, c.digestBytes, s.GetDigestsSkipped()
	m.DigestEvery, m.HashSteps = cfg.GetDigestEvery(), cfg.GetHashSteps()
	m.DigestOf = strings.Join(slices.Sorted(maps.Keys(c.digestOf)), ", ")
	for _, o := range slices.Sorted(maps.Keys(c.library)) {
		m.Library = append(m.Library, *c.library[o])
	}
	m.complete = end != nil
	m.statuses = c.statuses
	for _, st := range slices.Sorted(maps.Keys(m.statuses)) {
		m.Launches = append(m.Launches, Counter{Name: statusText(st), Value: m.statuses[st]})
	}
	// The counter, or the states, where the recording ended before its last counters.
	m.RegionsCarriedUnknown = max(m.RegionsCarriedUnknown, c.unknown)
	for _, r := range slices.Sorted(maps.Keys(c.reasons)) {
		m.LostReasons = append(m.LostReasons, Counter{Name: r, Value: c.reasons[r]})
	}
	var copiesLost uint64
	for _, r := range slices.Sorted(maps.Keys(c.copyReasons)) {
		m.CopyLostReasons = append(m.CopyLostReasons, Counter{Name: r, Value: c.copyReasons[r]})
		copiesLost += c.copyReasons[r]
	}
	m.CopyStatesLost = max(s.GetCopyStatesLost(), copiesLost)
	m.CopyStates = max(s.GetCopyStates(), c.copies-copiesLost)
	return m
}

func statusText(st pb.MemoryPlan_Status) string { return cmp.Or(recording.EnumText(st), "unspecified") }

// launches is how many launches had the given status.
func (m *Memory) launches(st pb.MemoryPlan_Status) uint64 { return m.statuses[st] }

// problems names what memory capture lost, one short item each.
func (m *Memory) problems() []string {
	if m == nil {
		return nil
	}
	var out []string
	if m.StatesLost > 0 {
		out = append(out, "memory_states_lost")
	}
	if m.Stopped != "" {
		out = append(out, "memory_stopped")
	}
	if m.CopyStatesLost > 0 {
		out = append(out, "copy_states_lost")
	}
	for _, st := range failedStatuses {
		if m.launches(st) > 0 {
			out = append(out, recording.EnumText(st))
		}
	}
	if m.RegionsCarriedUnknown > 0 {
		out = append(out, "regions_carried_unknown")
	}
	if m.WriteSetMisses > 0 {
		out = append(out, "write_set_misses")
	}
	return out
}

// why says, for people, why a launch got a memory status.
var why = map[pb.MemoryPlan_Status]string{
	pb.MemoryPlan_SKIPPED_CAPTURE:        "made during stream capture (by design)",
	pb.MemoryPlan_SKIPPED_NO_REGIONS:     "with no parameter pointing into device memory",
	pb.MemoryPlan_SKIPPED_RING_TOO_SMALL: "whose chunk hashes do not fit the results ring (older recordings: whose regions did not fit the staging ring)",
	pb.MemoryPlan_SKIPPED_RING_FULL:      "for which drop-oldest could not make room in the staging ring in time",
	pb.MemoryPlan_SKIPPED_ERROR:          "where a CUDA call of the agent failed (see the log)",
	pb.MemoryPlan_SKIPPED_STOPPED:        "after capture stopped",
	pb.MemoryPlan_OUTSIDE_STEPS:          "in steps --hash-steps leaves unhashed (by design)",
}

func (m *Memory) writeProblems(t *textWriter) {
	if m == nil {
		return
	}
	if m.Stopped != "" {
		t.printf("  !! MEMORY CAPTURE STOPPED: %s; %s made after it without memory states\n", m.Stopped, launchCount(m.launches(pb.MemoryPlan_SKIPPED_STOPPED)))
	}
	if m.StatesLost > 0 {
		var parts []string
		for _, r := range m.LostReasons {
			parts = append(parts, fmt.Sprintf("%s: %d", r.Name, r.Value))
		}
		t.printf("  !! MEMORY STATES LOST: %d enqueued on the GPU but never recorded (%s)\n", m.StatesLost, strings.Join(parts, "; "))
	}
	for _, st := range failedStatuses {
		n := m.launches(st)
		if n == 0 {
			continue
		}
		detail := ""
		t.printf("  !! MEMORY NOT CAPTURED: %s %s%s\n", launchCount(n), why[st], detail)
	}
	if m.CopyStatesLost > 0 {
		var parts []string
		for _, r := range m.CopyLostReasons {
			parts = append(parts, fmt.Sprintf("%s: %d", r.Name, r.Value))
		}
		detail := ""
		if len(parts) > 0 {
			detail = " (" + strings.Join(parts, "; ") + ")"
		}
		t.printf("  !! COPY STATES LOST: %s of copies and memsets into device memory not taken%s: readers take what they wrote for unknown\n",
			Count(m.CopyStatesLost, "state"), detail)
	}
	if n := m.RegionsCarriedUnknown; n > 0 {
		from := "a state that was lost"
		if n > 1 {
			from = "states that were lost"
		}
		t.printf("  !! CARRIED STATES UNKNOWN: %s carried from %s: no hash, so readers treat each as a lost state\n", Count(n, "region state"), from)
	}
	if m.WriteSetMisses > 0 {
		var parts []string
		for _, w := range m.Misses[:min(len(m.Misses), shownMisses)] {
			parts = append(parts, fmt.Sprintf("launch %d, %s, found allocation %d (parameter offset %s) changed since launch %d",
				w.AuditSeq, shorten(w.Kernel, 60), w.AllocationID, JoinOffsets(w.ParamOffsets), w.SinceSeq))
		}
		if n := len(m.Misses); n > shownMisses {
			parts = append(parts, fmt.Sprintf("%d more (gpurr query: write_set_misses)", n-shownMisses))
		}
		detail := ""
		if len(parts) > 0 {
			detail = ": " + strings.Join(parts, "; ")
		}
		t.printf("  !! WRITE SET MISSES: %s found a region that a learned write set called read-only changed, so its states carried since its last hash may be stale%s (gpurr diff says when its answer rests on them)\n",
			Count(m.WriteSetMisses, "audit"), detail)
	}
}

// shownMisses is how many write set misses info names.
const shownMisses = 3

// JoinOffsets writes parameter offsets as gpurr's reports do: comma-separated, "-" for none.
func JoinOffsets(offsets []uint32) string {
	parts := make([]string, len(offsets))
	for i, o := range offsets {
		parts[i] = fmt.Sprint(o)
	}
	return cmp.Or(strings.Join(parts, ","), "-")
}

func launchCount(n uint64) string {
	return Count(n, "launch")
}

func (m *Memory) write(t *textWriter) {
	if m == nil {
		return
	}
	t.printf("\n  memory capture: %s\n", m.configText())
	field := func(name, format string, args ...any) { t.printf("    %-12s %s\n", name, fmt.Sprintf(format, args...)) }

	captured := fmt.Sprintf("%d with memory ops", m.launches(pb.MemoryPlan_HASH)+m.launches(pb.MemoryPlan_SNAPSHOT))
	if n := m.launches(pb.MemoryPlan_SNAPSHOT); n > 0 {
		captured += fmt.Sprintf(" (%d snapshot, %d hash)", n, m.launches(pb.MemoryPlan_HASH))
	}
	var skipped []string
	for _, st := range slices.Sorted(maps.Keys(m.statuses)) {
		if st == pb.MemoryPlan_HASH || st == pb.MemoryPlan_SNAPSHOT {
			continue
		}
		skipped = append(skipped, fmt.Sprintf("%d %s", m.statuses[st], cmp.Or(why[st], statusText(st))))
	}
	if len(skipped) > 0 {
		captured += "; skipped: " + strings.Join(skipped, ", ")
	}
	field("launches", "%s", captured)
	states := fmt.Sprintf("%d recorded", m.States)
	if m.StatesLost > 0 {
		states += fmt.Sprintf(", %d lost", m.StatesLost)
	}
	field("states", "%s; %s hashed", states, FormatBytes(m.BytesHashed))
	if m.CopyStates > 0 || m.CopyStatesLost > 0 {
		copies := Count(m.CopyStates, "state") + " of what copies and memsets wrote"
		if m.CopyStatesLost > 0 {
			copies += fmt.Sprintf(", %d lost", m.CopyStatesLost)
		}
		field("copies", "%s", copies)
	}
	m.writeSetsLine(field)
	if m.HashKernels > 0 {
		field("kernels", "%d of gpurr's hash kernels launched for %d states (%.1f each)", m.HashKernels, m.States,
			float64(m.States)/float64(m.HashKernels))
	}
	if m.SideBatches > 0 {
		field("beside", "%d of them ran beside the program; waits for them: %d by its streams, %d by the host",
			m.SideBatches, m.SideStreamWaits, m.SideHostWaits)
	}
	field("GPU time", "%s in gpurr's hash and copy kernels", formatNS(m.CaptureGPUNS))
	if m.Mode == recording.MemorySnapshot {
		selected := launchCount(m.SnapshotSelected) + " selected for snapshots"
		if m.complete && m.SnapshotSelected == 0 && (m.SnapshotKernels != "" || m.SnapshotLaunches != "") {
			selected += ": the selection matched nothing"
		}
		field("selected", "%s", selected)
	}
	if m.Mode == recording.MemorySnapshot || m.Snapshots > 0 {
		field("snapshots", "%d states with contents stored", m.Snapshots)
		chunks := fmt.Sprintf("%d of %d transferred (%s), the others were stored already", m.ChunksTransferred, m.ChunksTotal, percent(m.ChunksTransferred, m.ChunksTotal))
		if m.ChunksMissing > 0 {
			chunks += fmt.Sprintf("; %d missing (dropped by drop-oldest)", m.ChunksMissing)
		}
		field("chunks", "%s", chunks)
		field("chunk store", "%d distinct chunks, %s compressed", m.ChunksStored, FormatBytes(m.ChunkBytesStored))
	}
	field("staging", "program threads waited %s for %s", formatNS(m.StagingWaitNS), m.waitedFor())
	if m.FlightRecorder > 0 || m.FlightDumps > 0 {
		field("flight dumps", "%d", m.FlightDumps)
	}
	if m.Digests > 0 || m.DigestsSkipped > 0 || m.Mode == recording.MemoryDigest || m.HashSteps != "" {
		line := fmt.Sprintf("%d taken at step boundaries", m.Digests)
		if m.DigestEvery > 1 {
			line += fmt.Sprintf(" (every %s step)", Ordinal(m.DigestEvery))
		}
		if m.DigestOf != "" {
			of := strings.NewReplacer("optimizer", "the optimizer's", "all", "every live one").Replace(m.DigestOf)
			line += fmt.Sprintf(", of %s allocations, %s at most", of, FormatBytes(m.DigestBytes))
		}
		if m.DigestsLost > 0 {
			line += fmt.Sprintf("; %d lost", m.DigestsLost)
		}
		if m.DigestsSkipped > 0 {
			line += fmt.Sprintf("; %d not taken (see the log)", m.DigestsSkipped)
		}
		if m.Digests == 0 && m.DigestsSkipped == 0 {
			line += ": the program went through no step (record with --step-every N, or --step-range REGEX)"
		}
		field("digests", "%s", line)
	}
	if m.HashSteps != "" {
		field("hash steps", "launches of steps %s hashed; %d others not (by design)", m.HashSteps, m.launches(pb.MemoryPlan_OUTSIDE_STEPS))
	}
	for _, l := range m.Library {
		field("library", "%s allocated %s for itself (%s): left out of diff, verify, nan and digests", l.Owner, FormatBytes(l.Bytes), Count(l.Allocations, "allocation"))
	}
}

// waitedFor is what memory capture's backpressure waits for: staging space for
// snapshots, room in the ring of chunk hashes in flight in hash mode.
func (m *Memory) waitedFor() string {
	if m.StagingBytes > 0 {
		return "staging space"
	}
	return "room for hashes in flight"
}

// writeSetsLine says what write sets saved: what was carried rather than hashed, or, in a
// recording that hashed every region, what proved read-only would have carried.
func (m *Memory) writeSetsLine(field func(name, format string, args ...any)) {
	readOnly := fmt.Sprintf("%s of the %s of regions captured after their launches (%s) are in regions the kernels' PTX proves they only read (Triton's)",
		FormatBytes(m.ProvedReadOnlyBytes), FormatBytes(m.RegionBytes), percent(m.ProvedReadOnlyBytes, m.RegionBytes))
	switch m.WriteSets {
	case "":
		if m.ProvedReadOnlyBytes > 0 {
			field("read-only", "%s; recorded before write sets (format 1.11), so they were hashed", readOnly)
		}
	case "all":
		if m.ProvedReadOnlyBytes > 0 {
			field("write sets", "all: every region hashed after every launch; %s, which --write-sets proved would carry", readOnly)
		} else {
			field("write sets", "all: every region hashed after every launch")
		}
	default:
		line := fmt.Sprintf("%s: %s of the %s of regions captured after their launches (%s) carried, not hashed: %s proved read-only, %d learned",
			m.WriteSets, FormatBytes(m.BytesCarried), FormatBytes(m.RegionBytes), percent(m.BytesCarried, m.RegionBytes),
			Count(m.RegionsCarriedProved, "region"), m.RegionsCarriedLearned)
		if m.WriteSets == "learned" {
			line += fmt.Sprintf("; %s (every %s launch of a kernel), %s", Count(m.WriteSetAudits, "audit"), Ordinal(m.AuditEvery), Count(m.WriteSetMisses, "miss"))
		}
		if m.RegionsCarriedUnknown > 0 {
			line += fmt.Sprintf("; %d unknown", m.RegionsCarriedUnknown)
		}
		field("write sets", "%s", line)
	}
}

// Ordinal writes n as 1st, 2nd, 3rd, 4th ...
func Ordinal(n uint32) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// configText is how memory capture was asked for, in one line.
func (m *Memory) configText() string {
	parts := []string{m.Mode + " mode"}
	if m.Mode == recording.MemorySnapshot {
		var which []string
		if m.SnapshotKernels != "" {
			which = append(which, fmt.Sprintf("kernels matching %q", m.SnapshotKernels))
		}
		if m.SnapshotLaunches != "" {
			which = append(which, "launches "+m.SnapshotLaunches)
		}
		if len(which) == 0 {
			which = append(which, "every launch")
		}
		parts[0] += " (snapshots of " + strings.Join(which, ", in ") + "; hashes of the others)"
	}
	parts = append(parts, FormatBytes(uint64(m.ChunkBytes))+" chunks")
	if m.StagingBytes > 0 {
		parts = append(parts, fmt.Sprintf("staging ring %s (%s when full)", FormatBytes(m.StagingBytes), m.OnFull))
	} else {
		parts = append(parts, fmt.Sprintf("%s when the hashes in flight fill their ring", m.OnFull))
	}
	if m.FlightRecorder > 0 {
		parts = append(parts, fmt.Sprintf("flight recorder of the last %d launches", m.FlightRecorder))
	}
	if len(m.NanScan) > 0 {
		parts = append(parts, "NaN and Inf counted as "+strings.Join(m.NanScan, ", "))
	}
	return strings.Join(parts, ", ")
}

func percent(n, of uint64) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}
