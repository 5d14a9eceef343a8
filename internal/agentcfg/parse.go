package agentcfg

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gpurr/gpurr/internal/instrument"
	"github.com/gpurr/gpurr/internal/kernels"
)

// ParseSteps reads --hash-steps, "K" or "K-L": training steps K to L, inclusive, from 0.
func ParseSteps(s string) (lo, hi uint32, err error) {
	a, b, isRange := strings.Cut(strings.TrimSpace(s), "-")
	x, err := strconv.ParseUint(a, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("%q: want a step K or a range K-L (steps count from 0)", s)
	}
	y := x
	if isRange {
		if y, err = strconv.ParseUint(b, 10, 32); err != nil {
			return 0, 0, fmt.Errorf("%q: want a step K or a range K-L (steps count from 0)", s)
		}
		if y < x {
			return 0, 0, fmt.Errorf("%q ends before it starts", s)
		}
	}
	return uint32(x), uint32(y), nil
}

// ParseNanScan parses a --nan-scan list such as "f32,bf16" into the memory
// kernel's type bits and the type names in the order recordings list them.
func ParseNanScan(s string) (mask uint32, types []string, err error) {
	if strings.TrimSpace(s) == "" {
		return 0, nil, nil
	}
	names := strings.Split(s, ",")
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	if mask, types, err = kernels.NanScanMask(names); err != nil {
		return 0, nil, fmt.Errorf("%s: %v", s, err)
	}
	return mask, types, nil
}

// Range is an inclusive range of launch sequence numbers, every Step-th
// from Lo.
type Range struct{ Lo, Hi, Step uint64 }

// ParseRanges parses "1-100,250,900-,1-:10" (an open end runs to the last
// launch; ":N" keeps every Nth launch of the range from its start); "" is
// no ranges (every launch). The error names the part at fault, for the caller
// to put after the flag's name.
func ParseRanges(s string) ([]Range, error) {
	var out []Range
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		step := uint64(1)
		if body, st, ok := strings.Cut(part, ":"); ok {
			n, err := strconv.ParseUint(st, 10, 64)
			if err != nil || n == 0 {
				return nil, fmt.Errorf("%q: the step %q is not a positive number", part, st)
			}
			part, step = body, n
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil || a == 0 {
			return nil, fmt.Errorf("%q is not a launch number (launches count from 1; ranges read like 1-100,250,900- or 1-:10)", lo)
		}
		b := a
		if isRange {
			b = math.MaxUint64
			if hi != "" {
				if b, err = strconv.ParseUint(hi, 10, 64); err != nil {
					return nil, fmt.Errorf("%q is not a launch number (ranges read like 1-100,250,900- or 1-:10)", hi)
				}
				if b < a {
					return nil, fmt.Errorf("%q ends before it starts", part)
				}
			}
		}
		out = append(out, Range{a, b, step})
	}
	return out, nil
}

// Selects reports whether launch seq is in one of the ranges (every
// launch when there are none).
func Selects(ranges []Range, seq uint64) bool {
	if len(ranges) == 0 {
		return true
	}
	for _, r := range ranges {
		if seq >= r.Lo && seq <= r.Hi && (seq-r.Lo)%r.Step == 0 {
			return true
		}
	}
	return false
}

// DefaultSample is sampled GPU timing's window unless one is given: a tenth of the kernels,
// in windows short enough that a training step of a few hundred milliseconds has several.
const DefaultSample = "20ms/200ms"

// ParseSample reads a sampled-timing window, "ON/EVERY" such as "20ms/200ms": kernels are
// timed for ON out of every EVERY.
func ParseSample(s string) (on, every time.Duration, err error) {
	a, b, ok := strings.Cut(s, "/")
	if ok {
		on, err = time.ParseDuration(a)
		if err == nil {
			every, err = time.ParseDuration(b)
		}
	}
	switch {
	case !ok || err != nil:
		return 0, 0, fmt.Errorf("%q: want ON/EVERY, such as %s", s, DefaultSample)
	case on <= 0 || every <= on:
		return 0, 0, fmt.Errorf("%q: want 0 < ON < EVERY, such as %s", s, DefaultSample)
	case on < 5*time.Millisecond:
		// The agent's writer turns timing on and off; it wakes every few milliseconds.
		return 0, 0, fmt.Errorf("%q: ON must be at least 5ms", s)
	}
	return on, every, nil
}

// DefaultTimingSteps is which training steps GPU timing by steps times unless told: every
// kernel of steps 0-2 (the first, which compiles and warms caches, and two settled ones) and
// of one step in ten.
const DefaultTimingSteps = "3/10"

// ParseTimingSteps reads which training steps are timed, "FIRST/EVERY" such as "3/10": steps
// 0 to FIRST-1 and every EVERY-th step (EVERY, 2×EVERY, ...); EVERY 0 for the first ones only.
func ParseTimingSteps(s string) (first, every uint32, err error) {
	a, b, ok := strings.Cut(s, "/")
	var f, e uint64
	if ok {
		f, err = strconv.ParseUint(a, 10, 32)
		if err == nil {
			e, err = strconv.ParseUint(b, 10, 32)
		}
	}
	if !ok || err != nil {
		return 0, 0, fmt.Errorf("%q: want FIRST/EVERY, such as %s", s, DefaultTimingSteps)
	}
	if f == 0 && e == 0 {
		return 0, 0, fmt.Errorf("%q times no step: --gpu-timing=false times none", s)
	}
	return uint32(f), uint32(e), nil
}

// ProbeSpec is --probe read: which kernels to probe and what to count in them.
type ProbeSpec struct {
	Kernels *regexp.Regexp       // over mangled kernel names
	Count   instrument.Selection // instructions counted per CTA; empty for none
	Classes string               // Count as given, "" for none
}

// probePoints is what every probe records; the spec names it so that it reads as what it does.
const probePoints = ":entry,exit"

// ParseProbe reads "REGEX:entry,exit[,CLASSES]": the kernels whose (mangled) name REGEX
// matches get entry and exit probes per CTA, and counts of CLASSES (instrument.ParseSelection,
// e.g. global-store or op:REGEX) when given.
func ParseProbe(s string) (ProbeSpec, error) {
	i := strings.LastIndex(s, probePoints)
	if i < 0 || (len(s) > i+len(probePoints) && s[i+len(probePoints)] != ',') {
		return ProbeSpec{}, fmt.Errorf("want REGEX%s[,CLASSES], e.g. 'triton_.*%s'", probePoints, probePoints)
	}
	var spec ProbeSpec
	var err error
	if spec.Kernels, err = regexp.Compile(s[:i]); err != nil {
		return ProbeSpec{}, fmt.Errorf("the kernel expression: %v", err)
	}
	if rest := s[i+len(probePoints):]; rest != "" {
		spec.Classes = rest[1:]
		if spec.Count, err = instrument.ParseSelection(spec.Classes); err != nil {
			return ProbeSpec{}, fmt.Errorf("what to count: %v", err)
		}
	}
	return spec, nil
}
