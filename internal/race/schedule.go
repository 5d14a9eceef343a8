package race

import (
	"fmt"
	"math"
	"time"

	"github.com/gpurr/gpurr/internal/instrument"
)

// A race hidden by work between its two accesses shows only under a delay longer than that
// work, which can be most of the kernel's time; a short delay finds the races between nearby
// accesses, at a trial's lowest cost. So a hunt that is not given a delay climbs a ladder of
// delays from FirstDelay up to the launch's recorded duration, within a time budget. The whole
// schedule is decided before the first trial: a step changes the kernel's code (one JIT),
// a trial only the seed.

// Ladder is the delays an escalating hunt climbs, in order: 1-2-5 steps, each more than twice
// the last but one, up to nanosleep's limit.
var ladder = []time.Duration{
	2 * time.Microsecond, 5 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond,
	50 * time.Microsecond, 100 * time.Microsecond, 200 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond,
}

const (
	// UntimedLongest is the longest delay for a launch whose GPU duration the recording lacks
	// (recorded with GPU timing off): long enough for the work of a kernel of a few tens of
	// microseconds between two accesses.
	UntimedLongest = 100 * time.Microsecond
	// firstFraction and lastFraction are the share of units that sleep at the shortest and
	// the longest delay. A long delay finds a race when one side sleeps and the other does
	// not, which happens most often at one half.
	firstFraction, lastFraction = 0.25, 0.5
)

// Placements are the escalating hunt's placements, in the order it tries them: warps (the
// threads that share a warp run its instructions together), then threads (a race inside a
// warp, before a __syncwarp), then CTAs (a producer in one CTA, its consumer in another).
var placements = []instrument.Placement{instrument.PerWarp, instrument.PerThread, instrument.PerCTA}

// Plan is what an escalating hunt's schedule is made from: the launch, the budget, and the
// choices the user fixed.
type Plan struct {
	Kernel    time.Duration        // the launch's recorded GPU duration, 0 where the recording has none
	Budget    time.Duration        // how long the trials may take in all
	Overhead  time.Duration        // what a replay costs besides the kernel: restoring its regions, launching
	Points    int                  // the delay points: a thread passes each once in a kernel without loops
	Trials    int                  // the most trials of one step
	Placement instrument.Placement // "" lets the schedule pick, else every step uses it
	Fraction  float64              // 0 lets the schedule pick, else every step uses it
}

// Step is one stage of a hunt: Trials seeded trials, all with one delay.
type Step struct {
	Delay  instrument.Delay
	Trials int
}

// String says a step in a few words: "20µs at 50% of warps".
func (s Step) String() string {
	return fmt.Sprintf("%v at %.0f%% of %ss", time.Duration(s.Delay.Nanoseconds), 100*s.Delay.Fraction, s.Delay.Placement)
}

// Longest is the longest delay the schedule reaches: the first rung of the ladder at least
// the kernel's duration (UntimedLongest where it is unknown), at most nanosleep's 1 ms.
func (p Plan) Longest() time.Duration {
	want := p.Kernel
	if want <= 0 {
		want = UntimedLongest
	}
	for _, d := range ladder {
		if d >= want {
			return d
		}
	}
	return ladder[len(ladder)-1]
}

// TrialCost is what the plan expects one trial with delay d to take: the replay, the kernel,
// and every point's delay in turn (the most a thread sleeps in a kernel without loops).
func (p Plan) TrialCost(d time.Duration) time.Duration {
	return p.Overhead + max(p.Kernel, 0) + time.Duration(max(p.Points, 1))*d
}

// Schedule lays out an escalating hunt: for each placement (the one fixed, or warp, thread and
// CTA in turn), the delays of the ladder up to Longest, the fraction growing from a quarter to
// a half with them. Each step has an equal share of the budget, and as many trials as fit in
// it at TrialCost, at least one and at most Trials. Steps come in the order they run: every
// delay with warps first, so that a budget that runs out early has tried them all once.
func Schedule(p Plan) []Step {
	if p.Trials <= 0 {
		return nil
	}
	longest := p.Longest()
	var delays []time.Duration
	for _, d := range ladder {
		if d <= longest {
			delays = append(delays, d)
		}
	}
	places := placements
	if p.Placement != "" {
		places = []instrument.Placement{p.Placement}
	}
	share := p.Budget / time.Duration(len(places)*len(delays))
	var steps []Step
	for _, place := range places {
		for i, d := range delays {
			fraction := p.Fraction
			if fraction == 0 {
				fraction = firstFraction
				if len(delays) > 1 {
					// In hundredths, as a user gives --fraction to reproduce a witness.
					fraction += math.Round(100*(lastFraction-firstFraction)*float64(i)/float64(len(delays)-1)) / 100
				}
			}
			trials := min(p.Trials, max(1, int(share/p.TrialCost(d))))
			steps = append(steps, Step{Delay: instrument.Delay{Nanoseconds: uint32(d.Nanoseconds()), Fraction: fraction, Placement: place},
				Trials: trials})
		}
	}
	return steps
}
