package agent

import (
	"time"

	"github.com/gpurr/gpurr/internal/agentcfg"
)

// timingSampler runs sampled GPU timing (--gpu-timing=sample): from the writer's loop it keeps
// CUPTI's kernel activity on for the first ON of every EVERY and off for the rest, so that the
// cost CUPTI adds to each kernel it times is paid in the windows only. Launches made between
// windows say so (Launch.untimed).
type timingSampler struct {
	on, every time.Duration
	start     time.Time          // of the current period
	timing    bool               // kernel activity is on (it starts on)
	set       func(on bool) bool // turns it on or off; false when CUPTI refused (the agent logs why)
	stopped   bool               // CUPTI refused once: leave it as it is
}

// newTimingSampler returns nil unless cfg samples GPU timing.
func newTimingSampler(cfg agentcfg.Config, now time.Time, set func(on bool) bool) *timingSampler {
	if cfg.GPUTiming != agentcfg.TimingSample {
		return nil
	}
	on, every, _ := agentcfg.ParseSample(cfg.GPUTimingSample) // Decode validated it
	return &timingSampler{on: on, every: every, start: now, timing: true, set: set}
}

// tick turns timing on or off as the window at now wants it.
func (s *timingSampler) tick(now time.Time) {
	if s == nil || s.stopped {
		return
	}
	if now.Sub(s.start) >= s.every {
		s.start = now
	}
	if want := now.Sub(s.start) < s.on; want != s.timing {
		s.timing = want
		s.stopped = !s.set(want)
	}
}
