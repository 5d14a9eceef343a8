package race

import (
	"fmt"

	"github.com/gpurr/gpurr/internal/instrument"
	"github.com/gpurr/gpurr/internal/ptx"
	"github.com/gpurr/gpurr/internal/replay"
)

// ReplayRunner runs a recorded launch with replay, its kernel compiled by the driver from the
// PTX given (instrumented or not, so that a difference comes only from the delays).
type ReplayRunner struct {
	Case      *replay.Case
	PTX       []byte               // the module's PTX, holding the launch's kernel
	Kernel    string               // its mangled name
	Selection instrument.Selection // how the hunt's points were picked, to pick them again
	Delay     instrument.Delay     // the delay at each point; Run sets the seed
	Options   replay.Options
}

// Run replays the launch once with delays at points (indexes into instrument.Points of the
// kernel under r.Selection).
func (r *ReplayRunner) Run(points []int, seed uint64) (Output, error) {
	m, err := ptx.Parse(r.PTX)
	if err != nil {
		return nil, err
	}
	if len(points) > 0 {
		fn := m.Function(r.Kernel)
		if fn == nil {
			return nil, fmt.Errorf("the PTX has no kernel %s", r.Kernel)
		}
		all := instrument.Points(fn, r.Selection)
		chosen := make([]instrument.Point, 0, len(points))
		for _, i := range points {
			if i < 0 || i >= len(all) {
				return nil, fmt.Errorf("no point %d: the kernel has %d", i, len(all))
			}
			chosen = append(chosen, all[i])
		}
		d := r.Delay
		d.Seed = seed
		if err := instrument.InjectDelays(m, r.Kernel, chosen, d); err != nil {
			return nil, err
		}
	}
	o := r.Options
	o.Module = []byte(m.String())
	s, err := replay.NewSession(r.Case, o)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	res, err := s.Run(r.Case.Recorded(), 1, replay.Check{})
	if err != nil {
		return nil, err
	}
	out := make(Output, len(res.Regions))
	for i, rr := range res.Regions {
		out[i] = rr.Output
	}
	return out, nil
}
