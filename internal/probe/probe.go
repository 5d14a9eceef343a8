// Package probe reads what in-kernel probes (instrument.InjectProbes) leave in their buffer
// and sums a launch up per CTA: how long each ran, the slowest, how the work spread over the
// SMs and in how many waves. It takes the buffer from a replay of the launch with its PTX
// probed (Replay) or from the recording, where the launch ran with live probes (Live,
// SumLive), and writes the reports gpurr probe prints; the tests feed it synthetic buffers.
package probe

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gpurr/gpurr/recording"
)

// CTA is one thread block's record: the recording format decides its layout (a live
// probe's records and a replay's are the same).
type CTA = recording.ProbeCTA

// Fill is the probe buffer's initial contents for ctas CTAs: starts all ones (atomic min),
// ends zero (atomic max).
func Fill(ctas int) []byte {
	b := make([]byte, ctas*recording.ProbeRecordBytes)
	for i := range ctas {
		binary.LittleEndian.PutUint64(b[i*recording.ProbeRecordBytes:], math.MaxUint64)
	}
	return b
}

// Decode reads the buffer after the launch. A CTA whose record is untouched did not run (a
// launch that faulted or was cut short): the error says how many.
func Decode(buf []byte) ([]CTA, error) {
	out, missing := recording.ProbeCTAs(buf)
	if missing > 0 {
		return out, fmt.Errorf("%d of %d CTAs left no record (the launch did not finish them)", missing, len(buf)/recording.ProbeRecordBytes)
	}
	return out, nil
}

// SMLoad is what one SM ran.
type SMLoad struct {
	SM   uint32
	CTAs int
	Busy time.Duration // the sum of its CTAs' durations
}

// Summary sums a launch's CTAs up.
type Summary struct {
	CTAs              int
	Span              time.Duration // first entry to last exit
	Median, P99, Max  time.Duration // of CTA durations
	Slowest           []CTA         // the longest, longest first
	SMs               []SMLoad      // by SM number
	Busiest           SMLoad        // the SM busy longest; of those, the one that ran the most CTAs
	Imbalance         float64       // the busiest SM's busy time over the mean SM's: 1 is even
	Waves             float64       // CTAs per SM used
	StragglerFraction float64       // of the span after the median CTA's end: the tail
	Counted           uint64        // the counted instructions the threads ran, all CTAs
	CountMedian       uint64        // per CTA
	CountMax          CTA           // the CTA that ran the most
}

// Summarize sums ctas up, keeping the top slowest.
func Summarize(ctas []CTA, top int) Summary {
	s := Summary{CTAs: len(ctas)}
	if len(ctas) == 0 {
		return s
	}
	durs := make([]time.Duration, len(ctas))
	first, last := uint64(math.MaxUint64), uint64(0)
	perSM := map[uint32]*SMLoad{}
	for i, c := range ctas {
		durs[i] = c.Duration()
		first, last = min(first, c.Start), max(last, c.End)
		l := perSM[c.SM]
		if l == nil {
			l = &SMLoad{SM: c.SM}
			perSM[c.SM] = l
		}
		l.CTAs++
		l.Busy += c.Duration()
	}
	slices.Sort(durs)
	counts := make([]uint64, len(ctas))
	for i, c := range ctas {
		counts[i] = c.Count
		s.Counted += c.Count
		if c.Count > s.CountMax.Count {
			s.CountMax = c
		}
	}
	slices.Sort(counts)
	s.CountMedian = counts[len(counts)/2]
	s.Span = time.Duration(last - first)
	s.Median, s.P99, s.Max = durs[len(durs)/2], durs[min(len(durs)-1, len(durs)*99/100)], durs[len(durs)-1]
	byDur := slices.Clone(ctas)
	slices.SortStableFunc(byDur, func(a, b CTA) int { return int(b.Duration() - a.Duration()) })
	s.Slowest = byDur[:min(top, len(byDur))]
	var total time.Duration
	for _, l := range perSM {
		s.SMs = append(s.SMs, *l)
		total += l.Busy
	}
	slices.SortFunc(s.SMs, func(a, b SMLoad) int { return int(a.SM) - int(b.SM) })
	// CTAs break a tie of busy time: with a clock that did not move, all SMs are busy 0 ns.
	for _, l := range s.SMs {
		if l.Busy > s.Busiest.Busy || l.Busy == s.Busiest.Busy && l.CTAs > s.Busiest.CTAs {
			s.Busiest = l
		}
	}
	if mean := float64(total) / float64(len(s.SMs)); mean > 0 {
		s.Imbalance = float64(s.Busiest.Busy) / mean
	}
	s.Waves = float64(len(ctas)) / float64(len(s.SMs))
	ends := make([]uint64, len(ctas))
	for i, c := range ctas {
		ends[i] = c.End
	}
	slices.Sort(ends)
	if s.Span > 0 {
		s.StragglerFraction = float64(last-ends[len(ends)/2]) / float64(s.Span)
	}
	return s
}

// WriteChrome writes the CTAs as a Chrome trace-event JSON timeline (Perfetto UI and
// chrome://tracing open it): a track per SM, a slice per CTA named by its index, times in µs
// from the launch's first entry.
func WriteChrome(w io.Writer, ctas []CTA, title string) error {
	type event struct {
		Name string         `json:"name"`
		Ph   string         `json:"ph"`
		Pid  int            `json:"pid"`
		Tid  uint32         `json:"tid"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur,omitempty"`
		Args map[string]any `json:"args,omitempty"`
	}
	first := uint64(math.MaxUint64)
	sms := map[uint32]bool{}
	for _, c := range ctas {
		first = min(first, c.Start)
		sms[c.SM] = true
	}
	events := []event{{Name: "process_name", Ph: "M", Pid: 1, Args: map[string]any{"name": title}}}
	for sm := range sms {
		events = append(events, event{Name: "thread_name", Ph: "M", Pid: 1, Tid: sm, Args: map[string]any{"name": fmt.Sprintf("SM %d", sm)}})
	}
	for _, c := range ctas {
		e := event{Name: fmt.Sprintf("CTA %d", c.Index), Ph: "X", Pid: 1, Tid: c.SM,
			Ts: float64(c.Start-first) / 1e3, Dur: float64(c.End-c.Start) / 1e3}
		if c.Count > 0 {
			e.Args = map[string]any{"count": c.Count}
		}
		events = append(events, e)
	}
	slices.SortStableFunc(events, func(a, b event) int {
		if a.Ph != b.Ph {
			return strings.Compare(b.Ph, a.Ph) // metadata ("M") first
		}
		return int(a.Tid) - int(b.Tid)
	})
	enc := json.NewEncoder(w)
	return enc.Encode(map[string]any{"displayTimeUnit": "ns", "traceEvents": events})
}
