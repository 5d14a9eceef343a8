package info

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// summary adds up one process's records while Process.Scan reads them frame by frame. What
// it keeps is per kernel, callstack, line, module, range name and open NVTX range, the write
// set misses it lists whole (an audit finds few), and the window of launch calls waiting for
// their kernels (recording.Join, which Trim bounds), never per launch: info reads a
// recording of millions of launches in memory that does not grow with it.
type summary struct {
	name  string
	info  *pb.Process // the last Process record
	steps *recording.Stepper
	// links indexes kernels, callstacks, graph nodes and captured launches (Add without
	// every): what a launch's line and a graph kernel's capture launch are found by.
	links *recording.Links
	join  *recording.Join[ran]

	devices      []*pb.Device
	kernels      int
	identities   map[uint64]bool   // kernel identities, for the total of a job
	readable     map[string]string // readable name by mangled name, the last kernel's
	callstacks   int
	lineOf       map[uint64]string // line by callstack id (recording.Line), for callstacks read
	launchesOf   map[uint64]int    // eager launches by kernel id: named at the end
	runs         map[string]*KernelUse
	lines        map[string]*LineUse
	ranges       *rangeCounter
	memory       *memoryCounter
	probes       *probeCounter
	copies       *copyCounter
	files        *fileCheck // nil: no files checked
	modules      []*pb.Module
	first, last  uint64 // the earliest and latest timestamp read (the process's start and end are added at the end)
	errors       []*pb.LogEntry
	hang         *pb.Hang // the first Hang record (the agent writes one)
	stats        *pb.Stats
	end          *pb.End
	graphs, acts int
	captured     int
	graphBuilt   int // of captured, by the graph API
	conditional  int // conditional nodes the graph API built
	memoryNodes  int // memory allocation and free nodes the graph API built
	deviceLaunch int // modules whose kernels launch kernels from the device
	launches     int
	untimed      int
	timedSteps   map[int]bool // training steps with an eager launch timed, of a recording timed by steps
	unlinked     int
	gpuNS        uint64
	backward     int            // launches made inside an autograd node's backward
	linked       int            // of them, those whose forward callstack was read
	xla          *recording.XLA // the recording's XLA dump, nil when none
	xlaLines     int            // launches whose line came from it
	compile      int            // launches made while XLA compiled (Links.Compile)
}

// scaled is gpuNS, the GPU time of the timed eager launches, scaled to all of them; 0 when every
// launch was timed (or none was).
func scaled(gpuNS uint64, launches, untimed int) uint64 {
	if untimed == 0 || untimed >= launches {
		return 0
	}
	return uint64(float64(gpuNS) * float64(launches) / float64(launches-untimed))
}

// ran is what a kernel's summary needs of the call that ran it, taken when the call is read:
// the launch itself is not kept while the call waits for its kernel.
type ran struct {
	eager    bool   // an eager launch; false for a graph replay
	line     string // the launch's line ("" for none, and for a replay)
	backward bool
	ranges   []*RangeUse // the names of the call's NVTX range and those around it
}

// newSummary starts the summary of process name; p, when not nil, is the process whose files
// beside its events (module images, the chunk store) are checked.
func newSummary(name string, steps *recording.Stepper, p *recording.Process) *summary {
	s := &summary{name: name, steps: steps, links: recording.NewLinks(), identities: map[uint64]bool{},
		readable: map[string]string{}, lineOf: map[uint64]string{}, launchesOf: map[uint64]int{},
		runs: map[string]*KernelUse{}, lines: map[string]*LineUse{}, ranges: newRangeCounter(),
		memory: newMemoryCounter(), probes: &probeCounter{reasons: map[string]int{}}, copies: newCopyCounter(), stats: &pb.Stats{}}
	if p != nil {
		s.files = &fileCheck{p: p}
		s.xla = p.XLA()
		s.links.UseXLA(s.xla)
	}
	s.join = recording.NewJoin(s.kernel, nil)
	return s
}

func (s *summary) see(ts uint64) {
	if ts == 0 {
		return
	}
	if s.first == 0 || ts < s.first {
		s.first = ts
	}
	s.last = max(s.last, ts)
}

// add takes one frame's batch.
func (s *summary) add(b *pb.Batch) error {
	if b.Process != nil {
		s.info = b.Process
	}
	s.stats = cmp.Or(b.Stats, s.stats)
	if b.End != nil {
		s.end = b.End
	}
	s.devices = append(s.devices, b.Devices...)
	s.modules = append(s.modules, b.Modules...)
	s.callstacks += len(b.Callstacks)
	s.kernels += len(b.Kernels)
	s.links.Add(b, false)
	for _, k := range b.Kernels {
		s.identities[k.GetIdentity()] = true
		s.readable[k.GetName()] = s.links.KernelName(k)
		s.memory.kernel(k)
	}
	s.ranges.add(b)
	s.steps.Add(b)
	recording.EachCall(b, func(l *pb.Launch) {
		step := s.steps.Launch(l)
		if !l.GetCaptured() && !l.GetUntimed() && s.info.GetGpuTimingSteps() != "" {
			if s.timedSteps == nil {
				s.timedSteps = map[int]bool{}
			}
			s.timedSteps[step] = true
		}
	}, func(g *pb.GraphLaunch) { s.steps.GraphLaunch(g) })
	for _, l := range b.Launches {
		s.see(l.GetHostNs())
		s.memory.launch(l)
		if l.GetAutograd().GetBackwardNode() != "" {
			s.backward++
			if s.links.Forward(l) != nil {
				s.linked++
			}
		}
		if s.links.Compile(l) {
			s.compile++
		}
		if s.xla != nil && s.links.LinesFromXLA(l) {
			s.xlaLines++
		}
		if l.GetCaptured() {
			s.captured++
			if recording.GraphNodeAPI(l.GetApi()) {
				s.graphBuilt++
			}
			continue
		}
		s.launches++
		if l.GetUntimed() {
			s.untimed++
		}
		s.launchesOf[l.GetKernelId()]++
		if err := s.join.Call(l.GetCorrelationId(), s.call(l), false); err != nil {
			return err
		}
	}
	for _, n := range b.GraphNodes {
		s.graphNode(n)
	}
	for _, g := range b.GraphLaunches {
		s.see(g.GetHostNs())
		s.graphs++
		if err := s.join.Call(g.GetCorrelationId(), ran{ranges: s.ranges.at(g.GetRangeId())}, true); err != nil {
			return err
		}
	}
	for _, a := range b.Allocations {
		s.see(a.GetHostNs())
	}
	for _, a := range b.Activities {
		s.see(a.GetStartNs())
		s.see(a.GetEndNs())
		s.acts++
		if err := s.join.Kernel(a); err != nil {
			return err
		}
	}
	// Calls whose kernel never comes (a recording without GPU timing) and kernels whose call
	// never comes wait in a bounded window: one pushed out counts as unlinked, as it would had
	// its partner been lost.
	if err := s.join.Trim(); err != nil {
		return err
	}
	s.ranges.closeFrame()
	for _, st := range b.Memory {
		s.memory.state(st)
		if s.files != nil {
			s.files.state(st)
		}
	}
	s.memory.misses = append(s.memory.misses, b.WriteSetMisses...)
	for _, d := range b.Digests {
		s.memory.digest(d)
	}
	for _, st := range b.CopyStates {
		s.memory.copyState(st)
		if s.files != nil {
			s.files.state(st)
		}
	}
	for _, a := range b.Allocations {
		s.memory.allocation(a)
	}
	s.probes.add(b)
	s.copies.add(b, s.stackLine)
	if s.hang == nil && len(b.Hangs) > 0 {
		s.hang = b.Hangs[0]
	}
	for _, e := range b.Log {
		// The hang's own entries: Process.Hang shows them.
		if s.hang != nil && strings.HasPrefix(e.GetMessage(), recording.HangLogPrefix) {
			continue
		}
		if strings.HasPrefix(e.GetMessage(), recording.DeviceLaunchLogPrefix) {
			s.deviceLaunch++
		}
		if e.GetLevel() == "error" {
			if len(s.errors) == lastErrors {
				s.errors = slices.Delete(s.errors, 0, 1)
			}
			s.errors = append(s.errors, e)
		}
	}
	return nil
}

// CUgraphNodeType values of the nodes the graph API builds that run no launch gpurr records.
const (
	nodeMemAlloc    = 10
	nodeMemFree     = 11
	nodeConditional = 13
)

// graphNode counts a node built with the graph API whose work is not a recorded launch (the
// agent writes those alone with no launch and no original).
func (s *summary) graphNode(n *pb.GraphNode) {
	if n.GetLaunchSeq() != 0 || n.GetOriginalNodeId() != 0 {
		return
	}
	switch n.GetNodeType() {
	case nodeConditional:
		s.conditional++
	case nodeMemAlloc, nodeMemFree:
		s.memoryNodes++
	}
}

// call is what the kernel of eager launch l needs of it.
func (s *summary) call(l *pb.Launch) ran {
	return ran{eager: true, line: s.line(l), backward: l.GetAutograd().GetBackwardNode() != "", ranges: s.ranges.at(l.GetRangeId())}
}

// line is the program's line of a launch: for a backward launch linked to its forward one, the
// forward launch's.
func (s *summary) line(l *pb.Launch) string { return s.stackLine(s.links.LineCallstack(l)) }

// stackLine is the program's line of callstack id.
func (s *summary) stackLine(id uint64) string {
	if line, ok := s.lineOf[id]; ok {
		return line
	}
	c := s.links.Callstack(id)
	line := recording.Line(c)
	if c != nil {
		s.lineOf[id] = line
	}
	return line
}

// kernel counts a kernel run with the call that ran it (ok false: none was found). A graph
// replay's kernel counts at the line of the launch that captured its node; when its replay
// is missing, under the NVTX range of that launch while the range is open.
func (s *summary) kernel(a *pb.KernelActivity, c ran, ok bool) error {
	u := s.runs[a.GetName()]
	if u == nil {
		u = &KernelUse{}
		s.runs[a.GetName()] = u
	}
	u.Runs++
	var ns uint64
	// Clocks that go backwards would make a huge unsigned duration.
	if a.GetEndNs() > a.GetStartNs() {
		ns = a.GetEndNs() - a.GetStartNs()
	}
	u.GPUTimeNS += ns
	s.gpuNS += ns
	var line string
	var backward bool
	switch {
	case a.GetGraphId() == 0 && c.eager:
		line, backward = c.line, c.backward
		s.ranges.count(c.ranges, ns)
	case a.GetGraphId() == 0:
		// An eager kernel with a replay's correlation id, or none found: no launch.
		s.unlinked++
		return nil
	default:
		l := s.links.CaptureLaunch(a)
		if ok && !c.eager {
			s.ranges.count(c.ranges, ns)
		} else if l != nil {
			s.ranges.count(s.ranges.at(l.GetRangeId()), ns)
		}
		if l == nil {
			s.unlinked++
			// A node of a command buffer XLA built itself: no launch, but its fusion's line.
			line = recording.Line(s.links.Callstack(s.links.KernelLineCallstack(a)))
			break
		}
		line, backward = s.line(l), l.GetAutograd().GetBackwardNode() != ""
	}
	if line == "" {
		return nil
	}
	lu := s.lines[line]
	if lu == nil {
		lu = &LineUse{Line: line}
		s.lines[line] = lu
	}
	lu.Runs++
	lu.GPUTimeNS += ns
	if backward {
		lu.BackwardRuns++
		lu.BackwardGPUTimeNS += ns
	}
	return nil
}

// finish ends the join and writes the summary; truncated says the events file ended inside a
// frame.
func (s *summary) finish(truncated bool) (*Process, error) {
	if err := s.join.Flush(); err != nil {
		return nil, err
	}
	info := s.info
	if info == nil {
		info = &pb.Process{}
	}
	st := s.stats
	p := &Process{
		Name: s.name, PID: info.GetPid(), PPID: info.GetPpid(), Host: info.GetHostname(),
		Rank: info.Rank, LocalRank: info.LocalRank, WorldSize: info.WorldSize,
		Argv: info.GetArgv(), Python: info.GetPython(), AgentVersion: info.GetAgentVersion(),
		CuptiPath: info.GetCuptiPath(), DriverVersion: info.GetDriverVersion(),
		CallstackMode: info.GetCallstackMode(), GPUTiming: info.GetGpuTiming(), TimingSerial: info.GetGpuTimingSerial(), TimingSample: info.GetGpuTimingSample(), KernelFilter: info.GetKernelFilter(),
		TimingSteps: info.GetGpuTimingSteps(), TimedSteps: slices.Sorted(maps.Keys(s.timedSteps)),
		GraphLaunches: s.graphs, KernelRuns: s.acts, Kernels: s.kernels,
		Modules: len(s.modules), Callstacks: s.callstacks,
		Complete: s.end != nil, Truncated: truncated,
		LaunchesFiltered: st.GetLaunchesFiltered(),
		CUPTIClient:      st.GetCuptiClients() > 0, CUPTIClientRecords: st.GetCuptiClientRecords(),
		CUPTIClientDropped: st.GetCuptiClientRecordsDropped(),
		AgentNS:            st.GetAgentCallbackNs(),
		AgentLaunchNS:      st.GetAgentLaunchNs(),
		AgentParts:         agentParts(st),
		Losses:             losses(st),
		Memory:             s.memory.summarize(info, st, s.end, s.links),
		Probes:             s.probes.summarize(info, st, s.end, s.links),
		Copies:             s.copies.summarize(),
		Launches:           s.launches, Captured: s.captured, Untimed: s.untimed,
		GraphBuilt: s.graphBuilt, ConditionalNodes: s.conditional, MemoryNodes: s.memoryNodes, DeviceLaunchModules: s.deviceLaunch,
		GPUTimeNS: s.gpuNS, GPUTimeScaledNS: scaled(s.gpuNS, s.launches, s.untimed), UnlinkedRuns: s.unlinked,
		Steps: s.steps.Steps(), StepRange: s.steps.Range(),
	}
	if s.end != nil {
		p.EndReason = s.end.GetReason()
	}
	for _, dev := range s.devices {
		p.Devices = append(p.Devices, Device{
			Ordinal: dev.GetOrdinal(), Name: dev.GetName(), UUID: dev.GetUuid(),
			CC: ccString(dev), SMs: dev.GetSmCount(), MemoryBytes: dev.GetMemoryBytes(),
		})
	}
	for _, m := range s.modules {
		p.ModuleBytes += m.GetSize()
		if m.GetPtx() != "" {
			p.ModulesWithPTX++
		}
	}
	s.see(info.GetStartNs())
	s.see(s.end.GetEndNs())
	p.FirstNS, p.LastNS = s.first, s.last
	p.SpanNS = p.LastNS - p.FirstNS
	p.Autograd = s.autograd(info)
	p.XLA = s.xlaSummary()
	p.Ranges = s.ranges.summarize(info)
	s.topKernels(p)
	for _, e := range s.errors {
		p.Errors = append(p.Errors, &LogEntry{AtNS: since(info.GetStartNs(), e.GetHostNs()), Level: e.GetLevel(), Message: e.GetMessage()})
	}
	p.Hang = newHang(s.hang, s.links, info.GetStartNs())
	if s.files != nil {
		p.ModulesMissing, p.Files = s.files.finish(s.modules)
	}
	return p, nil
}

// autograd is nil for a process without torch whose launches carry no autograd context.
func (s *summary) autograd(info *pb.Process) *Autograd {
	ai := info.GetAutograd()
	if ai == nil && s.backward == 0 {
		return nil
	}
	return &Autograd{TorchVersion: ai.GetTorchVersion(), Linked: ai.GetLinked(), Reason: ai.GetReason(),
		BackwardLaunches: s.backward, BackwardLinked: s.linked}
}

// topKernels keeps the kernels and lines with the most runs and GPU time. Kernels are keyed
// by mangled name, the one name both a launch (via its kernel) and an activity carry.
func (s *summary) topKernels(p *Process) {
	for id, n := range s.launchesOf {
		name := s.links.Kernel(id).GetName()
		u := s.runs[name]
		if u == nil {
			u = &KernelUse{}
			s.runs[name] = u
		}
		u.Launches += n
	}
	for _, lu := range s.lines {
		p.TopLines = append(p.TopLines, *lu)
	}
	slices.SortFunc(p.TopLines, func(a, b LineUse) int {
		return cmp.Or(cmp.Compare(b.GPUTimeNS, a.GPUTimeNS), cmp.Compare(b.Runs, a.Runs), cmp.Compare(a.Line, b.Line))
	})
	p.TopLines = p.TopLines[:min(len(p.TopLines), topKernels)]
	// By mangled name, and sorted stably below: kernels whose shortened names are one (a long
	// template's head) and tie in counts and time keep that order, not the map's, which
	// changes from one run to the next.
	all := make([]KernelUse, 0, len(s.runs))
	for _, name := range slices.Sorted(maps.Keys(s.runs)) {
		u := s.runs[name]
		r, ok := s.readable[name]
		if !ok {
			r = s.links.Demangle(name)
		}
		u.Name = shorten(r, 80)
		all = append(all, *u)
	}
	p.TopByCount = top(all, func(a, b KernelUse) int {
		return cmp.Or(cmp.Compare(b.Runs, a.Runs), cmp.Compare(b.Launches, a.Launches), cmp.Compare(a.Name, b.Name))
	})
	p.TopByTime = top(all, func(a, b KernelUse) int {
		return cmp.Or(cmp.Compare(b.GPUTimeNS, a.GPUTimeNS), cmp.Compare(b.Runs, a.Runs), cmp.Compare(a.Name, b.Name))
	})
}

// xlaSummary is nil for a process with neither an XLA dump nor a launch of XLA's compilation.
func (s *summary) xlaSummary() *XLA {
	if s.xla == nil && s.compile == 0 {
		return nil
	}
	x := &XLA{Lines: s.xlaLines, Compile: s.compile}
	if s.xla != nil {
		x.Modules = s.xla.Modules
		if s.xla.Err != nil {
			x.Error = s.xla.Err.Error()
		}
	}
	return x
}
