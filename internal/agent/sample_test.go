package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/agentcfg"
)

func TestTimingSampler(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var calls []bool
	refuse := false
	set := func(on bool) bool {
		calls = append(calls, on)
		return !refuse
	}
	cfg := agentcfg.Config{GPUTiming: agentcfg.TimingSample, GPUTimingSample: "20ms/100ms"}
	s := newTimingSampler(cfg, t0, set, nil)
	// Ticks every 2 ms for three periods: off at 20 ms into each, on again at each period's start.
	for ms := 0; ms <= 300; ms += 2 {
		s.tick(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	want := []bool{false, true, false, true, false, true}
	if len(calls) != len(want) {
		t.Fatalf("turned %v, want %v", calls, want)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Fatalf("turned %v, want %v", calls, want)
		}
	}
	// CUPTI refuses: the sampler stops turning.
	calls, refuse = nil, true
	s = newTimingSampler(cfg, t0, set, nil)
	for ms := 0; ms <= 300; ms += 2 {
		s.tick(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	if len(calls) != 1 {
		t.Errorf("after CUPTI refused, turned %v; want one try", calls)
	}
	if newTimingSampler(agentcfg.Config{GPUTiming: agentcfg.TimingOn}, t0, set, nil) != nil {
		t.Error("a sampler without sampled timing")
	}
	var none *timingSampler
	none.tick(t0) // every kernel timed: nothing to do
}

// TestTimingSamplerSteps: timed by steps, windows wait for the first launch and stepGrace
// after it, and stop for good once the agent refuses them (a first step ended).
func TestTimingSamplerSteps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var calls []bool
	var at []time.Duration
	launched, stepsRule := false, false
	cfg := agentcfg.Config{GPUTiming: agentcfg.TimingSteps, GPUTimingSample: "20ms/100ms", GPUTimingSteps: "3/10"}
	var now time.Time
	s := newTimingSampler(cfg, t0, func(on bool) bool {
		calls, at = append(calls, on), append(at, now.Sub(t0))
		return !stepsRule
	}, func() bool { return launched })
	tick := func(from, to time.Duration) {
		for d := from; d <= to; d += 2 * time.Millisecond {
			now = t0.Add(d)
			s.tick(now)
		}
	}
	tick(0, 10*time.Second) // no launch yet: timing stays on
	if len(calls) != 0 {
		t.Fatalf("before the first launch, turned %v", calls)
	}
	launched = true
	first := 10*time.Second + 2*time.Millisecond
	tick(first, first+stepGrace-2*time.Millisecond)
	if len(calls) != 0 {
		t.Fatalf("within stepGrace of the first launch, turned %v", calls)
	}
	tick(first+stepGrace, first+stepGrace+110*time.Millisecond)
	if len(calls) != 2 || calls[0] || !calls[1] || at[0] != first+stepGrace+20*time.Millisecond {
		t.Fatalf("windows after stepGrace: turned %v at %v", calls, at)
	}
	stepsRule = true // a first step ended
	tick(first+stepGrace+112*time.Millisecond, first+stepGrace+time.Second)
	if len(calls) != 3 {
		t.Errorf("once steps rule, turned %v; want one refused try", calls)
	}
}

func TestConfigSampledTiming(t *testing.T) {
	t.Setenv(agentcfg.CUPTI, "/nonexistent/libcupti.so")
	t.Setenv(agentcfg.GPUTiming, "sample")
	cfg, err := configFromEnv()
	if err != nil || cfg.GPUTiming != agentcfg.TimingSample || cfg.GPUTimingSample != agentcfg.DefaultSample {
		t.Fatalf("GPURR_GPU_TIMING=sample: %+v, %v", cfg, err)
	}
	t.Setenv(agentcfg.GPUTimingSample, "5ms")
	if _, err := configFromEnv(); err == nil || !strings.Contains(err.Error(), agentcfg.GPUTimingSample) {
		t.Errorf("a bad window: %v", err)
	}
	t.Setenv(agentcfg.GPUTimingSample, "10ms/50ms")
	t.Setenv(agentcfg.HangTimeout, "5s")
	if _, err := configFromEnv(); err == nil || !strings.Contains(err.Error(), "every kernel") {
		t.Errorf("a hang watch on sampled timing: %v", err)
	}
}
