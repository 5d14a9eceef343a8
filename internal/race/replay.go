package race

import (
	"errors"
	"fmt"

	"github.com/gpurr/gpurr/internal/instrument"
	"github.com/gpurr/gpurr/internal/ptx"
	"github.com/gpurr/gpurr/internal/replay"
)

// ErrCannotRun is wrapped by Run when the launch cannot be replayed at all: its kernel's PTX
// does not load on this GPU (another architecture, a newer PTX than the driver's), or its
// regions cannot be recreated.
var ErrCannotRun = errors.New("cannot replay the launch")

// ReplayRunner runs a recorded launch with replay, its kernel compiled by the driver from the
// PTX given (instrumented or not, so that a difference comes only from the delays). Its first
// run opens a replay session that later runs share: the regions are mapped and their inputs
// copied once; a run with other points than the last swaps the kernel's module (one JIT), and
// a run with the same points, another seed, only sets the seed and launches. Close releases
// the session.
type ReplayRunner struct {
	Case      *replay.Case
	PTX       []byte               // the module's PTX, holding the launch's kernel
	Kernel    string               // its mangled name
	Selection instrument.Selection // how the hunt's points were picked, to pick them again
	Delay     instrument.Delay     // the delay at each point
	Options   replay.Options

	// Unlike lists the regions whose bytes, after the first uninstrumented run, differ from
	// the recording; PlainRuns counts those runs. That run's PTX went through gpurr's parser
	// and printer and the driver's JIT, so an empty list says both keep the recorded code's
	// result.
	Unlike    []int
	PlainRuns int
	// Varying says, once a plain run disagrees with the first, where: one entry per region
	// whose bytes differ between the two.
	Varying []Spread

	firstPlain    Output   // the first plain run's fingerprints
	firstContents [][]byte // and its regions' bytes, to say which bytes vary

	session *replay.Session
	loaded  string // the points of the module the session holds
}

// Run replays the launch once with delays at points (indexes into instrument.Points of the
// kernel under r.Selection). Runs with the same points share one JIT: the seed is set in the
// module's variable, not written into its code.
func (r *ReplayRunner) Run(points []int, seed uint64) (Output, error) {
	key := fmt.Sprint(points, r.Delay) // a step of an escalating hunt changes the delay
	if r.session == nil || key != r.loaded {
		module, err := r.module(points)
		if err != nil {
			return nil, err
		}
		if r.session == nil {
			o := r.Options
			o.Module, o.ModuleName = module, "the kernel's PTX"
			if r.session, err = replay.NewSession(r.Case, o); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrCannotRun, err)
			}
		} else if err := r.session.Reload(module); err != nil {
			return nil, err
		}
		r.loaded = key
	}
	if len(points) > 0 {
		if err := r.session.SetGlobal(instrument.DelaySeedSymbol, []uint32{instrument.SeedWord(seed)}); err != nil {
			return nil, err
		}
	}
	res, err := r.session.Run(r.Case.Recorded(), 1, replay.Check{})
	if err != nil {
		return nil, err
	}
	out := make(Output, len(res.Regions))
	for i, rr := range res.Regions {
		out[i] = rr.Output
	}
	if len(points) == 0 {
		if err := r.notePlain(res, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Spread is where two runs' bytes of a region differ.
type Spread struct {
	Region int   `json:"region"`
	First  int64 `json:"first"` // the first differing byte's offset
	Bytes  int64 `json:"bytes"` // how many bytes differ
	Size   int64 `json:"size"`  // of how many
}

// notePlain keeps what the plain runs show: how the first compares with the recording, and
// which bytes a later one that disagrees with it changed.
func (r *ReplayRunner) notePlain(res *replay.Result, out Output) error {
	r.PlainRuns++
	if r.PlainRuns == 1 {
		r.firstPlain = out
		for i, rr := range res.Regions {
			if !rr.Identical {
				r.Unlike = append(r.Unlike, i)
			}
			b, err := r.session.Contents(i)
			if err != nil {
				return err
			}
			r.firstContents = append(r.firstContents, b)
		}
		return nil
	}
	if r.Varying != nil || out.Equal(r.firstPlain) {
		return nil
	}
	for _, i := range r.firstPlain.Differing(out) {
		b, err := r.session.Contents(i)
		if err != nil {
			return err
		}
		r.Varying = append(r.Varying, spread(i, r.firstContents[i], b))
	}
	return nil
}

// Spreads compares the regions as the last run left them with the first plain run's, and
// lists those that differ: after a witness run, where the delays changed the result.
func (r *ReplayRunner) Spreads() ([]Spread, error) {
	if r.session == nil || r.firstContents == nil {
		return nil, fmt.Errorf("no plain run to compare with")
	}
	var out []Spread
	for i, first := range r.firstContents {
		b, err := r.session.Contents(i)
		if err != nil {
			return nil, err
		}
		if s := spread(i, first, b); s.Bytes > 0 {
			out = append(out, s)
		}
	}
	return out, nil
}

func spread(region int, a, b []byte) Spread {
	s := Spread{Region: region, First: -1, Size: int64(len(a))}
	for i := range a {
		if a[i] != b[i] {
			if s.First < 0 {
				s.First = int64(i)
			}
			s.Bytes++
		}
	}
	return s
}

// module is the PTX text of the runs with delays at points: the kernel parsed and printed
// again, with the delay blocks in.
func (r *ReplayRunner) module(points []int) ([]byte, error) {
	m, err := r.instrumented(points, false)
	if err != nil {
		return nil, err
	}
	return []byte(m.String()), nil
}

// instrumented is the kernel parsed, with the access log in when accessLog is set (Sides)
// and the delay blocks at points (indexes into the plain kernel's points).
func (r *ReplayRunner) instrumented(points []int, accessLog bool) (*ptx.Module, error) {
	m, err := ptx.Parse(r.PTX)
	if err != nil {
		return nil, err
	}
	var chosen []instrument.Point
	if len(points) > 0 || accessLog {
		fn := m.Function(r.Kernel)
		if fn == nil {
			return nil, fmt.Errorf("the PTX has no kernel %s", r.Kernel)
		}
		if chosen, err = r.chosen(fn, points); err != nil {
			return nil, err
		}
	}
	if accessLog {
		if _, err := instrument.InjectAccessLog(m, r.Kernel); err != nil {
			return nil, err
		}
	}
	if len(chosen) > 0 {
		if err := instrument.InjectDelays(m, r.Kernel, chosen, r.Delay); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// chosen is the kernel's points at indexes points.
func (r *ReplayRunner) chosen(fn *ptx.Function, points []int) ([]instrument.Point, error) {
	all := instrument.Points(fn, r.Selection)
	chosen := make([]instrument.Point, 0, len(points))
	for _, i := range points {
		if i < 0 || i >= len(all) {
			return nil, fmt.Errorf("no point %d: the kernel has %d", i, len(all))
		}
		chosen = append(chosen, all[i])
	}
	return chosen, nil
}

// Close releases the replay session, when a run opened one.
func (r *ReplayRunner) Close() error {
	if r.session == nil {
		return nil
	}
	err := r.session.Close()
	r.session = nil
	return err
}
