package export

import (
	"encoding/hex"
	"errors"

	"github.com/gpurr/gpurr/internal/joinwin"
	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// launchRef is what a kernel row needs of the launch call that ran it.
type launchRef struct {
	seq       uint64
	callstack uint64 // where its lines come from (Links.LineCallstack)
}

// procExport streams one process into its tables.
type procExport struct {
	name   string
	pid    int32
	wall   int64 // add to a recording-clock time for the wall clock (0 when unknown)
	links  *recording.Links
	eager  joinwin.Calls[launchRef] // launch calls waiting for their kernel
	graphs map[uint32]launchRef     // graph launches, by correlation id (a replay runs many kernels)
	early  joinwin.Kernels          // kernels whose launch call had not come yet
	states map[uint64][]*pb.Region  // regions of launches waiting for their memory states
	stacks map[uint64]bool          // callstacks written

	launches   *table[LaunchRow]
	kernels    *table[KernelRow]
	callstacks *table[CallstackRow]
	activity   *table[ActivityRow]
	regions    *table[RegionHashRow]
}

func exportProcess(dir string, p *recording.Process, st *Stats) (err error) {
	e := &procExport{
		name:       p.Name,
		pid:        int32(p.Info.GetPid()),
		links:      recording.NewLinks(),
		graphs:     map[uint32]launchRef{},
		states:     map[uint64][]*pb.Region{},
		stacks:     map[uint64]bool{},
		launches:   newTable[LaunchRow](dir, "launches", p, st),
		kernels:    newTable[KernelRow](dir, "kernels", p, st),
		callstacks: newTable[CallstackRow](dir, "callstacks", p, st),
		activity:   newTable[ActivityRow](dir, "gpu_activity", p, st),
		regions:    newTable[RegionHashRow](dir, "region_hashes", p, st),
	}
	if p.Info.GetStartUnixNs() != 0 {
		e.wall = p.Info.GetStartUnixNs() - int64(p.Info.GetStartNs())
	}
	defer func() {
		if err != nil {
			e.launches.abort()
			e.kernels.abort()
			e.callstacks.abort()
			e.activity.abort()
			e.regions.abort()
		}
	}()
	if _, err := p.Scan(e.batch); err != nil {
		return err
	}
	for a := e.early.Oldest(); a != nil; a = e.early.Oldest() {
		if err := e.kernel(a, false); err != nil {
			return err
		}
	}
	return errors.Join(e.launches.close(), e.kernels.close(), e.callstacks.close(), e.activity.close(), e.regions.close())
}

func (e *procExport) batch(b *pb.Batch) error {
	e.links.Add(b, false)
	for _, k := range b.Kernels {
		if err := e.kernels.add(KernelRow{Process: e.name, Pid: e.pid, ID: int64(k.GetId()), Identity: int64(k.GetIdentity()),
			Name: k.GetName(), Demangled: e.links.KernelName(k), ModuleSha256: k.GetModuleSha256(),
			Params: int32(len(k.GetParams())), ParamBytes: int32(k.GetParamBytes())}); err != nil {
			return err
		}
	}
	for _, c := range b.Callstacks {
		if err := e.callstack(c); err != nil {
			return err
		}
	}
	for _, l := range b.Launches {
		if err := e.launch(l); err != nil {
			return err
		}
	}
	for _, g := range b.GraphLaunches {
		e.graphs[g.GetCorrelationId()] = launchRef{g.GetSeq(), g.GetCallstackId()}
		if err := e.launches.add(LaunchRow{Process: e.name, Pid: e.pid, Seq: int64(g.GetSeq()), GraphLaunch: true, Tid: int32(g.GetTid()),
			Device: int32(g.GetDevice()), Stream: int64(g.GetStream()), StreamID: int32(g.GetStreamId()),
			CorrelationID: int64(g.GetCorrelationId()), HostNs: int64(g.GetHostNs()), HostUnixNs: e.unix(g.GetHostNs()),
			CallstackID: int64(g.GetCallstackId()), PythonLine: e.links.PythonLine(g.GetCallstackId()),
			GraphExec: int64(g.GetGraphExec()), API: 514, Result: g.GetResult()}); err != nil {
			return err
		}
	}
	for _, a := range b.Activities {
		if err := e.kernel(a, true); err != nil {
			return err
		}
	}
	for _, a := range b.OwnActivities {
		row := e.activityRow(a)
		row.GpurrOwn = true
		if err := e.activity.add(row); err != nil {
			return err
		}
	}
	for _, s := range b.Memory {
		if err := e.memory(s); err != nil {
			return err
		}
	}
	// Calls whose kernel never comes (dropped, or no GPU timing) leave
	// the window once it is full; kernels whose call never comes are
	// written without it.
	for e.eager.Len() > joinwin.MaxCalls {
		id, _, _ := e.eager.Oldest()
		e.eager.Remove(id)
	}
	for e.early.Len() > joinwin.MaxKernels {
		if err := e.kernel(e.early.Oldest(), false); err != nil {
			return err
		}
	}
	return nil
}

func (e *procExport) unix(t uint64) int64 {
	if e.wall == 0 || t == 0 {
		return 0
	}
	return int64(t) + e.wall
}

func (e *procExport) callstack(c *pb.Callstack) error {
	if e.stacks[c.GetId()] {
		return nil
	}
	e.stacks[c.GetId()] = true
	for i, f := range c.GetFrames() {
		kind := "python"
		if f.GetKind() == pb.Frame_NATIVE {
			kind = "native"
		}
		if err := e.callstacks.add(CallstackRow{Process: e.name, Pid: e.pid, CallstackID: int64(c.GetId()), Source: c.GetSource(),
			Depth: int32(i), Kind: kind, File: f.GetFile(), Line: int32(f.GetLine()), Function: f.GetFunction(),
			Offset: int64(f.GetOffset())}); err != nil {
			return err
		}
	}
	return nil
}

func (e *procExport) launch(l *pb.Launch) error {
	row := LaunchRow{Process: e.name, Pid: e.pid, Seq: int64(l.GetSeq()), Tid: int32(l.GetTid()), Device: int32(l.GetDevice()),
		Stream: int64(l.GetStream()), StreamID: int32(l.GetStreamId()), KernelID: int64(l.GetKernelId()),
		Dims:           dims(l.GetGrid(), l.GetBlock()),
		SharedMemBytes: int32(l.GetSharedMemBytes()), CorrelationID: int64(l.GetCorrelationId()),
		HostNs: int64(l.GetHostNs()), HostUnixNs: e.unix(l.GetHostNs()), CallstackID: int64(l.GetCallstackId()),
		PythonLine: e.links.PythonLine(e.links.LineCallstack(l)), Captured: l.GetCaptured(), GraphNodeID: int64(l.GetGraphNodeId()),
		API: int32(l.GetApi()), Result: l.GetResult()}
	if ag := l.GetAutograd(); ag != nil {
		in, thread, seq := ag.GetBackwardNode() != "", int64(ag.GetThread()), int64(ag.GetSequenceNr())
		row.InBackward, row.BackwardNode, row.AutogradThread, row.AutogradSeq = &in, ag.GetBackwardNode(), &thread, &seq
		row.ForwardCallstackID, row.ForwardLink = int64(ag.GetForwardCallstackId()), recording.EnumText(ag.GetLink())
	}
	if k := e.links.Kernel(l.GetKernelId()); k != nil {
		row.Kernel, row.Identity = e.links.KernelName(k), int64(k.GetIdentity())
	}
	if m := l.GetMemory(); m != nil {
		row.MemoryStatus = recording.EnumText(m.GetStatus())
	}
	if !l.GetCaptured() {
		e.eager.Add(l.GetCorrelationId(), launchRef{l.GetSeq(), e.links.LineCallstack(l)})
		for _, a := range e.early.Take(l.GetCorrelationId()) {
			if err := e.kernel(a, false); err != nil {
				return err
			}
		}
	}
	// Its states come in later frames: keep its regions until they do.
	if st := l.GetMemory().GetStatus(); st == pb.MemoryPlan_HASH || st == pb.MemoryPlan_SNAPSHOT {
		e.states[l.GetSeq()] = l.GetRegions()
	}
	return e.launches.add(row)
}

func (e *procExport) activityRow(a *pb.KernelActivity) ActivityRow {
	return ActivityRow{Process: e.name, Pid: e.pid, CorrelationID: int64(a.GetCorrelationId()), Device: int32(a.GetDevice()),
		StreamID: int32(a.GetStreamId()), StartNs: int64(a.GetStartNs()), EndNs: int64(a.GetEndNs()),
		StartUnixNs: e.unix(a.GetStartNs()), DurationNs: int64(a.GetEndNs()) - int64(a.GetStartNs()),
		Name: a.GetName(), Demangled: e.links.Demangle(a.GetName()), GraphID: int32(a.GetGraphId()),
		GraphNodeID: int64(a.GetGraphNodeId()), ViaGraph: a.GetGraphId() != 0,
		Dims:      dims(a.GetGrid(), a.GetBlock()),
		Registers: int32(a.GetRegistersPerThread()), SharedMemBytes: int32(a.GetSharedMemBytes()),
		StaticSmem: int32(a.GetStaticSharedMemBytes())}
}

// kernel writes a kernel execution joined to its launch. With wait, a
// kernel whose launch call has not come is kept until it does (or the
// recording ends).
func (e *procExport) kernel(a *pb.KernelActivity, wait bool) error {
	row := e.activityRow(a)
	var stack uint64
	if a.GetGraphId() == 0 {
		ref, ok := e.eager.Get(a.GetCorrelationId())
		if !ok && wait {
			e.early.Add(a)
			return nil
		}
		if ok {
			e.eager.Remove(a.GetCorrelationId())
			seq := int64(ref.seq)
			row.LaunchSeq, stack = &seq, ref.callstack
		}
	} else {
		// The launch that captured it: its line is where the graph was built.
		if captured, _ := e.links.LaunchFor(a); captured != nil {
			seq := int64(captured.GetSeq())
			row.LaunchSeq, stack = &seq, e.links.LineCallstack(captured)
		}
		if g, ok := e.graphs[a.GetCorrelationId()]; ok {
			seq := int64(g.seq)
			row.GraphLaunchSeq = &seq
		}
	}
	row.PythonLine = e.links.PythonLine(stack)
	return e.activity.add(row)
}

func (e *procExport) memory(s *pb.MemoryState) error {
	regions := e.states[s.GetLaunchSeq()]
	if s.GetPoint() == pb.MemoryState_AFTER || s.GetLost() {
		delete(e.states, s.GetLaunchSeq())
	}
	point := "after"
	if s.GetPoint() == pb.MemoryState_BEFORE {
		point = "before"
	}
	row := RegionHashRow{Process: e.name, Pid: e.pid, LaunchSeq: int64(s.GetLaunchSeq()), Point: point,
		Snapshot: s.GetSnapshot(), Lost: s.GetLost(), LostReason: s.GetLostReason()}
	if s.GetLost() {
		row.Region = -1
		return e.regions.add(row)
	}
	for i, rs := range s.GetRegions() {
		r := row
		r.Region = int32(i)
		if i < len(regions) {
			r.Address, r.Size, r.AllocationID = int64(regions[i].GetAddress()), int64(regions[i].GetSize()), int64(regions[i].GetAllocationId())
		}
		r.Hash = hex.EncodeToString(rs.GetHash())
		r.Chunks = int32(len(rs.GetChunkHashes()) / recording.HashBytes)
		r.ChunksTransferred, r.ChunksMissing = int32(rs.GetChunksTransferred()), int32(rs.GetChunksMissing())
		if err := e.regions.add(r); err != nil {
			return err
		}
	}
	return nil
}
