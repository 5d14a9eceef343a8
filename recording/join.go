package recording

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"

	"github.com/gpurr/gpurr/recording/internal/xla"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// maxCloneHops bounds the walk from an executable graph's node back to the
// node its capture created. Instantiation clones each node once; a graph
// cloned again (cuGraphClone, then instantiated) adds a hop per clone. A
// longer chain means the records are damaged, and the walk gives up.
const maxCloneHops = 16

// Links joins a process's records: a graph replay's kernels to the launch
// that captured them, memory states to their launch, and ids to the
// kernels, callstacks and allocations they name. With Join (which pairs
// kernels with the calls that ran them) it is the one place that knows how
// those records refer to each other; info, query, export and trace all
// read through it. A Links is not safe for concurrent use (it caches
// demangled names).
type Links struct {
	kernels     map[uint64]*pb.Kernel
	callstacks  map[uint64]*pb.Callstack
	launchBySeq map[uint64]*pb.Launch
	nodes       map[uint64]*pb.GraphNode
	// versions are the launch sequence numbers of a node's later launches
	// (its parameters changed through the graph API), in order.
	versions map[uint64][]uint64
	// replays are the graph launches' sequence numbers by correlation id,
	// kept once some node has versions: a graph kernel runs the version
	// made last before its graph launch. A streaming reader keeps two
	// generations of replayWindow (activities arrive soon after their
	// launch); Data.Links keeps them all.
	replays, oldReplays map[uint32]uint64
	// repoints are the nodes of executable graphs cuGraphExecUpdate gave other work, by node,
	// in the order made (GraphNode.updated_after_seq).
	repoints map[uint64][]*pb.GraphNode
	// clones are the nodes cloned from another (instantiation's copies), and bodies what
	// bodyNode found, by executable graph and kernel name (cleared as clones come).
	clones        []*pb.GraphNode
	bodies        map[bodyKey]*pb.GraphNode
	every         bool
	memory        map[uint64][]*pb.MemoryState // by launch seq, BEFORE first
	allocs        map[uint64]*pb.Allocation    // the allocating record of each id
	frees         map[uint64]*pb.Allocation
	demangleCache map[string]string
	modules       map[string][]string // kernel names of each module, by sha256
	xla           *XLA                // UseXLA's, nil when none
	xlaStacks     map[*xla.Site]uint64
	xlaSites      map[xlaKey]xlaFound
	xlaRuns       map[xlaRunKey]*xla.Site
	// compileThreads are the threads that launched a kernel of XLA's
	// autotuning without a Python stack (Compile).
	compileThreads map[uint32]bool
	autotune       map[uint64]bool // kernel ids of XLA's autotuning kernels
	jaxCompile     map[uint64]bool // callstack ids inside JAX's compiler
}

// Links indexes d's records. It walks every record once; build it once per
// Data and keep it.
func (d *Data) Links() *Links {
	l := NewLinks()
	l.indexMemory(d)
	l.Add(&pb.Batch{Modules: d.Modules, Kernels: d.Kernels, Callstacks: d.Callstacks, Launches: d.Launches,
		GraphLaunches: d.GraphLaunches, GraphNodes: d.GraphNodes}, true)
	return l
}

// NewLinks returns links with nothing indexed yet, for a reader that
// streams a recording frame by frame (Process.Scan) and adds each batch.
func NewLinks() *Links {
	return &Links{
		kernels:       map[uint64]*pb.Kernel{},
		callstacks:    map[uint64]*pb.Callstack{},
		launchBySeq:   map[uint64]*pb.Launch{},
		nodes:         map[uint64]*pb.GraphNode{},
		versions:      map[uint64][]uint64{},
		demangleCache: map[string]string{},
		modules:       map[string][]string{},
		xlaStacks:     map[*xla.Site]uint64{},
		xlaSites:      map[xlaKey]xlaFound{},
		xlaRuns:       map[xlaRunKey]*xla.Site{},

		compileThreads: map[uint32]bool{},
		autotune:       map[uint64]bool{},
		jaxCompile:     map[uint64]bool{},
	}
}

// Add indexes a batch's kernels, callstacks, graph nodes and launches.
// With every false it keeps of the launches only the captured ones: what
// CaptureLaunch needs to lead a graph replay's kernel to its capture-time
// launch. That index grows with the program's graphs, not with its
// length, so a streaming reader of a long recording stays in bounded
// memory. Memory states are indexed only by Data.Links.
func (l *Links) Add(b *pb.Batch, every bool) {
	for _, m := range b.Modules {
		l.modules[m.GetSha256()] = m.GetKernelNames()
	}
	for _, k := range b.Kernels {
		l.kernels[k.GetId()] = k
	}
	for _, c := range b.Callstacks {
		l.callstacks[c.GetId()] = c
	}
	l.noteCompile(b)
	for _, la := range b.Launches {
		l.noteCompileThread(la)
		// A captured launch only built a graph node: its correlation id
		// never appears on an activity, and graph replays are joined
		// through the nodes instead.
		if la.GetCaptured() || every {
			l.launchBySeq[la.GetSeq()] = la
		}
	}
	for _, n := range b.GraphNodes {
		l.addNode(n)
	}
	l.every = l.every || every
	if len(l.versions) > 0 || len(l.repoints) > 0 {
		for _, g := range b.GraphLaunches {
			l.addReplay(g)
		}
	}
}

// replayWindow is how many graph launches a streaming reader remembers per
// generation, to pick the version of a node their kernels ran.
const replayWindow = 1 << 16

// addNode indexes a graph node; a node made again by a later launch (its
// parameters changed through the graph API) is a new version of it.
func (l *Links) addNode(n *pb.GraphNode) {
	if n.GetUpdatedAfterSeq() != 0 {
		if l.repoints == nil {
			l.repoints = map[uint64][]*pb.GraphNode{}
		}
		l.repoints[n.GetNodeId()] = append(l.repoints[n.GetNodeId()], n)
		return
	}
	if n.GetOriginalNodeId() != 0 {
		l.clones = append(l.clones, n)
		clear(l.bodies)
	}
	id := n.GetNodeId()
	old := l.nodes[id]
	if old == nil || old.GetLaunchSeq() == 0 || n.GetLaunchSeq() == 0 {
		l.nodes[id] = n
		return
	}
	l.versions[id] = append(l.versions[id], n.GetLaunchSeq())
}

func (l *Links) addReplay(g *pb.GraphLaunch) {
	if l.replays == nil {
		l.replays = map[uint32]uint64{}
	}
	if !l.every && len(l.replays) >= replayWindow {
		l.oldReplays, l.replays = l.replays, map[uint32]uint64{}
	}
	l.replays[g.GetCorrelationId()] = g.GetSeq()
}

// nodeLaunchSeq is the launch of node n that a kernel of the graph launch
// with correlation id corr ran: the last version made before that graph
// launch. A graph launch not indexed came before any node had versions:
// it ran the first.
func (l *Links) nodeLaunchSeq(n *pb.GraphNode, corr uint32) uint64 {
	seq := n.GetLaunchSeq()
	replay, ok := l.replaySeq(corr)
	if !ok {
		return seq
	}
	for _, v := range l.versions[n.GetNodeId()] {
		if v > replay {
			break
		}
		seq = v
	}
	return seq
}

// replaySeq is the sequence number of the graph launch with correlation id corr, when indexed.
func (l *Links) replaySeq(corr uint32) (uint64, bool) {
	replay, ok := l.replays[corr]
	if !ok {
		replay, ok = l.oldReplays[corr]
	}
	return replay, ok
}

// execNode is the node whose work an executable graph's node ran in the graph launch with
// correlation id corr: the node itself, or where the last cuGraphExecUpdate before that
// launch pointed it.
func (l *Links) execNode(nodeID uint64, corr uint32) uint64 {
	rp := l.repoints[nodeID]
	if len(rp) == 0 {
		return nodeID
	}
	replay, ok := l.replaySeq(corr)
	if !ok {
		return nodeID
	}
	for _, r := range rp {
		if r.GetUpdatedAfterSeq() < replay {
			nodeID = r.GetOriginalNodeId()
		}
	}
	return nodeID
}

// CaptureLaunch returns the launch whose code a graph replay's kernel ran:
// the launch made during stream capture that created its graph node, or
// the graph API call that added the node or, last before the replay,
// changed its parameters, or the node a cuGraphExecUpdate before the replay
// took the executable graph's node's work from. The
// kernel carries the executable graph's node, which leads, through the
// clones made at instantiation, to the node the captured launch created.
// Its callstack is where the graph was captured, not where it was
// replayed (the replay is the kernel's call in Join). nil for an eager
// kernel (Join pairs it with its launch), and when the recording does not
// hold the node or the launch.
func (l *Links) CaptureLaunch(a *pb.KernelActivity) *pb.Launch {
	if a.GetGraphId() == 0 {
		return nil
	}
	n := l.CaptureNode(l.execNode(a.GetGraphNodeId(), a.GetCorrelationId()))
	if n == nil {
		if n = l.bodyNode(a); n == nil {
			return nil
		}
	}
	return l.launchBySeq[l.nodeLaunchSeq(n, a.GetCorrelationId())]
}

type bodyKey struct {
	graph uint32
	name  string
}

// bodyNode is the node that built the kernel a conditional node's body ran, for a graph
// kernel whose node no record names: CUPTI reports such a kernel with a node id of the
// executable graph that no clone record carries (and correlation id 0), while the body's own
// nodes were cloned into a graph of their own at instantiation. It is the one node, cloned
// into a graph other than a's, whose launch ran a's kernel; nil when none is, or several.
func (l *Links) bodyNode(a *pb.KernelActivity) *pb.GraphNode {
	key := bodyKey{a.GetGraphId(), a.GetName()}
	if key.name == "" {
		return nil
	}
	if n, ok := l.bodies[key]; ok {
		return n
	}
	var found *pb.GraphNode
	for _, c := range l.clones {
		if c.GetGraphId() == a.GetGraphId() {
			continue
		}
		n := l.CaptureNode(c.GetNodeId())
		if n == nil || n == found {
			continue
		}
		la := l.launchBySeq[n.GetLaunchSeq()]
		if la == nil || l.kernels[la.GetKernelId()].GetName() != a.GetName() {
			continue
		}
		if found != nil {
			found = nil // two bodies ran this kernel: which one is not known
			break
		}
		found = n
	}
	if l.bodies == nil {
		l.bodies = map[bodyKey]*pb.GraphNode{}
	}
	l.bodies[key] = found
	return found
}

// CaptureNode follows an executable graph's node back through its clones to
// the node a captured launch created (the first with a launch sequence
// number). It returns nil when the chain breaks, loops, or runs past
// maxCloneHops.
func (l *Links) CaptureNode(nodeID uint64) *pb.GraphNode {
	var seen [maxCloneHops + 1]uint64 // on the stack: this runs once per graph kernel
	for hop := range seen {
		n := l.nodes[nodeID]
		if n == nil {
			return nil
		}
		if n.GetLaunchSeq() != 0 {
			return n
		}
		seen[hop] = nodeID
		nodeID = n.GetOriginalNodeId()
		if slices.Contains(seen[:hop+1], nodeID) {
			return nil
		}
	}
	return nil
}

// Launch returns the launch with sequence number seq, or nil (or, on links
// filled by Add without every, when it is not a captured launch).
func (l *Links) Launch(seq uint64) *pb.Launch { return l.launchBySeq[seq] }

// Kernel returns the kernel with the given per-process id, or nil.
func (l *Links) Kernel(id uint64) *pb.Kernel { return l.kernels[id] }

// Callstack returns the callstack with the given id, or nil (id 0: none
// was taken).
func (l *Links) Callstack(id uint64) *pb.Callstack { return l.callstacks[id] }

// TopPythonFrame returns the innermost Python frame of a callstack: the
// line of the user's program (or of the library it called) that was
// running when the kernel was launched. Frames are stored innermost first,
// so this is the first Python frame; native frames above it (the CUDA
// runtime, PyTorch's C++) are skipped. nil when the callstack is unknown
// or holds no Python frame.
func (l *Links) TopPythonFrame(callstackID uint64) *pb.Frame {
	return l.firstFrame(callstackID, isPython)
}

// PythonLine is TopPythonFrame as FrameText writes it, or "" when there is
// none.
func (l *Links) PythonLine(callstackID uint64) string {
	return frameLine(l.TopPythonFrame(callstackID))
}

// UserFrame returns the innermost Python frame in the program's own code:
// the first Python frame whose file is not library code (installed
// packages, the standard library, frozen modules). For a kernel launched
// by torch.nn.Linear inside model.py that is the line of model.py, where
// TopPythonFrame is the line inside torch. nil when there is none.
func (l *Links) UserFrame(callstackID uint64) *pb.Frame {
	return l.firstFrame(callstackID, isUserPython)
}

// UserLine is UserFrame as FrameText writes it, or "" when there is none.
func (l *Links) UserLine(callstackID uint64) string { return frameLine(l.UserFrame(callstackID)) }

// firstFrame is the innermost frame of a callstack that satisfies want.
func (l *Links) firstFrame(callstackID uint64, want func(*pb.Frame) bool) *pb.Frame {
	return firstFrame(l.callstacks[callstackID], want)
}

func firstFrame(c *pb.Callstack, want func(*pb.Frame) bool) *pb.Frame {
	for _, f := range c.GetFrames() {
		if want(f) {
			return f
		}
	}
	return nil
}

func isPython(f *pb.Frame) bool { return f.GetKind() == pb.Frame_PYTHON }

func isUserPython(f *pb.Frame) bool { return isPython(f) && !IsLibraryFile(f.GetFile()) }

// Line is the line a summary names for a callstack: its innermost frame in
// the program's own code (UserFrame), else its innermost Python frame
// (TopPythonFrame), as FrameText writes it; "" when it holds no Python
// frame or c is nil.
func Line(c *pb.Callstack) string {
	return frameLine(cmp.Or(firstFrame(c, isUserPython), firstFrame(c, isPython)))
}

// ForwardCallstackID is the callstack of the forward launch that a launch
// made inside an autograd node's backward is linked to
// (Launch.autograd.forward_callstack_id): the Python line of the model
// whose backward the launch computes. 0 for a forward launch, a launch
// without autograd context, and a backward launch whose forward launch
// was not found. A forward_callstack_id on a launch that names no backward
// node contradicts the format and is ignored.
func ForwardCallstackID(la *pb.Launch) uint64 {
	if ag := la.GetAutograd(); ag.GetBackwardNode() != "" {
		return ag.GetForwardCallstackId()
	}
	return 0
}

// Forward returns the forward launch's callstack of a launch made inside
// an autograd node's backward (ForwardCallstackID), or nil when there is
// none or the recording does not hold it.
func (l *Links) Forward(la *pb.Launch) *pb.Callstack {
	if id := ForwardCallstackID(la); id != 0 {
		return l.callstacks[id]
	}
	return nil
}

// LineCallstack is the id of the callstack a launch's lines come from
// (PythonLine, UserLine and the like): for a launch made inside an
// autograd node's backward, linked to its forward launch, the forward
// launch's callstack, since the backward runs on autograd's engine thread,
// whose own stack holds no line of the model; for a kernel XLA launched
// (links given the recording's dump by UseXLA) that the dump knows, a
// callstack made of the lines XLA's metadata gives its fusion, numbered
// above the recording's (Callstack returns it): XLA's threads have no
// Python stack, and JAX's dispatch thread only the line that called the
// jitted function, where the fusion's lines are inside it; for every other
// launch, its own. Readers attribute launches through it, so that a
// backward kernel counts at the model line whose backward it computes, and
// an XLA kernel at its jnp line.
func (l *Links) LineCallstack(la *pb.Launch) uint64 {
	if l.Forward(la) != nil {
		return ForwardCallstackID(la)
	}
	if s, _ := l.xlaSite(la); s != nil {
		if id := l.xlaCallstack(s); id != 0 {
			return id
		}
	}
	return la.GetCallstackId()
}

func frameLine(f *pb.Frame) string {
	if f == nil {
		return ""
	}
	return FrameText(f)
}

// Installed packages, the standard library, and code that PyTorch generates
// at run time: torch.compile's Inductor output (/tmp/torchinductor_<user>/...)
// and FX graph modules' code ("<eval_with_key>.N").
var libraryPath = regexp.MustCompile(`/(site|dist)-packages/|/lib/python\d+(\.\d+)?t?/|^<frozen |/torchinductor_[^/]*/|^<eval_with_key>`)

// IsLibraryFile reports whether a Python source path belongs to installed
// packages, the standard library or code generated by PyTorch rather than to
// the program itself.
func IsLibraryFile(path string) bool { return libraryPath.MatchString(path) }

// FrameText writes a frame on one line, where then what: a Python frame as
// "file:line function", a native one as "object+0xoffset function".
func FrameText(f *pb.Frame) string {
	if f.GetKind() == pb.Frame_PYTHON {
		return fmt.Sprintf("%s:%d %s", f.GetFile(), f.GetLine(), f.GetFunction())
	}
	if f.GetFunction() == "" {
		return fmt.Sprintf("%s+0x%x", f.GetFile(), f.GetOffset())
	}
	return fmt.Sprintf("%s+0x%x %s", f.GetFile(), f.GetOffset(), f.GetFunction())
}

// KernelName returns the readable name of a kernel: the agent's demangled
// form, or the name demangled here when the agent left it empty.
func (l *Links) KernelName(k *pb.Kernel) string {
	if d := k.GetDemangled(); d != "" {
		return d
	}
	return l.Demangle(k.GetName())
}

// Demangle is the package function Demangle, remembering each name: an
// activity stream repeats a few kernel names millions of times.
func (l *Links) Demangle(name string) string {
	if d, ok := l.demangleCache[name]; ok {
		return d
	}
	d := Demangle(name)
	l.demangleCache[name] = d
	return d
}
