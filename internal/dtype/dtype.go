// Package dtype decodes raw device memory as elements of a numeric type, for
// the verbs that show values (gpurr diff, gpurr nan).
package dtype

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Type decodes memory as elements of one numeric type.
type Type struct {
	Name  string
	Size  int
	value func([]byte) float64
}

var dtypes = []*Type{
	{"f32", 4, func(b []byte) float64 { return float64(math.Float32frombits(binary.LittleEndian.Uint32(b))) }},
	{"f64", 8, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) }},
	{"f16", 2, func(b []byte) float64 { return half(binary.LittleEndian.Uint16(b)) }},
	{"bf16", 2, func(b []byte) float64 {
		return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b)) << 16))
	}},
	{"i8", 1, func(b []byte) float64 { return float64(int8(b[0])) }},
	{"u8", 1, func(b []byte) float64 { return float64(b[0]) }},
	{"i16", 2, func(b []byte) float64 { return float64(int16(binary.LittleEndian.Uint16(b))) }},
	{"i32", 4, func(b []byte) float64 { return float64(int32(binary.LittleEndian.Uint32(b))) }},
	{"u32", 4, func(b []byte) float64 { return float64(binary.LittleEndian.Uint32(b)) }},
	{"i64", 8, func(b []byte) float64 { return float64(int64(binary.LittleEndian.Uint64(b))) }},
}

// Parse names a type: f32, f64, f16, bf16, i8, u8, i16, i32, u32, i64.
func Parse(name string) (*Type, error) {
	for _, d := range dtypes {
		if d.Name == name {
			return d, nil
		}
	}
	return nil, fmt.Errorf("unknown dtype %q (want %s)", name, strings.Join(Names(), ", "))
}

// half converts an IEEE 754 binary16 value.
func half(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, frac := int(h>>10)&0x1f, float64(h&0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1+frac/1024, exp-15)
}

// Element is one element that differs between two runs.
type Element struct {
	Index  uint64 // element index in the region
	A, B   float64
	Abs    float64 // |A - B|
	Rel    float64 // |A - B| / max(|A|, |B|); 0 when both are 0
	BitsA  uint64
	BitsB  uint64
	IsReal bool // a floating-point dtype (NaN and Inf are values, not bit patterns)
}

// Compare lists up to max elements whose bytes differ between a and b,
// which start at byte offset off of their region.
func (d *Type) Compare(a, b []byte, off uint64, max int) []Element {
	var out []Element
	n := min(len(a), len(b)) / d.Size
	for i := 0; i < n && len(out) < max; i++ {
		ea, eb := a[i*d.Size:(i+1)*d.Size], b[i*d.Size:(i+1)*d.Size]
		if string(ea) == string(eb) {
			continue
		}
		va, vb := d.value(ea), d.value(eb)
		e := Element{Index: off/uint64(d.Size) + uint64(i), A: va, B: vb, Abs: math.Abs(va - vb), IsReal: d.IsFloat()}
		if m := math.Max(math.Abs(va), math.Abs(vb)); m > 0 {
			e.Rel = e.Abs / m
		}
		e.BitsA, e.BitsB = bits(ea), bits(eb)
		out = append(out, e)
	}
	return out
}

func bits(b []byte) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// Value decodes one element (Size bytes).
func (d *Type) Value(b []byte) float64 { return d.value(b) }

// IsFloat reports whether the type is floating point, where NaN and Inf exist.
func (d *Type) IsFloat() bool { return strings.HasPrefix(d.Name, "f") || d.Name == "bf16" }

// ParseList parses a comma-separated list of types: "f32,bf16".
func ParseList(list string) ([]*Type, error) { return parseList(list, Parse) }

// ParseFloatList parses a comma-separated list of floating-point types, those that have NaN
// and Inf; its errors offer only those.
func ParseFloatList(list string) ([]*Type, error) {
	var floats []string
	for _, d := range dtypes {
		if d.IsFloat() {
			floats = append(floats, d.Name)
		}
	}
	want := strings.Join(floats, ", ")
	return parseList(list, func(name string) (*Type, error) {
		t, err := Parse(name)
		switch {
		case err != nil:
			return nil, fmt.Errorf("unknown dtype %q (want %s)", name, want)
		case !t.IsFloat():
			return nil, fmt.Errorf("%s has no NaN or Inf (want %s)", name, want)
		}
		return t, nil
	})
}

// parseList parses each name of list, in order; a type named twice is listed once (counting
// NaN as it twice would report every count twice).
func parseList(list string, parse func(string) (*Type, error)) ([]*Type, error) {
	var out []*Type
	for _, name := range strings.Split(list, ",") {
		t, err := parse(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// Errors summarizes where a and b differ as elements of d: how many
// elements differ in their bytes, the largest absolute and relative
// differences among them, and how many lie outside the tolerance
// |A-B| <= atol + rtol·|B| (B being the reference). A NaN against anything
// but the same bits is outside every tolerance.
func (d *Type) Errors(a, b []byte, atol, rtol float64) (differing, outside int, maxAbs, maxRel float64) {
	n := min(len(a), len(b)) / d.Size
	for i := range n {
		ea, eb := a[i*d.Size:(i+1)*d.Size], b[i*d.Size:(i+1)*d.Size]
		if string(ea) == string(eb) {
			continue
		}
		differing++
		va, vb := d.value(ea), d.value(eb)
		diff := math.Abs(va - vb)
		if math.IsNaN(diff) {
			outside++
			maxAbs, maxRel = math.NaN(), math.NaN()
			continue
		}
		if !math.IsNaN(maxAbs) {
			maxAbs = math.Max(maxAbs, diff)
			if m := math.Max(math.Abs(va), math.Abs(vb)); m > 0 {
				maxRel = math.Max(maxRel, diff/m)
			}
		}
		if diff > atol+rtol*math.Abs(vb) {
			outside++
		}
	}
	return differing, outside, maxAbs, maxRel
}

// Names lists the types Parse knows, in its order.
func Names() []string {
	names := make([]string, len(dtypes))
	for i, d := range dtypes {
		names[i] = d.Name
	}
	return names
}
