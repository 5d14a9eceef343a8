// Package info summarizes a recording: what ran where, for how long, which
// kernels mattered, and everything the recording lost. Nothing lost is
// left out of the summary: every non-zero drop or failure counter, a cut
// short or unclosed recording, the last errors the agent logged, and
// memory states lost or not taken are problems, and a report with problems
// says so first.
package info

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Top kernels and log lines shown per process.
const (
	topKernels = 10
	lastErrors = 5
)

// Report is the summary of a recording.
type Report struct {
	Recording string     `json:"recording"`
	Processes []*Process `json:"processes"`
	Total     *Total     `json:"total,omitempty"` // when there are several processes
}

// Process summarizes one process's recording.
type Process struct {
	Name          string   `json:"name"`
	Damaged       string   `json:"damaged,omitempty"` // why the recording could not be read; the other fields are empty
	PID           uint32   `json:"pid"`
	PPID          uint32   `json:"ppid"`
	Host          string   `json:"host"`
	Rank          *int32   `json:"rank,omitempty"`
	LocalRank     *int32   `json:"local_rank,omitempty"`
	WorldSize     *int32   `json:"world_size,omitempty"`
	Argv          []string `json:"argv"`
	Python        string   `json:"python,omitempty"`
	AgentVersion  string   `json:"agent_version"`
	CuptiPath     string   `json:"cupti_path"`
	DriverVersion int32    `json:"driver_version"`
	CallstackMode string   `json:"callstack_mode"`
	GPUTiming     bool     `json:"gpu_timing"`
	TimingSerial  bool     `json:"gpu_timing_serial,omitempty"`
	TimingSample  string   `json:"gpu_timing_sample,omitempty"` // "ON/EVERY" when kernels were timed in windows
	TimingSteps   string   `json:"gpu_timing_steps,omitempty"`  // "FIRST/EVERY" when kernels were timed by training steps
	TimedSteps    []int    `json:"timed_steps,omitempty"`       // timed by steps: the steps with an eager launch timed
	KernelFilter  string   `json:"kernel_filter,omitempty"`
	Devices       []Device `json:"devices"`

	FirstNS uint64 `json:"first_ns"` // earliest host or GPU timestamp
	LastNS  uint64 `json:"last_ns"`  // latest one
	SpanNS  uint64 `json:"span_ns"`

	Launches      int    `json:"launches"`             // eager: ran as themselves
	Captured      int    `json:"captured"`             // built a graph node
	Steps         int    `json:"steps,omitempty"`      // training steps the launches went through (recording.Stepper)
	StepRange     string `json:"step_range,omitempty"` // steps are the NVTX ranges matching this regular expression; "" for torch.optim optimizer steps
	Untimed       int    `json:"untimed,omitempty"`    // eager launches made between sampled timing's windows
	GraphLaunches int    `json:"graph_launches"`
	KernelRuns    int    `json:"kernel_runs"` // GPU activity records
	GPUTimeNS     uint64 `json:"gpu_time_ns"`
	// GPUTimeScaledNS is GPUTimeNS scaled to every eager launch where some were untimed (sampled
	// timing): GPUTimeNS × Launches / timed launches; 0 when every launch was timed.
	GPUTimeScaledNS uint64 `json:"gpu_time_scaled_ns,omitempty"`
	UnlinkedRuns    int    `json:"unlinked_runs"` // activity with no launch in the recording
	Kernels         int    `json:"kernels"`       // distinct kernels described
	Modules         int    `json:"modules"`
	ModuleBytes     uint64 `json:"module_bytes"`
	ModulesWithPTX  int    `json:"modules_with_ptx,omitempty"` // PTX kept beside them (Triton's), for gpurr race
	// ModulesMissing are the digests of module images the recording stored that are not in its
	// modules folder: a recording copied without them (as gpurr's own fixtures are) still
	// reads whole, so this is reported, not a problem; an image of the wrong size is (Files).
	ModulesMissing   []string `json:"modules_missing,omitempty"`
	Callstacks       int      `json:"callstacks"`
	LaunchesFiltered uint64   `json:"launches_filtered,omitempty"` // skipped by --kernels, by design
	// CUPTIClient: the program's own CUPTI client (a profiler) subscribed beside the agent, and
	// CUPTIClientRecords activity records were passed on to it, CUPTIClientDropped of its kinds
	// were not (format 1.18).
	CUPTIClient        bool        `json:"cupti_client,omitempty"`
	CUPTIClientRecords uint64      `json:"cupti_client_records,omitempty"`
	CUPTIClientDropped uint64      `json:"cupti_client_records_dropped,omitempty"` // of its kinds, not passed on
	AgentNS            uint64      `json:"agent_ns"`                               // agent time on the program's threads
	AgentLaunchNS      uint64      `json:"agent_launch_ns,omitempty"`              // of it, in launch callbacks (format 1.4)
	AgentParts         *AgentParts `json:"agent_parts,omitempty"`                  // where the launch callbacks' time went (format 1.9)
	Memory             *Memory     `json:"memory,omitempty"`                       // memory capture, when it was on
	Autograd           *Autograd   `json:"autograd,omitempty"`                     // PyTorch's autograd, when torch was loaded
	XLA                *XLA        `json:"xla,omitempty"`                          // XLA's dump and compilation, for a JAX or other XLA program

	TopByCount []KernelUse `json:"top_by_count"`
	TopByTime  []KernelUse `json:"top_by_gpu_time"`
	TopLines   []LineUse   `json:"top_lines_by_gpu_time"` // the program's lines that launched the GPU time
	Ranges     *Ranges     `json:"nvtx,omitempty"`        // NVTX ranges (format 1.7)
	Probes     *Probes     `json:"probes,omitempty"`      // live probes (gpurr record --probe; format 1.10)
	Copies     *Copies     `json:"copies,omitempty"`      // copies, memsets and host waits (format 1.15); nil when none was recorded

	// GraphBuilt of Captured are kernel nodes added or changed through the graph API
	// (cuGraphAddKernelNode, cuGraphExecKernelNodeSetParams, ...) rather than by stream capture.
	// ConditionalNodes and MemoryNodes are graph nodes the graph API built whose work is no
	// launch gpurr sees: a conditional node (its body's kernels link only through their own
	// nodes), a graph's memory allocation or free.
	// DeviceLaunchModules are modules whose kernels launch kernels from the device (dynamic
	// parallelism), launches CUPTI's callbacks do not see.
	GraphBuilt          int `json:"graph_built,omitempty"`
	ConditionalNodes    int `json:"conditional_nodes,omitempty"`
	MemoryNodes         int `json:"memory_nodes,omitempty"`
	DeviceLaunchModules int `json:"device_launch_modules,omitempty"`

	Complete  bool      `json:"complete"`
	Truncated bool      `json:"truncated"`
	EndReason string    `json:"end_reason,omitempty"`
	Losses    []Counter `json:"losses"` // non-zero drop and failure counters
	// Files names, one line each, files the records point to that are missing or damaged:
	// module images, chunk packs, chunks of snapshots (checkFiles).
	Files  []string    `json:"files_damaged,omitempty"`
	Errors []*LogEntry `json:"last_errors"` // the last error entries of the log
	// Hang is what gpurr record --hang-timeout found: a launch the GPU did not finish (format
	// 1.13); nil when it found none or was off.
	Hang *Hang `json:"hang,omitempty"`
	// Chunks is what reading every chunk of the chunk store found (gpurr info --check); nil
	// when not checked or the process has no store.
	Chunks *ChunkCheck `json:"chunk_check,omitempty"`
}

// Device is a GPU the process used.
type Device struct {
	Ordinal     uint32 `json:"ordinal"`
	Name        string `json:"name"`
	UUID        string `json:"uuid"`
	CC          string `json:"cc"`
	SMs         uint32 `json:"sm_count"`
	MemoryBytes uint64 `json:"memory_bytes"`
}

// KernelUse is how much one kernel ran.
type KernelUse struct {
	Name      string `json:"name"` // readable, shortened
	Launches  int    `json:"launches"`
	Runs      int    `json:"runs"`
	GPUTimeNS uint64 `json:"gpu_time_ns"`
}

// LineUse is the GPU work launched from one line of the program. A kernel
// launched inside an autograd node's backward counts at its forward line,
// the line whose backward it computes, and in the Backward fields too.
type LineUse struct {
	Line              string `json:"line"` // file:line function, the innermost frame in the program's own code
	Runs              int    `json:"runs"`
	GPUTimeNS         uint64 `json:"gpu_time_ns"`
	BackwardRuns      int    `json:"backward_runs,omitempty"`
	BackwardGPUTimeNS uint64 `json:"backward_gpu_time_ns,omitempty"`
}

// Autograd says whether the launches of PyTorch's backward pass are linked
// to the forward lines whose backward they compute, and how many are.
type Autograd struct {
	TorchVersion     string `json:"torch_version"`
	Linked           bool   `json:"linked"`           // the agent read autograd's state: launches carry their context
	Reason           string `json:"reason,omitempty"` // why not
	BackwardLaunches int    `json:"backward_launches"`
	BackwardLinked   int    `json:"backward_linked"` // of them, those whose forward callstack the recording holds
}

// Counter is a named Stats counter.
type Counter struct {
	Name  string `json:"name"`
	Value uint64 `json:"value"`
}

// LogEntry is a line of the agent's log.
type LogEntry struct {
	AtNS    uint64 `json:"at_ns"` // since the process started recording
	Level   string `json:"level"`
	Message string `json:"message"`
}

// Total adds up the processes of a recording.
type Total struct {
	Processes     int    `json:"processes"`
	Launches      int    `json:"launches"`
	Captured      int    `json:"captured"`
	GraphLaunches int    `json:"graph_launches"`
	KernelRuns    int    `json:"kernel_runs"`
	GPUTimeNS     uint64 `json:"gpu_time_ns"`
	Kernels       int    `json:"kernels"` // distinct by identity across processes
	WithProblems  int    `json:"with_problems"`
}

// Problems names what went wrong with the process's recording, one short
// item each; empty when it is complete and lost nothing.
func (p *Process) Problems() []string {
	if p.Damaged != "" {
		return []string{"damaged"}
	}
	var out []string
	switch {
	case p.Truncated:
		out = append(out, "truncated")
	case !p.Complete:
		out = append(out, "incomplete")
	}
	for _, c := range p.Losses {
		out = append(out, c.Name)
	}
	if len(p.Files) > 0 {
		out = append(out, "files_damaged")
	}
	if p.Hang != nil {
		out = append(out, "hang")
	}
	if p.Chunks != nil && len(p.Chunks.Bad) > 0 {
		out = append(out, "chunks_damaged")
	}
	return append(out, p.Memory.problems()...)
}

// Summarize reads every process of set, each once from start to end, keeping what its
// summary adds up but never the records themselves (summary).
func Summarize(set *recording.Set, name string) (*Report, error) {
	r := &Report{Recording: name}
	identities := map[uint64]bool{}
	images := imageSums{}
	var firstErr error
	for _, p := range set.Processes {
		steps, err := recording.NewStepper(p.StepRange)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", p.Dir, err)
		}
		proc, ids, err := summarizeProcess(p, steps, images)
		if err != nil {
			// One damaged process does not hide the others: it is reported, they are read.
			if len(set.Processes) == 1 {
				return nil, err
			}
			firstErr = cmp.Or(firstErr, err)
			r.Processes = append(r.Processes, &Process{Name: p.Name, Damaged: err.Error()})
			continue
		}
		r.Processes = append(r.Processes, proc)
		for id := range ids {
			identities[id] = true
		}
	}
	// Processes Open could not open at all (an empty events file) are reported as damaged too.
	for _, err := range set.Damaged {
		name := "?"
		if pe := (*recording.ProcessError)(nil); errors.As(err, &pe) {
			name = pe.Name
		}
		r.Processes = append(r.Processes, &Process{Name: name, Damaged: err.Error()})
	}
	damaged := 0
	for _, p := range r.Processes {
		if p.Damaged != "" {
			damaged++
		}
	}
	if damaged == len(r.Processes) {
		return nil, firstErr
	}
	if len(r.Processes) > 1 {
		t := &Total{Processes: len(r.Processes), Kernels: len(identities)}
		for _, p := range r.Processes {
			t.Launches += p.Launches
			t.Captured += p.Captured
			t.GraphLaunches += p.GraphLaunches
			t.KernelRuns += p.KernelRuns
			t.GPUTimeNS += p.GPUTimeNS
			if len(p.Problems()) > 0 {
				t.WithProblems++
			}
		}
		r.Total = t
	}
	return r, nil
}

// summarizeProcess reads p's records once, in order, and describes the process; ids are the
// identities of its kernels. images keeps the hashes of module images across processes.
func summarizeProcess(p *recording.Process, steps *recording.Stepper, images imageSums) (proc *Process, ids map[uint64]bool, err error) {
	s := newSummary(p.Name, steps, p)
	s.files.images = images
	defer s.files.close()
	res, err := p.Scan(s.add)
	if err != nil {
		return nil, nil, err
	}
	proc, err = s.finish(res.Truncated)
	return proc, s.identities, err
}

func ccString(d *pb.Device) string { return fmt.Sprintf("%d.%d", d.GetCcMajor(), d.GetCcMinor()) }

// losses lists the non-zero counters that count records lost or failed; lost memory states
// are memory capture's problems (Memory).
func losses(s *pb.Stats) []Counter {
	var out []Counter
	for _, l := range recording.Losses(s) {
		if !strings.HasSuffix(l.Name, "_lost") {
			out = append(out, Counter{Name: l.Name, Value: l.Value})
		}
	}
	return out
}

func since(start, t uint64) uint64 {
	if t < start {
		return 0
	}
	return t - start
}

func top(all []KernelUse, order func(a, b KernelUse) int) []KernelUse {
	s := slices.Clone(all)
	slices.SortStableFunc(s, order)
	return s[:min(len(s), topKernels)]
}

// shorten cuts a readable kernel name to at most n bytes. Template
// arguments and parameter lists are what make C++ names long, so the head
// (namespace and kernel name) is kept and the tail cut.
func shorten(name string, n int) string {
	if name == "" {
		return "(unknown kernel)"
	}
	if len(name) <= n {
		return name
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + "..."
}

// AgentParts is where the agent's time in launch callbacks went (format 1.9):
// the parts measured on the same sampled launches as AgentLaunchNS, and the
// callstacks it met for the first time, each of which it decoded and wrote.
type AgentParts struct {
	StackNS    uint64 `json:"stack_ns"`     // taking callstacks, new ones included
	AutogradNS uint64 `json:"autograd_ns"`  // reading PyTorch's autograd context
	RingNS     uint64 `json:"ring_ns"`      // writing launch records to the ring
	StacksNew  uint64 `json:"stacks_new"`   // callstacks met for the first time
	StackNewNS uint64 `json:"stack_new_ns"` // the time those took, every one timed
	// Memory capture (1.11): finding regions, carrying, enqueueing hash jobs; and of that,
	// launching gpurr's own hash kernels.
	MemoryNS       uint64 `json:"memory_ns,omitempty"`
	MemoryLaunchNS uint64 `json:"memory_launch_ns,omitempty"`
}

func agentParts(s *pb.Stats) *AgentParts {
	p := &AgentParts{StackNS: s.GetAgentStackNs(), AutogradNS: s.GetAgentAutogradNs(), RingNS: s.GetAgentRingNs(),
		StacksNew: s.GetStacksNew(), StackNewNS: s.GetAgentStackNewNs(),
		MemoryNS: s.GetAgentMemoryNs(), MemoryLaunchNS: s.GetAgentMemoryLaunchNs()}
	if *p == (AgentParts{}) {
		return nil // before 1.9, or no launch sampled
	}
	return p
}

// NoLaunch says that process name has no launch seq, and which launches it has; when its
// recording ended short (truncated, or no end record) and seq comes after them, that later
// launches were lost with the end: the words of every verb that looks a launch up.
func NoLaunch(name string, seq uint64, d *recording.Data) string {
	n := len(d.Launches)
	if n == 0 {
		return fmt.Sprintf("%s has no launch %d (it holds none)", name, seq)
	}
	first, last := d.Launches[0].GetSeq(), d.Launches[n-1].GetSeq()
	msg := fmt.Sprintf("%s has no launch %d (launches %d to %d", name, seq, first, last)
	if seq > last && (d.Truncated || !d.Complete()) {
		msg += "; the recording ends short, the program killed: later launches were not written"
	}
	return msg + ")"
}

// XLA is what info says of an XLA program (JAX): the optimized modules XLA dumped into the
// recording, the launches given their lines by them, and the launches made while XLA compiled.
type XLA struct {
	Modules int    `json:"modules"`         // optimized HLO modules read from the dump
	Lines   int    `json:"launches_lined"`  // launches whose line came from the dump
	Compile int    `json:"compile"`         // launches made while XLA compiled and autotuned
	Error   string `json:"error,omitempty"` // why the dump could not be read
}
