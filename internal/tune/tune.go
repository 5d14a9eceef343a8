// Package tune searches launch shapes of a recorded launch on its real
// inputs: each shape runs through a replay.Session, is timed with CUDA
// events, and counts only when its output matches the recording (bit for
// bit, or within a tolerance). The recorded shape is always measured too,
// in the same run, as the baseline of the speedup.
package tune

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gpurr/gpurr/internal/cuda"
	"github.com/gpurr/gpurr/internal/replay"
)

// Trial is one measured shape.
type Trial struct {
	Config   cuda.LaunchConfig
	Recorded bool          // the shape the program used
	Median   time.Duration // median kernel time; 0 when it did not run
	Repeats  int           // launches timed
	Verified bool          // ran, and its output matches the recording
	Why      string        // why it was rejected: a launch error or a differing output
}

// Label writes the shape as "grid 264 block 256" (y and z when not 1).
func (t Trial) Label() string {
	return fmt.Sprintf("grid %s block %s", dim(t.Config.Grid), dim(t.Config.Block))
}

func dim(d cuda.Dim3) string {
	switch {
	case d.Z != 1:
		return fmt.Sprintf("%dx%dx%d", d.X, d.Y, d.Z)
	case d.Y != 1:
		return fmt.Sprintf("%dx%d", d.X, d.Y)
	}
	return fmt.Sprint(d.X)
}

// Space is every combination of the grids and blocks given, on top of the
// recorded shape (an empty list keeps the recorded value), with the
// recorded shape first.
func Space(recorded cuda.LaunchConfig, grids, blocks []cuda.Dim3) []cuda.LaunchConfig {
	if len(grids) == 0 {
		grids = []cuda.Dim3{recorded.Grid}
	}
	if len(blocks) == 0 {
		blocks = []cuda.Dim3{recorded.Block}
	}
	out := []cuda.LaunchConfig{recorded}
	seen := map[cuda.LaunchConfig]bool{recorded: true} // a list searched for each would take hours for 3000 by 3000
	for _, g := range grids {
		for _, b := range blocks {
			c := recorded
			c.Grid, c.Block = g, b
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// Sample keeps the recorded shape (first) and n others picked at random
// (seeded, so a run can be repeated).
func Sample(space []cuda.LaunchConfig, n int, seed uint64) []cuda.LaunchConfig {
	if n+1 >= len(space) {
		return space
	}
	rest := slices.Clone(space[1:])
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	r.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	return append([]cuda.LaunchConfig{space[0]}, rest[:n]...)
}

// ErrContextLost is wrapped when a shape faulted and left the CUDA
// context unusable; the trials measured until then are returned with it.
var ErrContextLost = fmt.Errorf("the CUDA context was lost")

// pruneFactor: a verified shape whose first launch takes more than this
// many times the fastest median so far cannot win, and is timed once.
const pruneFactor = 2

// Run measures every shape (the first is the recorded one), calling
// progress after each. Each shape runs once and its output is compared
// with the recording; a verified shape that may be the fastest is then
// timed repeat-1 more times, and its median kept. A shape whose launch
// fails (too many threads, too little shared memory) is rejected with the
// reason; one that faults ends the search.
func Run(s *replay.Session, configs []cuda.LaunchConfig, repeat int, check replay.Check, progress func(done int)) ([]Trial, error) {
	var trials []Trial
	var fastest time.Duration
	for i, cfg := range configs {
		t := Trial{Config: cfg, Recorded: i == 0}
		res, err := s.Run(cfg, 1, check)
		if err == nil && res.Within(check) && repeat > 1 && (fastest == 0 || res.Times[0] <= pruneFactor*fastest || t.Recorded) {
			var more []time.Duration
			more, err = s.Time(cfg, repeat-1)
			res.Times = append(res.Times, more...)
		}
		switch {
		case err != nil && cuda.ContextLost(err):
			t.Why = err.Error()
			return append(trials, t), fmt.Errorf("%s faulted (%v): %w; the kernel is probably not safe to run with this shape", t.Label(), err, ErrContextLost)
		case err != nil:
			t.Why = err.Error()
		case !res.Within(check):
			t.Median, t.Repeats, t.Why = res.Median(), len(res.Times), "output differs from the recording"
		default:
			t.Median, t.Repeats, t.Verified = res.Median(), len(res.Times), true
			if fastest == 0 || t.Median < fastest {
				fastest = t.Median
			}
		}
		trials = append(trials, t)
		if progress != nil {
			progress(i + 1)
		}
	}
	return trials, nil
}

// Best is the fastest verified trial, or false when none was verified.
func Best(trials []Trial) (Trial, bool) {
	var ok []Trial
	for _, t := range trials {
		if t.Verified {
			ok = append(ok, t)
		}
	}
	if len(ok) == 0 {
		return Trial{}, false
	}
	return slices.MinFunc(ok, func(a, b Trial) int { return cmp.Compare(a.Median, b.Median) }), true
}
