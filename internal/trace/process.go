package trace

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// call is a launch call (cuLaunchKernel and friends, or cuGraphLaunch)
// whose kernels may still arrive: what its slice and its kernels' slices
// need of it, without the parameter bytes and regions of the record.
type call struct {
	corr      uint32
	seq       uint64
	tid       uint32
	hostNS    uint64
	endNS     uint64 // when the call returned (format 1.15); 0 unknown: its slice is an instant
	api       uint32
	graph     bool
	graphExec uint64
	kernel    uint64 // Kernel.id
	grid      [3]uint32
	block     [3]uint32
	smem      uint32
	streamID  uint32
	device    uint32
	rng       string // the path of the NVTX range it was made in, "" none
	origin
	drop    bool   // left out by --launches or --kernels: so are its kernels
	written bool   // its slice has been written
	flow    uint64 // the flow its slice starts; 0 when none
}

// origin is where a launch call came from: its callstack, and the one its
// lines are read from (Links.LineCallstack), which for a launch made inside
// an autograd node's backward is the forward launch's; node names that
// node, "" in forward.
type origin struct {
	callstack, lines uint64
	node             string
}

func (ps *procState) originOf(l *pb.Launch) origin {
	return origin{callstack: l.GetCallstackId(), lines: ps.links.LineCallstack(l), node: l.GetAutograd().GetBackwardNode()}
}

// lineArgs appends the arguments that name an origin's line: python_line,
// and for a backward launch backward_node and the Python line of its own
// stack, if it has one, as backward_python_line.
func (ps *procState) lineArgs(out []arg, o origin) []arg {
	if line := ps.links.PythonLine(o.lines); line != "" {
		out = append(out, str("python_line", line))
	}
	if o.node == "" {
		return out
	}
	out = append(out, str("backward_node", o.node))
	if o.lines != o.callstack {
		if line := ps.links.PythonLine(o.callstack); line != "" {
			out = append(out, str("backward_python_line", line))
		}
	}
	return out
}

// stackArgs appends an origin's callstack, and the forward launch's of a
// backward launch as forward_callstack.
func (ps *procState) stackArgs(out []arg, o origin) []arg {
	if text := ps.callstack(o.callstack); text != "" {
		out = append(out, str("callstack", text))
	}
	if o.lines != o.callstack {
		if text := ps.callstack(o.lines); text != "" {
			out = append(out, str("forward_callstack", text))
		}
	}
	return out
}

// procState streams one process's recording onto the timeline.
type procState struct {
	tw      *writer
	idx     int
	pid     uint32 // the recorded process's own pid
	proc    *process
	offset  int64
	links   *recording.Links
	join    *recording.Join[*call] // launch calls and kernels waiting for each other
	threads map[uint32]*track
	streams map[[2]uint32]*track // device, CUPTI stream id
	own     map[uint32]*track    // device
	ntracks uint64
	stacks  map[uint64]string    // callstack text by id
	dims    map[[3]uint32]string // "x,y,z" of the grids and blocks seen
	sl      slice                // the slice being written (sinks do not keep it)
	ranges  *recording.Ranges    // NVTX ranges not yet closed
	spans   *track               // start/end NVTX ranges, which do not nest on a thread
	last    uint64               // the latest time read, recording clock: where ranges never closed end

	// Live probes (gpurr record --probe): a launch's CTAs go on SM tracks, placed where its
	// kernel started on the GPU, so a result waits for its kernel (or the end).
	probes    *recording.Probes
	probeWait map[uint64]recording.Probed // results waiting for their kernel, by launch seq
	started   map[uint64]uint64           // kernels of probed launches that came first: GPU start by seq
	sms       map[[2]uint32]*track        // device, SM
	gpuTimed  bool                        // kernels' GPU times were recorded, or some kernel came
	sampled   bool                        // GPU timing was sampled (by steps or in windows): launches may be untimed

	copies copyRecords // copies, memsets, waits and their calls, written at the end
}

func (tw *writer) process(idx int, p *recording.Process) error {
	info := p.Info
	name := processName(info)
	if tw.shared[name] {
		name += " " + p.Dir
	}
	ps := &procState{
		tw:      tw,
		idx:     idx,
		pid:     info.GetPid(),
		proc:    &process{pid: idx + 1, uuid: uint64(idx+1) << 32, name: name, argv: info.GetArgv()},
		offset:  tw.clock.offset[idx],
		links:   p.NewLinks(),
		threads: map[uint32]*track{},
		streams: map[[2]uint32]*track{},
		own:     map[uint32]*track{},
		stacks:  map[uint64]string{},
		dims:    map[[3]uint32]string{},
		ranges:  recording.NewRanges(),
		probes:  recording.NewProbes(), probeWait: map[uint64]recording.Probed{}, started: map[uint64]uint64{},
		sms: map[[2]uint32]*track{}, gpuTimed: info.GetGpuTiming(), sampled: info.GetGpuTimingSample() != "",
	}
	ps.join = recording.NewJoin(func(a *pb.KernelActivity, c *call, _ bool) error { return ps.kernel(a, c) }, ps.leave)
	ps.join.MaxCalls, ps.join.MaxKernels = tw.maxPending, tw.maxEarly
	tw.stats.Processes++
	var err error
	ended := false
	stats := &pb.Stats{}
	res, serr := p.Scan(func(b *pb.Batch) error {
		ended = ended || b.End != nil
		stats = cmp.Or(b.Stats, stats)
		err = ps.batch(b)
		return err
	})
	if err != nil {
		return err // writing the timeline failed
	}
	if serr != nil {
		// Reading the recording failed: what came before is on the timeline.
		if ferr := ps.flush(); ferr != nil {
			return ferr
		}
		return &damagedError{name: p.Name, err: serr}
	}
	if short := recording.Shortfall(p.Name, res.Truncated, ended); short != "" {
		tw.stats.Shortfalls = append(tw.stats.Shortfalls, short)
	}
	if lost := recording.LossWarning(p.Name, stats); lost != "" {
		tw.stats.Shortfalls = append(tw.stats.Shortfalls, lost)
	}
	if paths := ps.ranges.PathWarning(p.Name); paths != "" {
		tw.stats.Shortfalls = append(tw.stats.Shortfalls, paths)
	}
	return ps.flush()
}

// damagedError is a process whose recording could not be read to its end.
type damagedError struct {
	name string
	err  error
}

func (e *damagedError) Error() string { return e.err.Error() }
func (e *damagedError) Unwrap() error { return e.err }

// batch adds one frame's records.
func (ps *procState) batch(b *pb.Batch) error {
	ps.links.Add(b, false)
	ps.ranges.Add(b)
	for _, r := range b.Ranges {
		ps.last = max(ps.last, r.GetStartNs(), r.GetEndNs())
	}
	for _, e := range b.RangeEnds {
		ps.last = max(ps.last, e.GetEndNs())
	}
	for _, r := range ps.ranges.TakeClosed() {
		if err := ps.writeRange(r, r.GetEndNs()); err != nil {
			return err
		}
	}
	if b.End != nil {
		ps.last = max(ps.last, b.End.GetEndNs())
	}
	for _, l := range b.Launches {
		if err := ps.launch(l); err != nil {
			return err
		}
	}
	for _, g := range b.GraphLaunches {
		c := &call{corr: g.GetCorrelationId(), seq: g.GetSeq(), tid: g.GetTid(), hostNS: g.GetHostNs(), api: 514, graph: true,
			graphExec: g.GetGraphExec(), streamID: g.GetStreamId(), device: g.GetDevice(), rng: ps.ranges.Path(g.GetRangeId()),
			origin: origin{callstack: g.GetCallstackId(), lines: g.GetCallstackId()}}
		c.drop = ps.tw.opts.Launches != nil && !ps.tw.opts.Launches(c.seq)
		if err := ps.join.Call(c.corr, c, true); err != nil {
			return err
		}
	}
	for _, a := range b.Activities {
		if err := ps.join.Kernel(a); err != nil {
			return err
		}
	}
	for _, a := range b.OwnActivities {
		if err := ps.ownKernel(a); err != nil {
			return err
		}
	}
	ps.copies.add(b)
	if err := ps.join.Trim(); err != nil {
		return err
	}
	for _, p := range ps.probes.Add(b) {
		if err := ps.probed(p); err != nil {
			return err
		}
	}
	return nil
}

// launch handles a Launch record: a captured one is written at once (it
// built a graph node and ran nothing); any other waits for its kernel.
func (ps *procState) launch(l *pb.Launch) error {
	ps.last = max(ps.last, l.GetHostNs())
	c := &call{corr: l.GetCorrelationId(), seq: l.GetSeq(), tid: l.GetTid(), hostNS: l.GetHostNs(), endNS: l.GetEndNs(), api: l.GetApi(),
		kernel: l.GetKernelId(), grid: dim3(l.GetGrid()), block: dim3(l.GetBlock()), smem: l.GetSharedMemBytes(),
		streamID: l.GetStreamId(), device: l.GetDevice(), rng: ps.ranges.Path(l.GetRangeId()), origin: ps.originOf(l)}
	o := ps.tw.opts
	c.drop = o.Launches != nil && !o.Launches(c.seq)
	if !c.drop && o.Kernels != nil {
		k := ps.links.Kernel(c.kernel)
		c.drop = k == nil || !o.Kernels.MatchString(k.GetName()) && !o.Kernels.MatchString(ps.links.KernelName(k))
	}
	if l.GetCaptured() {
		if c.drop {
			return nil
		}
		return ps.writeCall(c, 0, str("captured", fmt.Sprintf("graph node 0x%x", l.GetGraphNodeId())))
	}
	if ps.sampled {
		ps.tw.stats.Sampled++
		if l.GetUntimed() {
			ps.tw.stats.Untimed++
		}
	}
	// The call waits for its kernel; one that came first is joined now.
	// (In a recording without GPU timing, calls wait for nothing until the
	// window is full: the price of not trusting a flag to say that no
	// kernel will come.)
	return ps.join.Call(c.corr, c, false)
}

// leave writes the slice of a call that leaves the join, if no kernel
// did.
func (ps *procState) leave(c *call) error {
	if c.written || c.drop {
		return nil
	}
	return ps.writeCall(c, 0)
}

// flush writes what is still waiting at the end of the recording: calls
// and kernels, and the ranges never closed, which end at the last time read.
func (ps *procState) flush() error {
	if err := ps.join.Flush(); err != nil {
		return err
	}
	if err := ps.writeCopies(); err != nil {
		return err
	}
	// Probed launches whose kernel never came: on the launch call's time.
	waiting := slices.Sorted(maps.Keys(ps.probeWait))
	for _, seq := range waiting {
		p := ps.probeWait[seq]
		if err := ps.writeCTAs(p, p.Launch.GetHostNs(), "launch call"); err != nil {
			return err
		}
	}
	for _, r := range ps.ranges.Open() {
		if err := ps.writeRange(r, max(ps.last, r.GetStartNs())); err != nil {
			return err
		}
	}
	return nil
}

// writeRange writes an NVTX range ending at end: a push/pop range on its
// thread's track, where the launch calls made in it nest under it, a
// start/end range on the process's track of those (they may overlap).
func (ps *procState) writeRange(r *recording.Range, end uint64) error {
	ts, dur := ps.ts(r.GetStartNs()), int64(end-r.GetStartNs())
	if !ps.tw.inWindow(ts, dur) {
		return nil
	}
	s := ps.newSlice(recording.RangeName(r.Range), "nvtx", ts, dur)
	s.args = append(s.args, num("range", int64(r.GetId())), str("path", r.Path))
	if d := r.GetDomain(); d != "" {
		s.args = append(s.args, str("domain", d))
	}
	if c := r.GetCategory(); c != 0 {
		s.args = append(s.args, num("category", int64(c)))
	}
	if r.GetEndNs() == 0 {
		s.args = append(s.args, str("end", "never closed: drawn to the end of the recording"))
	}
	ps.tw.stats.Ranges++
	if !r.GetPushed() {
		if ps.spans == nil {
			ps.spans = ps.newTrack("NVTX start/end ranges", 500)
		}
		s.args = append(s.args, num("tid", int64(r.GetTid())))
		return ps.place(ps.spans, s)
	}
	return ps.place(ps.thread(r.GetTid()), s)
}

func (ps *procState) ts(t uint64) int64 { return int64(t) + ps.offset }

// kernel writes a kernel execution; c is its launch call, nil when the
// recording does not hold it.
func (ps *procState) kernel(a *pb.KernelActivity, c *call) error {
	tw, o := ps.tw, ps.tw.opts
	if a.GetStartNs() == 0 || a.GetEndNs() < a.GetStartNs() {
		tw.stats.Skipped++
		return nil
	}
	ps.gpuTimed = true
	if c != nil && !c.graph {
		if err := ps.probeKernel(c.seq, a.GetStartNs()); err != nil {
			return err
		}
	}
	if c != nil && c.drop || c == nil && o.Launches != nil {
		return nil
	}
	name := ps.links.Demangle(a.GetName())
	if o.Kernels != nil && !o.Kernels.MatchString(a.GetName()) && !o.Kernels.MatchString(name) {
		return nil
	}
	ts, dur := ps.ts(a.GetStartNs()), int64(a.GetEndNs()-a.GetStartNs())
	if !tw.selected(ts, dur) {
		return nil
	}
	if c != nil && !c.written {
		if err := ps.writeCall(c, uint64(ps.idx+1)<<32|uint64(c.corr)); err != nil {
			return err
		}
	}
	s := ps.newSlice(name, "kernel", ts, dur)
	// The launch whose code this is: for a graph kernel, the launch that
	// captured it (its Python line is where the graph was built).
	var launch uint64
	var from origin
	switch {
	case a.GetGraphId() != 0:
		s.cat = "graph_kernel"
		tw.stats.GraphKernels++
		if captured := ps.links.CaptureLaunch(a); captured != nil {
			tw.stats.Attributed++
			launch, from = captured.GetSeq(), ps.originOf(captured)
		} else if id := ps.links.KernelLineCallstack(a); id != 0 {
			from = origin{lines: id} // a node of a command buffer XLA built itself
		}
	case c != nil:
		launch, from = c.seq, c.origin
	}
	if launch != 0 {
		s.args = append(s.args, num("launch", int64(launch)))
	}
	if c != nil && c.rng != "" {
		s.args = append(s.args, str("range", c.rng))
	}
	s.args = ps.lineArgs(s.args, from)
	if a.GetGraphId() != 0 {
		s.args = append(s.args, num("graph_id", int64(a.GetGraphId())), str("graph_node", fmt.Sprintf("0x%x", a.GetGraphNodeId())))
		if c != nil {
			s.args = append(s.args, num("graph_launch", int64(c.seq)))
			if line := ps.links.PythonLine(c.callstack); line != "" {
				s.args = append(s.args, str("replayed_at", line))
			}
		}
	}
	s.args = append(s.args, ps.dim("grid", dim3(a.GetGrid())), ps.dim("block", dim3(a.GetBlock())),
		num("smem", int64(a.GetSharedMemBytes())), num("static_smem", int64(a.GetStaticSharedMemBytes())),
		num("registers", int64(a.GetRegistersPerThread())), num("stream", int64(a.GetStreamId())),
		num("device", int64(a.GetDevice())), num("correlation", int64(a.GetCorrelationId())))
	s.args = ps.stackArgs(s.args, from)
	if c != nil && c.flow != 0 {
		s.flowIn, s.chain = c.flow, c.graph
		tw.stats.Flows++
	}
	if c == nil {
		tw.stats.Unlinked++
	}
	tw.stats.Kernels++
	return ps.place(ps.stream(a.GetDevice(), a.GetStreamId()), s)
}

// probed places a launch's live probe result: at once where its kernel came first, or the
// recording has no GPU times (none recorded, no kernel come yet); else it waits for the kernel.
func (ps *procState) probed(p recording.Probed) error {
	l, o := p.Launch, ps.tw.opts
	if p.GetSkipped() != "" || len(p.GetCtas()) == 0 || l == nil || o.Launches != nil && !o.Launches(l.GetSeq()) {
		return nil
	}
	if o.Kernels != nil {
		k := ps.links.Kernel(l.GetKernelId())
		if k == nil || !o.Kernels.MatchString(k.GetName()) && !o.Kernels.MatchString(ps.links.KernelName(k)) {
			return nil
		}
	}
	if start, ok := ps.started[l.GetSeq()]; ok {
		delete(ps.started, l.GetSeq())
		return ps.writeCTAs(p, start, "kernel start")
	}
	if !ps.gpuTimed {
		return ps.writeCTAs(p, l.GetHostNs(), "launch call")
	}
	ps.probeWait[l.GetSeq()] = p
	return nil
}

// probeKernel notes the GPU start of launch seq's kernel: a probe result waiting for it is
// written; a probed launch's result still to come will be placed there.
func (ps *procState) probeKernel(seq, start uint64) error {
	if p, ok := ps.probeWait[seq]; ok {
		delete(ps.probeWait, seq)
		return ps.writeCTAs(p, start, "kernel start")
	}
	if ps.probes.Waiting(seq) {
		ps.started[seq] = start
	}
	return nil
}

// writeCTAs writes a probed launch's CTAs on the tracks of their SMs. The probes' times are
// the GPU's %globaltimer, not the recording's clock: the earliest CTA start is put at at (the
// kernel's start on the GPU, or the launch call), the rest where the probes saw them after it.
func (ps *procState) writeCTAs(p recording.Probed, at uint64, aligned string) error {
	ctas, _ := recording.ProbeCTAs(p.GetCtas())
	if len(ctas) == 0 {
		return nil
	}
	l := p.Launch
	first := ctas[0].Start
	for _, c := range ctas {
		first = min(first, c.Start)
	}
	kernel := ""
	if k := ps.links.Kernel(l.GetKernelId()); k != nil {
		kernel = ps.links.KernelName(k)
	}
	ps.tw.stats.Probed++
	for _, c := range ctas {
		ts, dur := ps.ts(at)+int64(c.Start-first), int64(c.End-c.Start)
		if !ps.tw.inWindow(ts, dur) {
			continue
		}
		x, y, z := c.XYZ(l.GetGrid().GetX(), l.GetGrid().GetY())
		s := ps.newSlice(fmt.Sprintf("CTA %d,%d,%d", x, y, z), "probe", ts, dur)
		s.args = append(s.args, num("launch", int64(l.GetSeq())), str("kernel", kernel), ps.dim("cta", [3]uint32{x, y, z}),
			num("cta_index", int64(c.Index)), num("sm", int64(c.SM)), num("count", int64(c.Count)), str("aligned", aligned))
		ps.tw.stats.ProbeCTAs++
		if err := ps.place(ps.sm(l.GetDevice(), c.SM), s); err != nil {
			return err
		}
	}
	return nil
}

// sm is the first lane of a device's SM's probe track.
func (ps *procState) sm(device, sm uint32) *track {
	key := [2]uint32{device, sm}
	t := ps.sms[key]
	if t == nil {
		t = ps.newTrack(fmt.Sprintf("GPU %d SM %d (probes)", device, sm), 3000+1000*int(device)+int(sm))
		ps.sms[key] = t
	}
	return t
}

// ownKernel writes one of gpurr's own memory-capture kernels.
func (ps *procState) ownKernel(a *pb.KernelActivity) error {
	if a.GetStartNs() == 0 || a.GetEndNs() < a.GetStartNs() {
		ps.tw.stats.Skipped++
		return nil
	}
	ts, dur := ps.ts(a.GetStartNs()), int64(a.GetEndNs()-a.GetStartNs())
	if !ps.tw.selected(ts, dur) {
		return nil
	}
	t := ps.own[a.GetDevice()]
	if t == nil {
		t = ps.newTrack(fmt.Sprintf("GPU %d gpurr memory capture", a.GetDevice()), 2000+int(a.GetDevice()))
		ps.own[a.GetDevice()] = t
	}
	ps.tw.stats.OwnKernels++
	s := ps.newSlice(a.GetName(), "gpurr", ts, dur)
	s.args = append(s.args, num("stream", int64(a.GetStreamId())), num("device", int64(a.GetDevice())),
		ps.dim("grid", dim3(a.GetGrid())), ps.dim("block", dim3(a.GetBlock())))
	return ps.place(t, s)
}

// writeCall writes a launch call's slice on its host thread; flow is the
// flow to its kernels (0 for none).
func (ps *procState) writeCall(c *call, flow uint64, extra ...arg) error {
	c.written = true
	ts, dur := ps.ts(c.hostNS), int64(0)
	if c.endNS > c.hostNS {
		dur = int64(c.endNS - c.hostNS)
	}
	if !ps.tw.selected(ts, dur) {
		return nil
	}
	c.flow = flow
	s := ps.newSlice(recording.LaunchAPIName(c.api), "launch", ts, dur)
	s.instant, s.flowOut = dur == 0, flow
	s.args = append(s.args, num("launch", int64(c.seq)))
	if c.graph {
		s.cat = "graph_launch"
		s.args = append(s.args, str("graph_exec", fmt.Sprintf("0x%x", c.graphExec)))
	} else {
		if k := ps.links.Kernel(c.kernel); k != nil {
			s.args = append(s.args, str("kernel", ps.links.KernelName(k)))
		}
		s.args = append(s.args, ps.dim("grid", c.grid), ps.dim("block", c.block), num("smem", int64(c.smem)))
	}
	s.args = append(s.args, extra...)
	if c.rng != "" {
		s.args = append(s.args, str("range", c.rng))
	}
	s.args = append(s.args, num("stream", int64(c.streamID)), num("device", int64(c.device)), num("correlation", int64(c.corr)))
	s.args = ps.stackArgs(ps.lineArgs(s.args, c.origin), c.origin)
	ps.tw.stats.Calls++
	return ps.place(ps.thread(c.tid), s)
}

// thread is a host thread's track.
func (ps *procState) thread(tid uint32) *track {
	t := ps.threads[tid]
	if t == nil {
		label := "thread"
		if tid == ps.pid {
			label = "main thread"
		}
		t = ps.newTrack(fmt.Sprintf("%s %d", label, tid), len(ps.threads))
		t.thread, t.tid = true, int64(tid)
		ps.threads[tid] = t
	}
	return t
}

// stream is the first lane of a device's stream.
func (ps *procState) stream(device, streamID uint32) *track {
	key := [2]uint32{device, streamID}
	t := ps.streams[key]
	if t == nil {
		t = ps.newTrack(fmt.Sprintf("GPU %d stream %d", device, streamID), 1000+len(ps.streams))
		ps.streams[key] = t
	}
	return t
}

func (ps *procState) newTrack(name string, sort int) *track {
	ps.ntracks++
	return &track{proc: ps.proc, uuid: ps.proc.uuid | ps.ntracks, tid: 1<<30 + int64(ps.ntracks), name: name, base: name, sort: sort}
}

// place writes s on the first lane of t that is free at s's start (host
// threads have one lane: their calls have no duration).
func (ps *procState) place(t *track, s *slice) error {
	for !t.thread && s.ts < t.lastEnd {
		if t.next == nil {
			t.next = ps.newTrack(fmt.Sprintf("%s #%d", t.base, t.lane+1), t.sort)
			t.next.base, t.next.lane = t.base, t.lane+1
		}
		t = t.next
	}
	if !t.declared {
		t.declared = true
		if err := ps.tw.sink.track(t); err != nil {
			return err
		}
	}
	t.lastEnd = max(t.lastEnd, s.ts+s.dur)
	s.track = t
	return ps.tw.sink.slice(s)
}

// callstack writes a callstack's frames, innermost first, one a line ("" for
// none); each distinct stack once.
func (ps *procState) callstack(id uint64) string {
	if id == 0 {
		return ""
	}
	if text, ok := ps.stacks[id]; ok {
		return text
	}
	cs := ps.links.Callstack(id)
	if cs == nil {
		return ""
	}
	var lines []string
	for _, f := range cs.GetFrames() {
		lines = append(lines, recording.FrameText(f))
	}
	text := strings.Join(lines, "\n")
	ps.stacks[id] = text
	return text
}

// newSlice resets the process's one slice for the next event.
func (ps *procState) newSlice(name, cat string, ts, dur int64) *slice {
	ps.sl = slice{name: name, cat: cat, ts: ts, dur: dur, args: ps.sl.args[:0]}
	return &ps.sl
}

// dim is a grid or block argument, "x,y,z".
func (ps *procState) dim(key string, d [3]uint32) arg {
	s, ok := ps.dims[d]
	if !ok {
		s = fmt.Sprintf("%d,%d,%d", d[0], d[1], d[2])
		ps.dims[d] = s
	}
	return str(key, s)
}

func dim3(d *pb.Dim3) [3]uint32 { return [3]uint32{d.GetX(), d.GetY(), d.GetZ()} }
