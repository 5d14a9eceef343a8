package replay

import (
	"fmt"
	"strings"

	"github.com/gpurr/gpurr/internal/cuda"
)

// Status is how a launch's replay compared with its recording.
type Status string

// The statuses, from best to worst. docs/replay.md gives each its exit code.
const (
	StatusExact            Status = "bit-exact"        // every compared byte equals the recording
	StatusWithin           Status = "within-tolerance" // every element within the Check's tolerances
	StatusTorn             Status = "torn"             // differs from a recorded state that is torn (judgeTorn)
	StatusSkipped          Status = "skipped"          // a kernel that cannot run alone (NotStandalone): not run
	StatusDiffers          Status = "differs"          // repeatable, but not the recording
	StatusNondeterministic Status = "nondeterministic" // two replays disagree with each other
	StatusFailed           Status = "failed"           // it could not run
)

// Outcome is one recorded launch replayed and judged.
type Outcome struct {
	Launch       uint64
	Kernel       string            // demangled name, when known
	Case         *Case             // nil when the recording lacks what a replay needs (Why says what)
	Config       cuda.LaunchConfig // as replayed: the recorded shape and how it was launched, or the Request's Shape
	Unhonoured   []string          // how the program launched that replay could not follow (Case.Unhonoured)
	Device       string            // the GPU it ran on: "NVIDIA H100 (sm_90)"
	Addresses    []uint64          // where each region lived in the replay
	Relocated    int
	Notes        []string
	Code         string  // what code ran when it was not the recorded module's: Session.Code
	Result       *Result // nil unless it ran
	Status       Status
	Why          string
	ContextLost  bool   // a fault left this process's CUDA context unusable
	FreshContext bool   // after ContextLost, the launches after this one run in a fresh context
	AfterFault   uint64 // the launch whose fault this one ran after, in a fresh context; 0 none
}

// Request says how to replay: the session's options, a change to the recorded launch shape
// (nil keeps it), how many timed runs, and how to compare. RecordedPTX runs each launch from
// the PTX the recording holds of its module (Source.RecordedPTX) instead of its machine code.
type Request struct {
	Options     Options
	RecordedPTX bool
	Shape       func(cuda.LaunchConfig) cuda.LaunchConfig
	Repeat      int
	Check       Check
}

// Replay runs launch seq (its Case c when the caller built it already, else nil) as r asks and
// judges it. A result that differs from the recording is replayed once more, to tell a kernel
// that reads state replay does not restore from one that is not deterministic; one that differs
// from a torn state is StatusTorn.
func (src *Source) Replay(seq uint64, c *Case, r Request) (o Outcome) {
	o = Outcome{Launch: seq, Status: StatusFailed, Case: c}
	defer func() {
		before, after := src.Tears(seq)
		judgeTorn(&o, before, after)
	}()
	if c == nil {
		var err error
		if c, err = src.Case(seq); err != nil {
			o.Why = err.Error()
			if l := src.Links.Launch(seq); l != nil {
				if k := src.Links.Kernel(l.KernelId); k != nil {
					o.Kernel = src.Links.KernelName(k)
				}
			}
			return o
		}
		o.Case = c
	}
	o.Kernel = c.Name
	if why := NotStandalone(c.Name); why != "" {
		o.Status, o.Why = StatusSkipped, why
		return o
	}
	o.Config, o.Unhonoured = c.Recorded(), c.Unhonoured()
	if r.Shape != nil {
		o.Config = r.Shape(o.Config)
	}
	if r.RecordedPTX {
		p, err := src.RecordedPTX(c)
		if err != nil {
			o.Why = err.Error()
			return o
		}
		r.Options.PTX = p
	}
	s, err := NewSession(c, r.Options)
	if err != nil {
		o.Why, o.ContextLost = err.Error(), cuda.ContextLost(err)
		return o
	}
	defer func() {
		if cerr := s.Close(); cerr != nil && !o.ContextLost {
			o.Notes = append(o.Notes, "cleanup: "+cerr.Error())
		}
	}()
	o.Device = fmt.Sprintf("%s (%s)", s.Device.Name, s.Device.Arch())
	o.Relocated, o.Notes, o.Code = s.Relocated, s.Notes, s.Code
	for i := range c.Regions {
		o.Addresses = append(o.Addresses, s.Address(i))
	}
	if n, err := s.fn.Attribute(cuda.FuncMaxThreadsPerBlock); err == nil {
		if why := c.blockRefused(o.Config, n); why != "" {
			o.Why = why
			return o
		}
	}
	res, err := s.Run(o.Config, r.Repeat, r.Check)
	if err != nil {
		o.Why, o.ContextLost = runFailed(c, err)
		return o
	}
	o.Result = res
	switch {
	case res.Identical():
		o.Status = StatusExact
	case res.Within(r.Check):
		o.Status = StatusWithin
	default:
		o.Status = StatusDiffers
		again, err := s.Run(o.Config, 1, Check{})
		if err == nil && !sameOutputs(res, again) {
			o.Status = StatusNondeterministic
		}
		o.Why = src.explainDiffers(c, o.Status == StatusDiffers)
	}
	return o
}

// runFailed says why a run of c failed with err, and whether the fault lost
// the CUDA context. It names what replay could not launch as the program
// did, the likelier cause of a fault where there is such a thing.
func runFailed(c *Case, err error) (why string, lost bool) {
	why, lost = err.Error(), cuda.ContextLost(err)
	if u := c.Unhonoured(); len(u) > 0 {
		why += "; replayed without " + strings.Join(u, ", ")
	}
	if lost {
		why += "; the kernel may read memory outside its recorded regions (pointers held in device memory)"
	}
	return why, lost
}

func sameOutputs(a, b *Result) bool {
	for i := range a.Regions {
		if a.Regions[i].Output != b.Regions[i].Output {
			return false
		}
	}
	return true
}

// ReplayAll replays seqs in order, handing each outcome to each as it ends. A fault that loses
// the CUDA context does not take the later launches with it: they run in fresh contexts
// (cuda.ResetContexts), and the outcomes say so. Where no fresh context works the loop ends:
// the launches not replayed are returned, so the caller can say how to go on from the first of
// them in a new process.
func (src *Source) ReplayAll(seqs []uint64, r Request, each func(Outcome)) (notReplayed []uint64) {
	return replayAll(seqs, func(seq uint64) Outcome { return src.Replay(seq, nil, r) }, cuda.ResetContexts, each)
}

// replayAll is ReplayAll's loop: one replays a launch, fresh makes new contexts after a fault.
func replayAll(seqs []uint64, one func(uint64) Outcome, fresh func() error, each func(Outcome)) []uint64 {
	var faulted uint64
	for i, seq := range seqs {
		o := one(seq)
		o.AfterFault = faulted
		if o.ContextLost {
			if err := fresh(); err != nil {
				o.Notes = append(o.Notes, "no fresh CUDA context could be made after the fault: "+err.Error())
				each(o)
				return seqs[i+1:]
			}
			o.FreshContext, faulted = true, seq
		}
		each(o)
	}
	return nil
}
