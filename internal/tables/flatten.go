package tables

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gpurr/gpurr/recording"
	"github.com/gpurr/gpurr/recording/memhash"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Options say which tables Flatten fills and where their rows go.
type Options struct {
	// Tables are the tables to fill; records no table needs are skipped.
	Tables []*Table
	// Row receives each row, values in the order of t.Columns. values is
	// reused for the next row: copy what you keep. An error ends the pass.
	Row func(t *Table, values []Value) error
	// Frames, when above 0, reads only the first Frames frames: a second
	// pass over a recording that is still being written sees what the
	// first did.
	Frames int
}

// Result says how a pass ended.
type Result struct {
	recording.ScanResult
	// Complete says the recording holds its End record: the process
	// ended normally and the recording was closed.
	Complete bool
	// Stats are the process's last counters (empty when it wrote none).
	Stats *pb.Stats
	// RangePaths warns that NVTX range paths were shortened (recording.Ranges.PathWarning);
	// "" when none was.
	RangePaths string
}

// Flatten reads one process's recording once, frame by frame, and hands
// each row of the tables in o to o.Row, as the records come. Memory holds
// what joins records that come apart: launch calls and kernels waiting for
// each other (recording.Join's bounded window), the program's kernels,
// callstacks and captured launches, the regions of launches whose memory
// states have not come yet, and, for the allocations table only, each
// allocation until the end. It does not grow with the number of launches,
// but where the states a launch's plan promised never come (a flight
// recorder keeps only the last launches' snapshots): those launches'
// regions stay until the end. NVTX ranges are held while open: a range's
// row comes when its end is read, and those never closed come last.
//
// Within a table, rows come in the order of the records they are made of,
// but for kernels that came before their launch call (they come with it)
// and rows that need the whole recording (processes, stats, allocations),
// which come last. An error reading the recording names its file; rows
// handed over before it stand.
func Flatten(p *recording.Process, o Options) (Result, error) {
	ps, err := newPass(p, o)
	if err != nil {
		return Result{}, err
	}
	res, err := p.Scan(func(b *pb.Batch) error {
		if o.Frames > 0 && ps.frames == o.Frames {
			return errEnough
		}
		ps.frames++
		return ps.batch(b)
	})
	if errors.Is(err, errEnough) {
		res, err = recording.ScanResult{Frames: ps.frames}, nil
	}
	if err != nil {
		return Result{ScanResult: res}, err
	}
	out := Result{ScanResult: res, Complete: ps.end != nil, Stats: cmp.Or(ps.stat, &pb.Stats{}), RangePaths: ps.ranges.PathWarning(p.Name)}
	return out, ps.finish(out)
}

var errEnough = errors.New("read the frames asked for")

// pass is one process's flattening.
type pass struct {
	o      Options
	want   []bool // by table id
	vals   []Value
	err    error
	frames int

	name string
	proc *pb.Process // the last Process record (they do not change)
	end  *pb.End
	stat *pb.Stats

	links     *recording.Links
	ranges    *recording.Ranges        // NVTX ranges open, for launches' paths
	join      *recording.Join[callRef] // nil when no table needs GPU activity joined
	kernels   map[uint64]*kernelInfo
	lineCache map[uint64]lineText
	steps     *recording.Stepper
	held      map[uint64]*held // launches whose memory states are still to come
	allocs    *allocationIndex // nil when the allocations table is not filled
	probes    *recording.Probes
	timeline  *recording.Timeline // nil when torn_states is not filled

	// Copies and waits wait for the end, to be joined to their calls.
	hostCalls recording.HostCalls
	copies    []*pb.Copy
	syncs     []*pb.Sync

	// The records of the most frequent rows, reused row after row rather
	// than allocated for each (Row copies what it keeps).
	scratch struct {
		call   callRec
		run    run
		state  stateRow
		region regionRec
		chunk  chunkRec
	}
}

func newPass(p *recording.Process, o Options) (*pass, error) {
	steps, err := recording.ProcessStepper(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", p.Dir, err)
	}
	ps := bare(p.Name, o)
	ps.links, ps.ranges, ps.kernels, ps.lineCache = p.NewLinks(), recording.NewRanges(), map[uint64]*kernelInfo{}, map[uint64]lineText{}
	ps.held, ps.steps, ps.probes = map[uint64]*held{}, steps, recording.NewProbes()
	ps.hostCalls = recording.HostCalls{}
	if ps.wants(gpuActivity.Table) {
		ps.join = recording.NewJoin(ps.kernelRun, nil)
	}
	if ps.wants(allocations.Table) {
		ps.allocs = &allocationIndex{allocated: map[uint64]*pb.Allocation{}, freed: map[uint64]*pb.Allocation{}}
	}
	if ps.wants(tornStates.Table) {
		ps.timeline = recording.NewTimeline()
	}
	return ps, nil
}

// bare is a pass of process name that reads no records.
func bare(name string, o Options) *pass {
	ps := &pass{o: o, want: make([]bool, len(Query)), vals: make([]Value, maxColumns), name: name}
	for _, t := range o.Tables {
		ps.want[t.id] = true
	}
	return ps
}

// Unreadable hands o.Row the processes row of a process whose events file cannot be read
// at all (recording.Set.Damaged), if o asks for that table: its directory name, the host,
// pid and rank the name gives (see docs/format.md), and readable 0; no other table has a
// row of it.
func Unreadable(name string, o Options) error {
	ps := bare(name, o)
	emit(ps, processes, unreadableRow(name))
	return ps.err
}

// NameInfo is what a process directory's name gives of the process whose events file cannot
// be read (Unreadable): its host name, pid and rank, where the name gives them.
func NameInfo(name string) *pb.Process { return unreadableRow(name).p }

// unreadableRow reads a process directory's name, [rank<R>-]<hostname>-<pid>[+<n>].
func unreadableRow(name string) *procRow {
	r := &procRow{p: &pb.Process{}, unreadable: true}
	base := name
	if i := strings.LastIndexByte(base, '+'); i > 0 {
		if _, err := strconv.ParseUint(base[i+1:], 10, 32); err == nil {
			base = base[:i]
		}
	}
	i := strings.LastIndexByte(base, '-')
	if i <= 0 {
		return r
	}
	pid, err := strconv.ParseUint(base[i+1:], 10, 32)
	if err != nil {
		return r
	}
	r.named, r.p.Pid, r.p.Hostname = true, uint32(pid), base[:i]
	if rest, ok := strings.CutPrefix(r.p.Hostname, "rank"); ok {
		if j := strings.IndexByte(rest, '-'); j > 0 {
			if rank, err := strconv.ParseInt(rest[:j], 10, 32); err == nil {
				r32 := int32(rank)
				r.p.Rank, r.p.Hostname = &r32, rest[j+1:]
			}
		}
	}
	return r
}

func (ps *pass) wants(ts ...*Table) bool {
	for _, t := range ts {
		if ps.want[t.id] {
			return true
		}
	}
	return false
}

// emit hands a row of t, made of r, to the reader, if it asked for t. The
// first error stops every later row.
func emit[R any](ps *pass, t *table[R], r *R) {
	if ps.err != nil || !ps.want[t.id] {
		return
	}
	v := ps.vals[:len(t.get)]
	for i, get := range t.get {
		v[i] = get(ps, r)
	}
	ps.err = ps.o.Row(t.Table, v)
}

// The records rows are made of, beyond those of the format itself.
type (
	// kernelInfo is a kernel as launches and kernel executions repeat it.
	kernelInfo struct {
		k         *pb.Kernel
		identity  string // 16 hex digits
		demangled string // Links.KernelName
	}
	paramRec struct {
		k *pb.Kernel
		i int
		p *pb.ParamInfo
	}
	stackRec struct {
		c    *pb.Callstack
		text string
	}
	frameRec struct {
		c *pb.Callstack
		i int
		f *pb.Frame
	}
	// callRec is a launch call: a launch (l) or a graph launch (g), and
	// the fields the two share.
	callRec struct {
		l     *pb.Launch
		g     *pb.GraphLaunch
		k     *kernelInfo // the launch's kernel; nil when unknown
		lines uint64      // the callstack its lines come from (Links.LineCallstack)

		seq, stream, hostNS, callstack uint64
		rangeID                        uint64
		tid, device, streamID          uint32
		correlationID                  uint32
		result                         int32
		step                           int // training step (recording.Stepper)
	}
	regionRec struct {
		l *pb.Launch
		i int
		r *pb.Region
	}
	// callRef is what a kernel execution needs of the launch or replay
	// whose code it ran, kept while the call waits for its kernels.
	callRef struct {
		seq, lines, kernel uint64
		replay             bool
	}
	// run is a kernel execution joined to its launch and replay.
	run struct {
		a         *pb.KernelActivity
		launch    callRef // the launch whose code it ran, when hasLaunch
		hasLaunch bool
		replay    uint64 // graph kernels: the replay that ran it, when hasReplay
		hasReplay bool
		// xlaLines: a graph kernel without a launch, whose launch.lines are its XLA
		// fusion's (Links.KernelLineCallstack).
		xlaLines bool
	}
	// stateRow is a region of a memory state: i is -1, and rs and r nil,
	// on a row that stands for a state without regions.
	stateRow struct {
		st *pb.MemoryState
		i  int
		rs *pb.RegionState // nil when the state holds none for the region
		r  *pb.Region      // the launch's region; nil when unknown
	}
	nanRec struct {
		st       *pb.MemoryState
		i        int
		dtype    string
		nan, inf uint64
	}
	chunkRec struct {
		st        *pb.MemoryState
		region, n int
		offset    uint64
		hash      []byte
	}
	// digestRow is an allocation of a step digest; rs and r are nil on the row of a lost one.
	digestRow struct {
		st *pb.MemoryState
		rs *pb.RegionState
		r  *pb.Region
	}
	allocRec struct {
		id           uint64
		alloc, freed *pb.Allocation
		first        *pb.Allocation // alloc, else freed
	}
	probeLaunchRec struct {
		p             recording.Probed
		ctas, missing int
	}
	probeCTARec struct {
		seq  uint64
		grid *pb.Dim3 // nil when the launch is unknown
		c    recording.ProbeCTA
	}
	probeKernelRec struct {
		k    *pb.ProbeKernel
		name string
	}
	missRec struct {
		m    *pb.WriteSetMiss
		name string // the kernel's demangled name, "" when unknown
	}
	// procRow is the processes table's row.
	procRow struct {
		p          *pb.Process
		end        *pb.End
		truncated  bool
		frames     int
		unreadable bool // the events file cannot be read: p holds what the name gives
		named      bool // its name gave its host and pid
	}
)

// held are the regions of a launch whose memory states are still to
// come: the states' regions are in their order (StateRegion).
type held struct {
	regions       []*pb.Region
	snapshot      bool
	before, after bool
}

// allocationIndex keeps each allocation until the end of the recording,
// when its row is written with its free.
type allocationIndex struct {
	order            []uint64 // ids, first seen first
	allocated, freed map[uint64]*pb.Allocation
}

// lineText are a callstack's python_line and user_line.
type lineText struct{ python, user string }

func (ps *pass) batch(b *pb.Batch) error {
	if b.Process != nil {
		ps.proc = b.Process
	}
	ps.links.Add(b, false)
	if ps.timeline != nil {
		ps.timeline.Add(b)
	}
	for _, d := range b.Devices {
		emit(ps, devices, d)
	}
	for _, m := range b.Modules {
		emit(ps, modules, m)
	}
	for _, k := range b.Kernels {
		ps.kernel(k)
	}
	for _, c := range b.Callstacks {
		ps.callstack(c)
	}
	ps.ranges.Add(b)
	ps.steps.Add(b)
	for _, n := range b.GraphNodes {
		emit(ps, graphNodes, n)
	}
	recording.EachCall(b, ps.launch, ps.graphLaunch)
	for _, r := range ps.ranges.TakeClosed() {
		emit(ps, rangesTable, r)
	}
	if ps.join != nil {
		for _, a := range b.Activities {
			ps.fail(ps.join.Kernel(a))
		}
	}
	for _, a := range b.OwnActivities {
		emit(ps, gpurrActivity, a)
	}
	for _, h := range b.HostCalls {
		emit(ps, hostCallsTable, h)
	}
	if ps.wants(copiesTable.Table, syncsTable.Table) {
		ps.hostCalls.Add(b.HostCalls)
		ps.copies = append(ps.copies, b.Copies...)
		ps.syncs = append(ps.syncs, b.Syncs...)
	}
	if ps.allocs != nil {
		for _, a := range b.Allocations {
			ps.allocs.add(a)
		}
	}
	for _, st := range b.Memory {
		ps.memoryState(st)
	}
	ps.probeRecords(b)
	for _, st := range b.Digests {
		if !ps.want[digests.id] {
			break
		}
		if st.GetLost() || len(st.GetRegions()) == 0 {
			emit(ps, digests, &digestRow{st: st})
		}
		for i, rs := range st.GetRegions() {
			r := &digestRow{st: st, rs: rs}
			if i < len(st.GetDigestRegions()) {
				r.r = st.GetDigestRegions()[i]
			}
			emit(ps, digests, r)
		}
	}
	ps.copyStates(b)
	for _, m := range b.WriteSetMisses {
		r := &missRec{m: m}
		if info := ps.kernels[m.GetKernelId()]; info != nil {
			r.name = info.demangled
		}
		emit(ps, writeSetMisses, r)
	}
	for _, e := range b.Log {
		emit(ps, logs, e)
	}
	if b.Stats != nil {
		ps.stat = b.Stats
	}
	if b.End != nil {
		ps.end = b.End
	}
	if ps.join != nil {
		ps.fail(ps.join.Trim())
	}
	return ps.err
}

func (ps *pass) fail(err error) {
	if ps.err == nil {
		ps.err = err
	}
}

// finish writes what waited for the end of the recording.
func (ps *pass) finish(res Result) error {
	if ps.join != nil {
		ps.fail(ps.join.Flush())
	}
	if ps.allocs != nil {
		for _, id := range ps.allocs.order {
			r := &allocRec{id: id, alloc: ps.allocs.allocated[id], freed: ps.allocs.freed[id]}
			r.first = cmp.Or(r.alloc, r.freed)
			emit(ps, allocations, r)
		}
	}
	for _, r := range ps.ranges.Open() {
		emit(ps, rangesTable, r)
	}
	for _, c := range ps.copies {
		emit(ps, copiesTable, &copyRow{c: c, call: ps.hostCalls.Of(c.GetCorrelationId())})
	}
	for _, s := range ps.syncs {
		emit(ps, syncsTable, &syncRow{s: s, call: ps.hostCalls.Of(s.GetCorrelationId())})
	}
	if ps.timeline != nil {
		torn := ps.timeline.Torn()
		keys := slices.SortedFunc(maps.Keys(torn), func(a, b recording.StateKey) int {
			return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Point, b.Point))
		})
		for _, k := range keys {
			for _, t := range torn[k] {
				emit(ps, tornStates, &tornRec{key: k, tear: t})
			}
		}
	}
	p := ps.proc
	if p == nil {
		p = &pb.Process{}
	}
	emit(ps, processes, &procRow{p: p, end: ps.end, truncated: res.Truncated, frames: res.Frames})
	st := ps.stat
	if st == nil {
		st = &pb.Stats{}
	}
	emit(ps, stats, st)
	return ps.err
}

func (ps *pass) kernel(k *pb.Kernel) {
	info := &kernelInfo{k: k, identity: fmt.Sprintf("%016x", k.GetIdentity()), demangled: ps.links.KernelName(k)}
	ps.kernels[k.GetId()] = info
	emit(ps, kernels, info)
	for i, p := range k.GetParams() {
		emit(ps, kernelParams, &paramRec{k: k, i: i, p: p})
	}
}

func (ps *pass) callstack(c *pb.Callstack) {
	if ps.wants(callstacks.Table, frames.Table) {
		var text strings.Builder
		for i, f := range c.GetFrames() {
			if i > 0 {
				text.WriteByte('\n')
			}
			text.WriteString(recording.FrameText(f))
			emit(ps, frames, &frameRec{c: c, i: i, f: f})
		}
		emit(ps, callstacks, &stackRec{c: c, text: text.String()})
	}
}

// lines are a callstack's python_line and user_line, "" when it has none;
// computed once per callstack however many launches share it.
func (ps *pass) lines(id uint64) lineText {
	if v, ok := ps.lineCache[id]; ok {
		return v
	}
	v := lineText{ps.links.PythonLine(id), ps.links.UserLine(id)}
	if ps.links.Callstack(id) != nil {
		ps.lineCache[id] = v
	}
	return v
}

func (ps *pass) launch(l *pb.Launch) {
	r := &ps.scratch.call
	*r = callRec{l: l, k: ps.kernels[l.GetKernelId()], lines: ps.links.LineCallstack(l),
		seq: l.GetSeq(), stream: l.GetStream(), hostNS: l.GetHostNs(), callstack: l.GetCallstackId(), tid: l.GetTid(),
		device: l.GetDevice(), streamID: l.GetStreamId(), correlationID: l.GetCorrelationId(), result: l.GetResult(),
		rangeID: l.GetRangeId(), step: ps.steps.Launch(l)}
	emit(ps, launches, r)
	for i, region := range l.GetRegions() {
		rr := &ps.scratch.region
		*rr = regionRec{l: l, i: i, r: region}
		emit(ps, regions, rr)
	}
	if ps.join != nil && !l.GetCaptured() {
		ps.fail(ps.join.Call(l.GetCorrelationId(), callRef{seq: l.GetSeq(), lines: r.lines, kernel: l.GetKernelId()}, false))
	}
	if ps.wants(memoryStates.Table) {
		// Its states come in later frames: keep its regions until they do.
		switch plan := l.GetMemory(); {
		case plan.GetStatus() == pb.MemoryPlan_HASH,
			plan == nil && ps.proc.GetMemory().GetMode() != "": // a writer that left the plan out: an AFTER state may come
			ps.held[l.GetSeq()] = &held{regions: l.GetRegions()}
		case plan.GetStatus() == pb.MemoryPlan_SNAPSHOT:
			ps.held[l.GetSeq()] = &held{regions: l.GetRegions(), snapshot: true}
		}
	}
}

func (ps *pass) graphLaunch(g *pb.GraphLaunch) {
	r := &ps.scratch.call
	*r = callRec{g: g, lines: g.GetCallstackId(),
		seq: g.GetSeq(), stream: g.GetStream(), hostNS: g.GetHostNs(), callstack: g.GetCallstackId(), tid: g.GetTid(),
		device: g.GetDevice(), streamID: g.GetStreamId(), correlationID: g.GetCorrelationId(), result: g.GetResult(),
		rangeID: g.GetRangeId(), step: ps.steps.GraphLaunch(g)}
	emit(ps, graphLaunches, r)
	if ps.join != nil {
		ps.fail(ps.join.Call(g.GetCorrelationId(), callRef{seq: g.GetSeq(), lines: g.GetCallstackId(), replay: true}, true))
	}
}

// kernelRun writes a kernel execution, joined to its call (ok) or not.
// An eager kernel ran its call's code; a graph kernel ran the code of the
// launch that captured its node, and its call is the replay.
func (ps *pass) kernelRun(a *pb.KernelActivity, call callRef, ok bool) error {
	r := &ps.scratch.run
	*r = run{a: a}
	if a.GetGraphId() == 0 {
		r.launch, r.hasLaunch = call, ok && !call.replay
	} else {
		if l := ps.links.CaptureLaunch(a); l != nil {
			r.launch = callRef{seq: l.GetSeq(), lines: ps.links.LineCallstack(l), kernel: l.GetKernelId()}
			r.hasLaunch = true
		} else if id := ps.links.KernelLineCallstack(a); id != 0 {
			r.launch.lines, r.xlaLines = id, true
		}
		r.replay, r.hasReplay = call.seq, ok && call.replay
	}
	emit(ps, gpuActivity, r)
	return ps.err
}

func (a *allocationIndex) add(r *pb.Allocation) {
	id := r.GetId()
	if a.allocated[id] == nil && a.freed[id] == nil {
		a.order = append(a.order, id)
	}
	if r.GetFreed() {
		a.freed[id] = r
	} else {
		a.allocated[id] = r
	}
}

// memoryState writes a memory state's rows. memory_states has a row per
// region of the state; a state that holds no region states (it was lost)
// gets a row per region of its launch, or one row when the launch's
// regions are unknown.
func (ps *pass) memoryState(st *pb.MemoryState) {
	h := ps.held[st.GetLaunchSeq()]
	var launchRegions []*pb.Region
	if h != nil {
		launchRegions = h.regions
		switch st.GetPoint() {
		case pb.MemoryState_BEFORE:
			h.before = true
		case pb.MemoryState_AFTER:
			h.after = true
		}
		// A lost state stands for both points of its job.
		if st.GetLost() || h.after && (h.before || !h.snapshot) {
			delete(ps.held, st.GetLaunchSeq())
		}
	}
	region := func(i int) *pb.Region {
		if i < len(launchRegions) {
			return launchRegions[i]
		}
		return nil
	}
	if len(st.GetRegions()) == 0 {
		if len(launchRegions) == 0 {
			ps.stateRow(memoryStates, stateRow{st: st, i: -1})
		}
		for i := range launchRegions {
			ps.stateRow(memoryStates, stateRow{st: st, i: i, r: region(i)})
		}
	}
	nanScan := ps.proc.GetMemory().GetNanScan()
	chunkBytes := uint64(cmp.Or(ps.proc.GetMemory().GetChunkBytes(), memhash.ChunkSize))
	for i, rs := range st.GetRegions() {
		for k := range min(len(nanScan), len(rs.GetNanCount()), len(rs.GetInfCount())) {
			if nan, inf := rs.GetNanCount()[k], rs.GetInfCount()[k]; nan+inf > 0 {
				emit(ps, nanCounts, &nanRec{st: st, i: i, dtype: nanScan[k], nan: nan, inf: inf})
			}
		}
		ps.stateRow(memoryStates, stateRow{st: st, i: i, rs: rs, r: region(i)})
		if ps.want[memoryChunks.id] {
			for n, hash := range recording.ChunkHashes(rs) {
				c := &ps.scratch.chunk
				*c = chunkRec{st: st, region: i, n: n, offset: uint64(n) * chunkBytes, hash: hash}
				emit(ps, memoryChunks, c)
			}
		}
	}
}

// probeRecords writes a batch's probe kernels, and its probe results with their CTAs.
func (ps *pass) probeRecords(b *pb.Batch) {
	for _, k := range b.ProbeKernels {
		r := &probeKernelRec{k: k}
		if info := ps.kernels[k.GetKernelId()]; info != nil {
			r.name = info.demangled
		}
		emit(ps, probeKernels, r)
	}
	if !ps.wants(probeLaunches.Table, probeCTAs.Table) {
		return
	}
	for _, p := range ps.probes.Add(b) {
		ctas, missing := recording.ProbeCTAs(p.GetCtas())
		emit(ps, probeLaunches, &probeLaunchRec{p: p, ctas: len(ctas) + missing, missing: missing})
		for _, c := range ctas {
			emit(ps, probeCTAs, &probeCTARec{seq: p.GetLaunchSeq(), grid: p.Launch.GetGrid(), c: c})
		}
	}
}

// xyz is the CTA's coordinate on axis (0 x, 1 y, 2 z), NULL when its grid is unknown.
func (r *probeCTARec) xyz(axis int) Value {
	if r.grid == nil {
		return Null
	}
	x, y, z := r.c.XYZ(r.grid.GetX(), r.grid.GetY())
	return Int([]uint32{x, y, z}[axis])
}

func (ps *pass) stateRow(t *table[stateRow], r stateRow) {
	ps.scratch.state = r
	emit(ps, t, &ps.scratch.state)
}
