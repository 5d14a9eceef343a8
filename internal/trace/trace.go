package trace

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/gpurr/gpurr/recording"
	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// Format is a timeline file format.
type Format int

// The formats Write writes.
const (
	Chrome   Format = iota + 1 // Chrome trace-event JSON
	Perfetto                   // Perfetto protobuf (a Trace message: TracePackets)
)

func (f Format) String() string {
	switch f {
	case Chrome:
		return "chrome"
	case Perfetto:
		return "perfetto"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// ParseFormat reads a --format value: chrome (or json), perfetto.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "chrome", "json":
		return Chrome, nil
	case "perfetto":
		return Perfetto, nil
	}
	return 0, fmt.Errorf("unknown trace format %q (want chrome or perfetto)", s)
}

// FormatOf is the format a file name asks for: .json is Chrome JSON,
// .perfetto-trace, .pftrace and .pb are Perfetto; false for other names.
func FormatOf(path string) (Format, bool) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return Chrome, true
	case ".perfetto-trace", ".pftrace", ".pb":
		return Perfetto, true
	}
	return 0, false
}

// Options select what the timeline shows. The zero value shows everything.
type Options struct {
	// Kernels keeps the kernels (and their launch calls) whose mangled or
	// demangled name matches. Graph launch calls are kept whatever it says.
	Kernels *regexp.Regexp
	// Launches keeps the launch calls with these sequence numbers (as
	// gpurr info and query number them) and the kernels they ran; for a
	// graph replay, its cuGraphLaunch's number. A kernel whose launch call
	// is not in the recording is then left out too.
	Launches func(seq uint64) bool
	// From and To keep the events that overlap [From, To), measured from
	// the start of the timeline (the earliest process start); To 0 runs to
	// the end.
	From, To time.Duration
}

// Stats counts what Write wrote.
type Stats struct {
	Processes    int
	Calls        int // launch and graph launch calls on host threads
	Kernels      int // kernel executions on the GPU (the program's)
	GraphKernels int // of them, run by CUDA graph replays
	Attributed   int // graph kernels joined to the launch that captured them
	Flows        int // kernels linked by an arrow to the call that launched them
	Unlinked     int // kernels whose launch call is not in the recording (dropped or filtered when recorded)
	// Sampled are the eager launch calls of processes whose GPU timing was sampled (by steps or
	// in windows); Untimed of them were made while it was off: no kernel slice is expected.
	Sampled, Untimed int
	OwnKernels       int // gpurr's own memory-capture kernels
	Copies           int // copies and memsets on the GPU, each with an arrow from its call when recorded (format 1.15)
	HostCalls        int // copy, memset and synchronization calls on host threads (format 1.15)
	Ranges           int // NVTX ranges
	Skipped          int // kernel records with no usable start and end time
	Probed           int // launches whose live probes' CTAs are on SM tracks (gpurr record --probe)
	ProbeCTAs        int // their CTAs
	// Shortfalls says, one line each, which recordings ended short (recording.Shortfall) and
	// which lost or failed to record something (recording.LossWarning), and whose NVTX range
	// paths were shortened (recording.Ranges.PathWarning).
	Shortfalls []string
	// Selected counts the launch calls and kernels (the program's and gpurr's own) that passed
	// Kernels and Launches, inside the --time window or not: none means the filters matched
	// nothing.
	Selected int
	// End is where the last event read ends, from the timeline's start: what --time can select
	// within.
	End time.Duration
}

// Write writes the processes' recordings to w as one timeline in format
// f. Processes come in the order given; each is read once, streaming. An
// error reading a recording is returned as it is (it names the file);
// what was written to w before it is incomplete.
func Write(w io.Writer, f Format, procs []*recording.Process, o Options) (Stats, error) {
	var s sink
	switch f {
	case Chrome:
		s = newChromeSink(w)
	case Perfetto:
		s = newPerfettoSink(w)
	default:
		return Stats{}, fmt.Errorf("trace: unknown format %v", f)
	}
	tw := &writer{sink: s, opts: o, maxPending: recording.DefaultMaxCalls, maxEarly: recording.DefaultMaxKernels}
	tw.clock = alignClocks(procs)
	tw.shared = sharedNames(procs)
	for i, p := range procs {
		err := tw.process(i, p)
		var damaged *damagedError
		if errors.As(err, &damaged) && len(procs) > 1 {
			// One damaged rank does not hide the others.
			tw.stats.Shortfalls = append(tw.stats.Shortfalls, fmt.Sprintf("%s: damaged (%v); the timeline holds what came before", damaged.name, damaged.err))
			continue
		}
		if err != nil {
			return tw.stats, err
		}
	}
	return tw.stats, s.finish()
}

// writer carries the state shared by the processes of one timeline.
type writer struct {
	sink       sink
	opts       Options
	clock      clock
	stats      Stats
	maxPending int
	maxEarly   int
	shared     map[string]bool // process names to qualify with the directory (sharedNames)
}

// processName names a process on the timeline by its rank, host and pid.
func processName(info *pb.Process) string {
	name := fmt.Sprintf("%s (pid %d)", info.GetHostname(), info.GetPid())
	if info.Rank != nil {
		name = fmt.Sprintf("rank %d %s", info.GetRank(), name)
	}
	return name
}

// sharedNames are the names (processName) of more than one of procs: two runs of a job in
// containers, where pids repeat, given together. Those processes are also named by their
// directory, so that they can be told apart.
func sharedNames(procs []*recording.Process) map[string]bool {
	seen, shared := map[string]bool{}, map[string]bool{}
	for _, p := range procs {
		name := processName(p.Info)
		shared[name] = seen[name]
		seen[name] = true
	}
	return shared
}

// clock maps each process's recording clock onto the timeline: ns since
// the earliest process start, on the wall clock when every process has
// one (Process.start_unix_ns), else on the recording clock itself (one
// host: CUPTI's clock is shared by its processes).
type clock struct {
	offset []int64 // add to a recording-clock time of process i
}

func alignClocks(procs []*recording.Process) clock {
	wall := true
	for _, p := range procs {
		if p.Info.GetStartUnixNs() == 0 || p.Info.GetStartNs() == 0 {
			wall = false
		}
	}
	c := clock{offset: make([]int64, len(procs))}
	var base int64
	for i, p := range procs {
		if wall {
			c.offset[i] = p.Info.GetStartUnixNs() - int64(p.Info.GetStartNs())
		}
		if start := int64(p.Info.GetStartNs()) + c.offset[i]; i == 0 || start < base {
			base = start
		}
	}
	for i := range c.offset {
		c.offset[i] -= base
	}
	return c
}

// selected counts a launch call or kernel that passed Kernels and Launches, and reports
// whether it overlaps the --time window.
func (tw *writer) selected(ts, dur int64) bool {
	tw.stats.Selected++
	return tw.inWindow(ts, dur)
}

// inWindow reports whether an event at ts lasting dur overlaps the
// --time window.
func (tw *writer) inWindow(ts, dur int64) bool {
	tw.stats.End = max(tw.stats.End, time.Duration(ts+dur))
	from, to := int64(tw.opts.From), int64(tw.opts.To)
	if ts+dur < from || (dur > 0 && ts+dur == from) {
		return false
	}
	return to == 0 || ts < to
}

// sink is a file format: tracks are declared once, before their first
// slice; slices come in any order.
type sink interface {
	track(t *track) error
	slice(s *slice) error
	finish() error
}

// process is a timeline process: one recorded process.
type process struct {
	pid      int // 1, 2, ... in the order given (real pids collide across hosts)
	uuid     uint64
	name     string
	argv     []string
	declared bool // handed to the sink (with its first track)
}

// track is a row of the timeline: a host thread, or a lane of a GPU stream
// (kernels that overlap on one stream, as a graph's parallel branches do,
// go to further lanes, so each lane's slices are disjoint).
type track struct {
	proc     *process
	uuid     uint64
	tid      int64 // host threads: the Linux thread id; GPU tracks: 1<<30 and up
	thread   bool
	name     string
	base     string // the stream's name, without the lane number
	lane     int
	sort     int
	lastEnd  int64
	next     *track // the stream's next lane
	declared bool   // handed to the sink
}

// slice is one event to write; the writers reuse it.
type slice struct {
	track   *track
	name    string
	cat     string
	ts, dur int64
	instant bool   // a launch call whose duration is not recorded (before format 1.15)
	flowOut uint64 // a flow starts here (a launch call)
	flowIn  uint64 // a flow ends here (a kernel)
	chain   bool   // Perfetto: the flow goes on to the next kernel of a graph replay
	args    []arg
}

// arg is a slice argument: a number or a string.
type arg struct {
	key string
	s   string
	n   int64
	num bool
}

func num(key string, n int64) arg { return arg{key: key, n: n, num: true} }
func str(key, s string) arg       { return arg{key: key, s: s} }
