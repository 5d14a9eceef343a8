package trace

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
)

// ChromeEvent is one event of a Chrome trace-event file, as far as
// ValidateChrome reads it.
type ChromeEvent struct {
	Ph      string          `json:"ph"`
	Name    string          `json:"name"`
	Cat     string          `json:"cat"`
	Pid     int64           `json:"pid"`
	Tid     int64           `json:"tid"`
	Ts      float64         `json:"ts"`
	Dur     *float64        `json:"dur"`
	ID      json.RawMessage `json:"id"`
	BindID  json.RawMessage `json:"bind_id"`
	FlowIn  bool            `json:"flow_in"`
	FlowOut bool            `json:"flow_out"`
	Args    map[string]any  `json:"args"`
}

// ChromeFile is a Chrome trace-event file in its object form.
type ChromeFile struct {
	TraceEvents []ChromeEvent `json:"traceEvents"`
}

// ChromeSummary counts what a valid file holds.
type ChromeSummary struct {
	Slices    int            // complete slices (X, and B/E pairs)
	ByCat     map[string]int // slices by category
	Flows     int            // flows (a start and its ends)
	FlowEnds  int            // flow ends (a flow may fan out)
	Processes int
	Tracks    int // (pid, tid) pairs with slices
}

// ValidateChrome reads a Chrome trace-event JSON file and checks what a
// viewer needs to show it faithfully: every slice closed (B matched by E
// on its track, X with a duration), no negative duration or timestamp,
// the slices of each track nested or disjoint, never partly overlapping,
// every flow paired (v1: one "s" and one "f" per id; v2: one flow_out and
// at least one flow_in per bind_id, no end before its start), and every
// process named. It reads the whole file into memory: it is meant for
// tests and for checking a trace before sharing it.
func ValidateChrome(r io.Reader) (*ChromeFile, ChromeSummary, error) {
	var f ChromeFile
	sum := ChromeSummary{ByCat: map[string]int{}}
	if err := json.NewDecoder(r).Decode(&f); err != nil {
		return nil, sum, fmt.Errorf("not a Chrome trace-event JSON object: %v", err)
	}
	type span struct{ ts, end float64 }
	type key struct{ pid, tid int64 }
	type flow struct {
		v1           bool
		starts, ends int
		start, first float64 // the start's time; the earliest end's
	}
	spans := map[key][]span{}
	open := map[key][]ChromeEvent{}
	named := map[int64]bool{}
	used := map[int64]bool{}
	flows := map[string]*flow{}
	flowOf := func(kind string, raw json.RawMessage) (*flow, error) {
		if len(raw) == 0 {
			return nil, fmt.Errorf("%s event without an id", kind)
		}
		id := kind + string(raw)
		fl := flows[id]
		if fl == nil {
			fl = &flow{v1: kind == "v1:", start: math.Inf(1), first: math.Inf(1)}
			flows[id] = fl
		}
		return fl, nil
	}
	for i, e := range f.TraceEvents {
		where := func(format string, args ...any) error {
			return fmt.Errorf("event %d (%s %q, pid %d tid %d, ts %v): %s", i, e.Ph, e.Name, e.Pid, e.Tid, e.Ts, fmt.Sprintf(format, args...))
		}
		k := key{e.Pid, e.Tid}
		if e.Ph != "M" && (e.Ts < 0 || math.IsNaN(e.Ts)) {
			return nil, sum, where("negative timestamp")
		}
		switch e.Ph {
		case "M":
			if e.Name == "process_name" {
				named[e.Pid] = true
			}
			continue
		case "X":
			if e.Dur == nil {
				return nil, sum, where("complete slice without a duration")
			}
			if *e.Dur < 0 {
				return nil, sum, where("negative duration %v", *e.Dur)
			}
			spans[k] = append(spans[k], span{e.Ts, e.Ts + *e.Dur})
			sum.Slices++
			sum.ByCat[e.Cat]++
		case "B":
			open[k] = append(open[k], e)
		case "E":
			stack := open[k]
			if len(stack) == 0 {
				return nil, sum, where("end without a begin on its track")
			}
			b := stack[len(stack)-1]
			open[k] = stack[:len(stack)-1]
			if e.Ts < b.Ts {
				return nil, sum, where("ends before it begins (%v)", b.Ts)
			}
			spans[k] = append(spans[k], span{b.Ts, e.Ts})
			sum.Slices++
			sum.ByCat[b.Cat]++
		case "s", "t", "f":
			fl, err := flowOf("v1:", e.ID)
			if err != nil {
				return nil, sum, where("%v", err)
			}
			switch e.Ph {
			case "s":
				fl.starts++
				fl.start = e.Ts
			case "f":
				fl.ends++
				fl.first = min(fl.first, e.Ts)
			}
		case "i", "I", "C":
		default:
			return nil, sum, where("unknown phase")
		}
		used[e.Pid] = true
		if e.FlowOut || e.FlowIn {
			if e.Ph != "X" && e.Ph != "B" {
				return nil, sum, where("flow fields on an event that is not a slice")
			}
			fl, err := flowOf("v2:", e.BindID)
			if err != nil {
				return nil, sum, where("%v", err)
			}
			if e.FlowOut {
				fl.starts++
				fl.start = e.Ts
			}
			if e.FlowIn {
				fl.ends++
				fl.first = min(fl.first, e.Ts)
			}
		}
	}
	for k, stack := range open {
		if len(stack) > 0 {
			return nil, sum, fmt.Errorf("pid %d tid %d: slice %q begun at %v is never ended", k.pid, k.tid, stack[0].Name, stack[0].Ts)
		}
	}
	for k, ss := range spans {
		// Longest first among equal starts, so a parent precedes its children.
		slices.SortFunc(ss, func(a, b span) int { return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(b.end, a.end)) })
		var ends []float64 // enclosing slices' ends, innermost last
		for _, s := range ss {
			for len(ends) > 0 && ends[len(ends)-1] <= s.ts {
				ends = ends[:len(ends)-1]
			}
			if len(ends) > 0 && s.end > ends[len(ends)-1] {
				return nil, sum, fmt.Errorf("pid %d tid %d: slice [%v, %v] overlaps one that ends at %v without nesting in it", k.pid, k.tid, s.ts, s.end, ends[len(ends)-1])
			}
			ends = append(ends, s.end)
		}
	}
	for id, fl := range flows {
		switch {
		case fl.starts != 1:
			return nil, sum, fmt.Errorf("flow %s: %d starts, want 1", id, fl.starts)
		case fl.ends < 1:
			return nil, sum, fmt.Errorf("flow %s: never ends", id)
		case fl.v1 && fl.ends > 1:
			return nil, sum, fmt.Errorf("flow %s: %d ends, want 1", id, fl.ends)
		case fl.first < fl.start:
			return nil, sum, fmt.Errorf("flow %s: ends at %v, before it starts at %v", id, fl.first, fl.start)
		}
		sum.Flows++
		sum.FlowEnds += fl.ends
	}
	for pid := range used {
		if !named[pid] {
			return nil, sum, fmt.Errorf("pid %d has events but no process_name", pid)
		}
	}
	sum.Processes, sum.Tracks = len(used), len(spans)
	return &f, sum, nil
}
