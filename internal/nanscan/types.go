package nanscan

import (
	"encoding/binary"
	"regexp"
	"slices"

	"github.com/gpurr/gpurr/internal/dtype"
)

// Which type a region's bytes hold is seldom written down: the same bytes read as f16 show
// NaN where read as f32 they are ordinary numbers (a f32's low half is any 16 bits). Unless
// the user names the types, a region is judged as each type it could be, and reported only as
// one its bytes fit:
//
//   - the kernel's name says it (a template argument such as float or c10::BFloat16, as
//     PyTorch's TensorIterator kernels carry), else
//   - its NaN and Inf are those arithmetic makes (Inf, the quiet NaN, or all payload bits
//     set), not the arbitrary NaN bit patterns a wrong reading shows, and its finite values
//     have the magnitudes real data has.

// floatFormat is a binary floating-point layout.
type floatFormat struct{ exponent, mantissa uint }

var formats = map[string]floatFormat{"f64": {11, 52}, "f32": {8, 23}, "bf16": {8, 7}, "f16": {5, 10}}

// elementSize is the bytes of an element of a floating-point type named as formats names it.
func elementSize(name string) int {
	f := formats[name]
	return max(1, int(1+f.exponent+f.mantissa)/8)
}

// countAs counts b's elements as type t, from the bits alone (no conversion to float64: this
// loop decodes every distinct snapshotted chunk).
func countAs(b []byte, t *dtype.Type) Counts {
	c := Counts{Type: t.Name, First: -1, FirstElement: -1}
	f, ok := formats[t.Name]
	if !ok {
		return c
	}
	expMax := uint64(1)<<f.exponent - 1
	mantMask := uint64(1)<<f.mantissa - 1
	quiet, bias := uint64(1)<<(f.mantissa-1), int64(expMax>>1)
	// Magnitudes real data has: 2^-40 to 2^40, or for f16, whose range is narrower, its normals.
	lo, hi := uint64(max(1, bias-40)), uint64(min(int64(expMax)-1, bias+40))
	if t.Name == "f16" {
		lo, hi = 1, expMax-1
	}
	for off := 0; off+t.Size <= len(b); off += t.Size {
		var bits uint64
		switch t.Size {
		case 2:
			bits = uint64(binary.LittleEndian.Uint16(b[off:]))
		case 4:
			bits = uint64(binary.LittleEndian.Uint32(b[off:]))
		default:
			bits = binary.LittleEndian.Uint64(b[off:])
		}
		exp, mant := bits>>f.mantissa&expMax, bits&mantMask
		if exp != expMax {
			c.Finite++
			if (exp < lo || exp > hi) && bits<<(64-f.exponent-f.mantissa) != 0 {
				c.Odd++
			}
			continue
		}
		switch {
		case mant == 0:
			c.Inf++
			c.Computed++ // Inf has one bit pattern per sign
		case mant == mantMask || mant == quiet:
			c.NaN++
			c.Computed++ // the NaN CUDA's and the CPUs' arithmetic make
		default:
			c.NaN++
		}
		if c.First < 0 {
			c.First, c.FirstElement = int64(off), int64(off/t.Size)
		}
	}
	return c
}

// fits reports whether a region's counts as one type look like data of that type: NaN and
// Inf arithmetic makes, hardly any of other patterns, finite values of real magnitudes.
func fits(c Counts) bool {
	other := c.NaN + c.Inf - c.Computed // NaN patterns no arithmetic makes
	elements := c.Finite + c.NaN + c.Inf
	return other*10 <= c.Computed && other*1000 <= elements && c.Odd*10 <= c.Finite
}

// hintPatterns name the floating-point types a kernel's (demangled) name carries.
var hintPatterns = map[string]*regexp.Regexp{
	"bf16": regexp.MustCompile(`\b(c10::BFloat16|at::BFloat16|__nv_bfloat16)\b`),
	"f16":  regexp.MustCompile(`\b(c10::Half|at::Half|__half)\b`),
	"f64":  regexp.MustCompile(`\bdouble\b`),
	"f32":  regexp.MustCompile(`\bfloat\b`),
}

// KernelType is the one floating-point type a kernel's demangled name names, among types;
// nil when it names none or several.
func KernelType(demangled string, types []*dtype.Type) *dtype.Type {
	var found *dtype.Type
	for _, t := range types {
		if re := hintPatterns[t.Name]; re != nil && re.MatchString(demangled) {
			if found != nil {
				return nil
			}
			found = t
		}
	}
	return found
}

// judge keeps, of a region's counts as each type, those of the type its bytes are: the kernel's
// type when it names one, else the fitting types with the most NaN and Inf arithmetic made. It
// returns nil when the region holds none, and unclear when its bytes fit no type asked and hold
// NaN bit patterns as one of them.
func judge(total []Counts, hint *dtype.Type) (kept []Counts, unclear bool) {
	if hint != nil {
		for _, c := range total {
			if c.Type == hint.Name && c.NaN+c.Inf > 0 && c.Odd*10 <= c.Finite {
				return []Counts{c}, false
			}
		}
		return nil, false
	}
	best, anyFits := uint64(0), false
	for _, c := range total {
		if fits(c) {
			anyFits = true
			best = max(best, c.Computed)
		}
	}
	for _, c := range total {
		if best > 0 && fits(c) && c.Computed == best {
			kept = append(kept, c)
		}
	}
	return kept, !anyFits && slices.ContainsFunc(total, func(c Counts) bool { return c.NaN+c.Inf > 0 })
}
