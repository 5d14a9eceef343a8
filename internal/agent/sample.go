package agent

import (
	"time"

	"github.com/gpurr/gpurr/internal/agentcfg"
)

// timingSampler runs sampled GPU timing's windows (--gpu-timing=sample): from the writer's loop
// it keeps CUPTI's kernel activity on for the first ON of every EVERY and off for the rest, so
// that the cost CUPTI adds to each kernel it times is paid in the windows only. Launches made
// between windows say so (Launch.untimed).
//
// Timed by steps (--gpu-timing=steps), the agent times whole training steps as they begin
// (activity.c); the windows are for a program without steps: they begin stepGrace after the
// first launch, every kernel timed until then, and end as the first step does (set refuses).
type timingSampler struct {
	on, every time.Duration
	start     time.Time          // of the current period
	timing    bool               // kernel activity is on (it starts on)
	set       func(on bool) bool // turns it on or off; false when CUPTI refused (the agent logs why) or steps rule
	stopped   bool               // set refused once: leave it as it is

	launched    func() bool // timed by steps: the process made its first launch; nil otherwise
	firstLaunch time.Time   // when the writer first saw it
}

// stepGrace is how long a program timed by steps runs from its first launch, every kernel
// timed, before windows begin where no step has ended: long enough for a first step that
// initializes cuBLAS, autotunes and compiles (a 30-step torch.optim loop's step 0 outlasted
// 5 s on an H200, and had 13 of its 20 launches windowed out), short beside a training run.
const stepGrace = 60 * time.Second

// newTimingSampler returns nil unless cfg samples GPU timing. launched tells whether the
// process made its first launch.
func newTimingSampler(cfg agentcfg.Config, now time.Time, set func(on bool) bool, launched func() bool) *timingSampler {
	if cfg.GPUTiming != agentcfg.TimingSample && cfg.GPUTiming != agentcfg.TimingSteps {
		return nil
	}
	on, every, _ := agentcfg.ParseSample(cfg.GPUTimingSample) // Decode validated it
	s := &timingSampler{on: on, every: every, start: now, timing: true, set: set}
	if cfg.GPUTiming == agentcfg.TimingSteps {
		s.launched = launched
	}
	return s
}

// tick turns timing on or off as the window at now wants it.
func (s *timingSampler) tick(now time.Time) {
	if s == nil || s.stopped {
		return
	}
	if s.launched != nil {
		if s.firstLaunch.IsZero() && s.launched() {
			s.firstLaunch = now
		}
		if s.firstLaunch.IsZero() || now.Sub(s.firstLaunch) < stepGrace {
			return
		}
		s.launched, s.start = nil, now // windows begin, the first one on
	}
	if now.Sub(s.start) >= s.every {
		s.start = now
	}
	if want := now.Sub(s.start) < s.on; want != s.timing {
		s.timing = want
		s.stopped = !s.set(want)
	}
}
