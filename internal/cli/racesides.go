package cli

import (
	"fmt"
	"io"
	"slices"

	"github.com/gpurr/gpurr/internal/ptx"
	"github.com/gpurr/gpurr/internal/race"
	"github.com/gpurr/gpurr/internal/termsafe"
)

// raceSides is race --format json's other side of a witness: the access log's conflicts.
type raceSides struct {
	Noted     int            `json:"noted"`     // accesses the log noted
	Kept      int            `json:"kept"`      // of them, those it held (the rest overflowed it)
	Watched   [2]uint64      `json:"watched"`   // the global bytes watched, [from, to)
	Conflicts []raceConflict `json:"conflicts"` // most pairs first
	Error     string         `json:"error,omitempty"`
}

type raceConflict struct {
	Store       raceAccess `json:"store"`
	Other       raceAccess `json:"other"`
	Space       string     `json:"space"` // "shared" or "global"
	Pairs       int        `json:"pairs"`
	Address     uint64     `json:"address"` // of an example pair, and its threads
	StoreCTA    uint32     `json:"store_cta"`
	StoreThread uint32     `json:"store_thread"`
	OtherCTA    uint32     `json:"other_cta"`
	OtherThread uint32     `json:"other_thread"`
}

// raceAccess is one instruction of a conflict.
type raceAccess struct {
	Instruction string `json:"instruction"`
	Source      string `json:"source,omitempty"` // file:line:column, where the PTX has .loc lines
	PTXLine     int    `json:"ptx_line"`
	Delayed     bool   `json:"delayed"` // one of the witness's points
}

// maxConflictLines is how many conflicts the text report lists.
const maxConflictLines = 5

// writeSides replays the witness with the access log and says which accesses race on the
// bytes it changed: the delayed side and the other.
func writeSides(w io.Writer, t *raceTarget, replayer *race.ReplayRunner, res *race.Result) *raceSides {
	s, err := replayer.Sides(res.Points, res.Seed)
	if err != nil {
		termsafe.Fprintf(w, "  (the other side: the access log's replay failed: %v)\n", err)
		return &raceSides{Conflicts: []raceConflict{}, Error: err.Error()}
	}
	return reportSides(w, t, res, s)
}

// reportSides says what the access log s of the witness res shows, and returns it for JSON.
func reportSides(w io.Writer, t *raceTarget, res *race.Result, s *race.Sides) *raceSides {
	out := &raceSides{Conflicts: []raceConflict{}}
	out.Noted, out.Kept, out.Watched = s.Noted, s.Kept, s.Watched
	instrs := kernelInstructions(t)
	delayed := map[int]bool{}
	for _, p := range res.Points {
		delayed[t.points[p].Index] = true
	}
	access := func(i int) raceAccess {
		a := raceAccess{Instruction: fmt.Sprintf("instruction %d", i), Delayed: delayed[i]}
		if i >= 0 && i < len(instrs) {
			in := instrs[i]
			a.Instruction, a.PTXLine = in.Name(), in.Line
			if in.Pos.Line > 0 {
				a.Source = in.Pos.String()
			}
		}
		return a
	}
	// The pairs with a delayed side first: the race the witness found.
	conflicts := slices.Clone(s.Conflicts)
	slices.SortStableFunc(conflicts, func(a, b race.Conflict) int {
		da, db := delayed[a.Store] || delayed[a.Other], delayed[b.Store] || delayed[b.Other]
		switch {
		case da && !db:
			return -1
		case db && !da:
			return 1
		}
		return 0
	})
	for _, c := range conflicts {
		space := "global"
		if c.Shared {
			space = "shared"
		}
		out.Conflicts = append(out.Conflicts, raceConflict{Store: access(c.Store), Other: access(c.Other), Space: space, Pairs: c.Pairs,
			Address: c.Addr, StoreCTA: c.StoreCTA, StoreThread: c.StoreThread, OtherCTA: c.OtherCTA, OtherThread: c.OtherThread})
	}
	overflow := ""
	if s.Noted > s.Kept {
		overflow = fmt.Sprintf("; the log held %d, the rest overflowed it", s.Kept)
	}
	if len(out.Conflicts) == 0 {
		termsafe.Fprintf(w, "  the other side: the access log (%d accesses noted%s) pairs no unordered store with another thread's access (a race through atomics or fences, or accesses of one address that start at different bytes)\n",
			s.Noted, overflow)
		return out
	}
	termsafe.Fprintf(w, "  the accesses that race (access log of the witness: %d noted%s; * delayed):\n", s.Noted, overflow)
	for i, c := range out.Conflicts {
		if i == maxConflictLines {
			termsafe.Fprintf(w, "    ... %d more (--format json lists them)\n", len(out.Conflicts)-i)
			break
		}
		termsafe.Fprintf(w, "    %s  vs  %s  %s memory, %d pairs, e.g. at 0x%x: CTA %d thread %d, CTA %d thread %d\n",
			accessText(c.Store), accessText(c.Other), c.Space, c.Pairs, c.Address, c.StoreCTA, c.StoreThread, c.OtherCTA, c.OtherThread)
	}
	return out
}

func accessText(a raceAccess) string {
	s := a.Instruction
	if a.Delayed {
		s += "*"
	}
	if a.Source != "" {
		return fmt.Sprintf("%s (%s, PTX line %d)", s, a.Source, a.PTXLine)
	}
	return fmt.Sprintf("%s (PTX line %d)", s, a.PTXLine)
}

// kernelInstructions is the kernel's instructions, as instrument numbers them.
func kernelInstructions(t *raceTarget) []*ptx.Instruction {
	m, err := ptx.Parse(t.text)
	if err != nil {
		return nil
	}
	fn := m.Function(t.c.Kernel.GetName())
	if fn == nil {
		return nil
	}
	return fn.Instructions()
}
