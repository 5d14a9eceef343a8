package diff

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	pb "github.com/gpurr/gpurr/recording/recordingpb"
)

// ParamDiff is a scalar parameter whose value differs between two launches of one kernel.
type ParamDiff struct {
	// Index is the parameter's position in the kernel's signature, from 0; -1 for the whole
	// parameter buffer, when the recording has no layout of it.
	Index  int    `json:"index"`
	Offset uint32 `json:"offset"` // in the parameter buffer
	Size   uint32 `json:"size"`   // bytes
	// Type is how the values were read: i8, i16, i32, i64, f32, f64, or "address" (one side
	// holds what looks like a device address, the other does not); "struct" for a larger
	// parameter, whose differing words are in Words.
	Type  string     `json:"type"`
	A     string     `json:"a,omitempty"`
	B     string     `json:"b,omitempty"`
	Words []WordDiff `json:"words,omitempty"`
	Note  string     `json:"note,omitempty"` // e.g. the buffers differ in size
}

// WordDiff is a 4- or 8-byte word of a struct parameter whose value differs.
type WordDiff struct {
	Offset uint32 `json:"offset"` // from the parameter's first byte
	Size   uint32 `json:"size"`
	Type   string `json:"type"` // i32, f32, i64, f64, address, bytes
	A      string `json:"a"`
	B      string `json:"b"`
}

// Text is the parameter as the report says it: "parameter 3: 111 vs 112", "parameter 5 (f32):
// 0.001 vs 0.0010000001".
func (d ParamDiff) Text() string {
	name := fmt.Sprintf("parameter %d", d.Index)
	if d.Index < 0 {
		name = "parameter buffer"
	}
	if d.Type == "struct" {
		var parts []string
		for _, w := range d.Words[:min(len(d.Words), textWords)] {
			parts = append(parts, fmt.Sprintf("+%d%s: %s vs %s", w.Offset, typeTag(w.Type), w.A, w.B))
		}
		if more := len(d.Words) - textWords; more > 0 {
			parts = append(parts, fmt.Sprintf("and %d more words", more))
		}
		text := fmt.Sprintf("%s (%d bytes): %s", name, d.Size, strings.Join(parts, ", "))
		if d.Note != "" {
			text += " (" + d.Note + ")"
		}
		return text
	}
	return fmt.Sprintf("%s%s: %s vs %s", name, typeTag(d.Type), d.A, d.B)
}

// textWords is how many of a struct parameter's differing words a report's line shows; JSON
// has them all. Structs such as PyTorch's TensorListMetadata leave unused slots uninitialised,
// so their words often differ in numbers that mean nothing.
const textWords = 3

// typeTag names a value's type where the number alone does not say it: floats and addresses.
func typeTag(t string) string {
	switch t {
	case "f32", "f64":
		return " (" + t + ")"
	}
	return ""
}

// ParamDiffs compares the parameter buffers of two launches of one kernel, parameter by
// parameter as kernel lays them out, and lists those whose values differ: scalars first, in
// signature order, then structs (a scalar that differs is the likelier cause). Words that point
// into memory are left out: those the launches' regions name (Region.param_offsets), and 8-byte
// words that hold what looks like a device address in both, since addresses differ between runs.
func ParamDiffs(kernel *pb.Kernel, a, b *pb.Launch) []ParamDiff {
	pa, pbuf := a.GetParams(), b.GetParams()
	pointers := map[uint32]bool{}
	for _, l := range []*pb.Launch{a, b} {
		for _, r := range l.GetRegions() {
			for _, off := range r.GetParamOffsets() {
				pointers[off] = true
			}
		}
	}
	params := kernel.GetParams()
	n := uint32(min(len(pa), len(pbuf)))
	if len(params) == 0 && n > 0 {
		params = []*pb.ParamInfo{{Offset: 0, Size: n}}
	}
	var out []ParamDiff
	for i, p := range params {
		lo, hi := p.GetOffset(), p.GetOffset()+p.GetSize()
		if hi > n || hi < lo {
			continue
		}
		if bytes.Equal(pa[lo:hi], pbuf[lo:hi]) {
			continue
		}
		d := ParamDiff{Index: i, Offset: lo, Size: p.GetSize()}
		if len(kernel.GetParams()) == 0 {
			d.Index = -1
		}
		switch p.GetSize() {
		case 1, 2, 4:
			if lo%p.GetSize() == 0 || p.GetSize() == 1 {
				w := readWord(pa[lo:hi], pbuf[lo:hi], 0, p.GetSize())
				d.Type, d.A, d.B = w.Type, w.A, w.B
				out = append(out, d)
				continue
			}
		case 8:
			if pointers[lo] || addressLike(le64(pa[lo:])) && addressLike(le64(pbuf[lo:])) {
				continue
			}
			w := readWord(pa[lo:hi], pbuf[lo:hi], 0, 8)
			d.Type, d.A, d.B = w.Type, w.A, w.B
			out = append(out, d)
			continue
		}
		d.Type = "struct"
		d.Words = structWords(pa, pbuf, lo, hi, pointers)
		if len(d.Words) > 0 {
			out = append(out, d)
		}
	}
	structLast := func(d ParamDiff) int {
		if d.Type == "struct" {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(out, func(x, y ParamDiff) int { return structLast(x) - structLast(y) })
	if len(pa) != len(pbuf) {
		out = append(out, ParamDiff{Index: -1, Size: uint32(max(len(pa), len(pbuf))), Type: "struct",
			Note: fmt.Sprintf("the parameter buffers differ in size: %d vs %d bytes", len(pa), len(pbuf))})
	}
	return out
}

// structWords lists the differing words of bytes lo..hi of two parameter buffers: each 8-byte
// word (aligned in the buffer) as one value when it is a double in both (both halves differ,
// and the low one is no small integer: an int and a float side by side read as a plausible
// double too), else by its 4-byte halves; words that point into memory are left out.
func structWords(a, b []byte, lo, hi uint32, pointers map[uint32]bool) []WordDiff {
	var out []WordDiff
	off := lo
	for off < hi {
		switch {
		case off%8 == 0 && off+8 <= hi:
			wa, wb := le64(a[off:]), le64(b[off:])
			switch {
			case wa == wb || pointers[off] || addressLike(wa) && addressLike(wb):
			case plausibleF64(wa) && plausibleF64(wb) && uint32(wa) != uint32(wb) && wa>>32 != wb>>32 && !(smallInt(uint32(wa)) && smallInt(uint32(wb))):
				out = append(out, readWord(a[off:off+8], b[off:off+8], off-lo, 8))
			default:
				for half := uint32(0); half < 8; half += 4 {
					if !bytes.Equal(a[off+half:off+half+4], b[off+half:off+half+4]) {
						out = append(out, readWord(a[off+half:off+half+4], b[off+half:off+half+4], off+half-lo, 4))
					}
				}
			}
			off += 8
		case off%4 == 0 && off+4 <= hi:
			if !bytes.Equal(a[off:off+4], b[off:off+4]) {
				out = append(out, readWord(a[off:off+4], b[off:off+4], off-lo, 4))
			}
			off += 4
		default: // bytes the 4-byte words leave: at most 3 at each end
			next := min(hi, (off/4+1)*4)
			if !bytes.Equal(a[off:next], b[off:next]) {
				out = append(out, WordDiff{Offset: off - lo, Size: next - off, Type: "bytes",
					A: fmt.Sprintf("%x", a[off:next]), B: fmt.Sprintf("%x", b[off:next])})
			}
			off = next
		}
	}
	return out
}

// readWord reads a value of size bytes (1, 2, 4 or 8) of each side: as a float where both are
// plausible floats, else as a signed integer, or in hexadecimal where one looks like an address.
func readWord(a, b []byte, off, size uint32) WordDiff {
	w := WordDiff{Offset: off, Size: size}
	switch size {
	case 1:
		w.Type, w.A, w.B = "i8", strconv.Itoa(int(int8(a[0]))), strconv.Itoa(int(int8(b[0])))
	case 2:
		w.Type = "i16"
		w.A, w.B = strconv.Itoa(int(int16(binary.LittleEndian.Uint16(a)))), strconv.Itoa(int(int16(binary.LittleEndian.Uint16(b))))
	case 4:
		va, vb := binary.LittleEndian.Uint32(a), binary.LittleEndian.Uint32(b)
		if plausibleF32(va) && plausibleF32(vb) {
			w.Type = "f32"
			w.A = strconv.FormatFloat(float64(math.Float32frombits(va)), 'g', -1, 32)
			w.B = strconv.FormatFloat(float64(math.Float32frombits(vb)), 'g', -1, 32)
		} else {
			w.Type, w.A, w.B = "i32", strconv.Itoa(int(int32(va))), strconv.Itoa(int(int32(vb)))
		}
	default:
		va, vb := le64(a), le64(b)
		switch {
		case addressLike(va) || addressLike(vb):
			w.Type, w.A, w.B = "address", fmt.Sprintf("0x%x", va), fmt.Sprintf("0x%x", vb)
		case plausibleF64(va) && plausibleF64(vb):
			w.Type = "f64"
			w.A = strconv.FormatFloat(math.Float64frombits(va), 'g', -1, 64)
			w.B = strconv.FormatFloat(math.Float64frombits(vb), 'g', -1, 64)
		default:
			w.Type, w.A, w.B = "i64", strconv.FormatInt(int64(va), 10), strconv.FormatInt(int64(vb), 10)
		}
	}
	return w
}

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// smallInt: a 32-bit word that reads as an integer of magnitude below 2^24, as counts, sizes
// and strides are; the low half of a double seldom is.
func smallInt(v uint32) bool { return int32(v) > -1<<24 && int32(v) < 1<<24 }

// addressLike: a 64-bit value in the range the driver hands device addresses out of (above
// 4 GiB, in the 48-bit user address space), which integers of a program seldom hold.
func addressLike(v uint64) bool { return v >= 1<<32 && v < 1<<48 }

// A plausible float is zero, or a finite number of the magnitudes real data has (2^-40 to
// 2^40): integers read as floats are tiny subnormals or vast, and NaN bit patterns are not.
func plausibleF32(bits uint32) bool {
	exp := int(bits>>23) & 0xff
	return bits&0x7fff_ffff == 0 || exp >= 127-40 && exp <= 127+40
}

func plausibleF64(bits uint64) bool {
	exp := int(bits>>52) & 0x7ff
	return bits&(1<<63-1) == 0 || exp >= 1023-40 && exp <= 1023+40
}
