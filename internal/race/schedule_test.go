package race

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpurr/gpurr/internal/instrument"
)

// steps writes a schedule in a line per placement: "warp 2µs/25%x20 5µs/50%x20".
func steps(ss []Step) string {
	var b strings.Builder
	var last instrument.Placement
	for _, s := range ss {
		if s.Delay.Placement != last {
			if last != "" {
				b.WriteString("; ")
			}
			last = s.Delay.Placement
			b.WriteString(string(last))
		}
		fmt.Fprintf(&b, " %v/%.0f%%x%d", time.Duration(s.Delay.Nanoseconds), 100*s.Delay.Fraction, s.Trials)
	}
	return b.String()
}

func TestSchedule(t *testing.T) {
	const us = time.Microsecond
	small := Plan{Budget: 10 * time.Second, Overhead: 100 * us, Points: 4, Trials: 20}
	with := func(p Plan, change func(*Plan)) Plan { change(&p); return p }
	for _, c := range []struct {
		name    string
		plan    Plan
		longest time.Duration
		want    string
	}{
		{"a 12µs kernel: up to 20µs, the fraction growing, every placement", with(small, func(p *Plan) { p.Kernel = 12 * us }), 20 * us,
			"warp 2µs/25%x20 5µs/33%x20 10µs/42%x20 20µs/50%x20; thread 2µs/25%x20 5µs/33%x20 10µs/42%x20 20µs/50%x20; cta 2µs/25%x20 5µs/33%x20 10µs/42%x20 20µs/50%x20"},
		{"a kernel shorter than the first delay: one delay", with(small, func(p *Plan) { p.Kernel = 400 }), 2 * us,
			"warp 2µs/25%x20; thread 2µs/25%x20; cta 2µs/25%x20"},
		{"a duration on a rung stops there", with(small, func(p *Plan) { p.Kernel = 10 * us; p.Placement = instrument.PerWarp }), 10 * us,
			"warp 2µs/25%x20 5µs/38%x20 10µs/50%x20"},
		{"no recorded duration: up to 100µs", with(small, func(p *Plan) { p.Placement = instrument.PerWarp }), 100 * us,
			"warp 2µs/25%x20 5µs/30%x20 10µs/35%x20 20µs/40%x20 50µs/45%x20 100µs/50%x20"},
		{"a long kernel: capped at nanosleep's 1ms; the budget sets the long steps' trials", with(small, func(p *Plan) {
			p.Kernel = 30 * time.Millisecond
			p.Placement, p.Fraction = instrument.PerCTA, 0.5
		}), time.Millisecond,
			// 10s/9 a step: 1.11s at (100µs + 30ms + 4 × d) a trial.
			"cta 2µs/50%x20 5µs/50%x20 10µs/50%x20 20µs/50%x20 50µs/50%x20 100µs/50%x20 200µs/50%x20 500µs/50%x20 1ms/50%x20"},
		{"a tight budget: at least one trial a step", with(small, func(p *Plan) {
			p.Kernel, p.Budget, p.Points = 900*us, 40*time.Millisecond, 100
			p.Placement = instrument.PerWarp
		}), time.Millisecond,
			// 40ms/9 a step, at 100µs + 900µs + 100 × d a trial: 1.2ms at 2µs, 3ms at 20µs.
			"warp 2µs/25%x3 5µs/28%x2 10µs/31%x2 20µs/34%x1 50µs/38%x1 100µs/41%x1 200µs/44%x1 500µs/47%x1 1ms/50%x1"},
		{"--trials 0: no step", with(small, func(p *Plan) { p.Trials = 0 }), 100 * us, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.plan.Longest(); got != c.longest {
				t.Errorf("longest %v, want %v", got, c.longest)
			}
			ss := Schedule(c.plan)
			if got := steps(ss); got != c.want {
				t.Errorf("schedule\n got %s\nwant %s", got, c.want)
			}
			for _, s := range ss {
				if err := s.Delay.Check(); err != nil {
					t.Errorf("step %v: %v", s, err)
				}
			}
		})
	}
}

// delayed is a kernel whose race shows only when the delay is at least need and the seed
// picks the right warps (odd seeds), and that hangs under a delay of hang or more.
type delayed struct {
	need, hang time.Duration
	delay      time.Duration
	seeds      []uint64
}

func (d *delayed) Run(points []int, seed uint64) (Output, error) {
	if len(points) > 0 {
		d.seeds = append(d.seeds, seed)
	}
	if d.hang > 0 && d.delay >= d.hang && len(points) > 0 {
		time.Sleep(300 * time.Millisecond)
	}
	if len(points) > 0 && d.delay >= d.need && seed%2 == 1 {
		return Output{7}, nil
	}
	return Output{1}, nil
}

func (d *delayed) set(s Step) error { d.delay = time.Duration(s.Delay.Nanoseconds); return nil }

func TestHuntEscalates(t *testing.T) {
	k := &delayed{need: 20 * time.Microsecond}
	plan := Plan{Kernel: 15 * time.Microsecond, Budget: time.Minute, Trials: 3, Placement: instrument.PerWarp}
	res, err := Hunt(k, 4, Options{Steps: Schedule(plan), SetStep: k.set, Seed: 100})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Found || k.delay != 20*time.Microsecond {
		t.Fatalf("found %v at %v; want a witness at 20µs", res.Found, k.delay)
	}
	var ran []int
	for _, s := range res.Steps {
		ran = append(ran, s.Ran)
	}
	// 2, 5 and 10µs: 3 trials each; 20µs: seed 109 is the first odd one.
	if !slices.Equal(ran, []int{3, 3, 3, 1}) || res.Trials != 10 || res.Seed != 109 {
		t.Errorf("trials per step %v, %d in all, witness seed %d; want [3 3 3 1], 10, 109", ran, res.Trials, res.Seed)
	}
	if !slices.Equal(k.seeds[:10], []uint64{100, 101, 102, 103, 104, 105, 106, 107, 108, 109}) {
		t.Errorf("seeds %v: want one count over all steps", k.seeds[:10])
	}
}

// The budget stops the trials, between two of them, on the clock given.
func TestHuntBudget(t *testing.T) {
	now := time.Unix(0, 0)
	clock := func() time.Time { now = now.Add(time.Second); return now }
	k := &delayed{need: time.Hour}
	steps := []Step{{Trials: 2}, {Trials: 5}, {Trials: 5}}
	res, err := Hunt(k, 2, Options{Steps: steps, SetStep: k.set, Budget: 4 * time.Second, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if res.Found || !res.OutOfBudget || res.Trials != 3 || len(res.Steps) != 2 || res.Steps[1].Ran != 1 {
		t.Errorf("found %v, out of budget %v, %d trials, steps %+v; want 3 trials (2+1) then the budget spent", res.Found, res.OutOfBudget, res.Trials, res.Steps)
	}
	res, err = Hunt(k, 2, Options{Steps: steps, SetStep: k.set})
	if err != nil {
		t.Fatal(err)
	}
	if res.OutOfBudget || res.Trials != 12 {
		t.Errorf("no budget: out of budget %v after %d trials; want all 12", res.OutOfBudget, res.Trials)
	}
}

// A delay long enough to hang the kernel is caught by the guard, at the step that hangs.
func TestHuntEscalationHangsIntoTheGuard(t *testing.T) {
	k := &delayed{need: time.Hour, hang: 50 * time.Microsecond}
	hung := make(chan time.Duration, 1)
	g := &Guarded{Inner: k, Min: 50 * time.Millisecond, Factor: 10,
		Hung: func([]int, uint64, time.Duration) { hung <- k.delay }}
	plan := Plan{Kernel: 80 * time.Microsecond, Budget: time.Minute, Trials: 1, Placement: instrument.PerWarp}
	if _, err := Hunt(g, 3, Options{Steps: Schedule(plan), SetStep: k.set}); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-hung:
		if d != 50*time.Microsecond {
			t.Errorf("hang reported at %v, want 50µs", d)
		}
	case <-time.After(time.Second):
		t.Error("the hanging step was not reported")
	}
}
