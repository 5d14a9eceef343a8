package dtype

import (
	"bytes"
	"encoding/binary"
	"math"
	mbits "math/bits"
	"strings"
	"testing"
)

func TestDtypes(t *testing.T) {
	f16, _ := Parse("f16")
	for bits, want := range map[uint16]float64{0x3c00: 1, 0xc000: -2, 0x0001: 5.960464477539063e-08, 0x7bff: 65504} {
		if got := f16.value([]byte{byte(bits), byte(bits >> 8)}); got != want {
			t.Errorf("f16 0x%04x = %v, want %v", bits, got, want)
		}
	}
	bf16, _ := Parse("bf16")
	if got := bf16.value([]byte{0x80, 0x3f}); got != 1 {
		t.Errorf("bf16 0x3f80 = %v, want 1", got)
	}
	f32, _ := Parse("f32")
	a := []byte{0, 0, 128, 63, 0, 0, 0, 64}  // 1, 2
	b := []byte{0, 0, 128, 63, 0, 0, 64, 64} // 1, 3
	got := f32.Compare(a, b, 4096, 8)
	if len(got) != 1 || got[0].Index != 1025 || got[0].A != 2 || got[0].B != 3 || got[0].Abs != 1 {
		t.Errorf("f32 compare = %+v, want element 1025: 2 vs 3", got)
	}
	if _, err := Parse("f8"); err == nil {
		t.Error("f8 accepted")
	}
}

func TestNPY(t *testing.T) {
	f32, _ := Parse("f32")
	got, err := f32.NPY(make([]byte, 24), []int{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	// What numpy.save writes for numpy.zeros((2, 3), numpy.float32).
	want := "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" + strings.Repeat(" ", 58) + "\n"
	if string(got[:len(want)]) != want || len(got) != len(want)+24 || len(want)%64 != 0 {
		t.Errorf("npy header %q, want %q", got[:min(len(got), 128)], want)
	}
	one, _ := f32.NPY(make([]byte, 8), nil)
	if !strings.Contains(string(one), "'shape': (2,), }") {
		t.Errorf("1-D header %q", one[:64])
	}
	// 64 × 288230376151712369 wraps to 40000 in 64-bit arithmetic: it must not pass for 40000 elements.
	if _, err := f32.NPY(make([]byte, 4*40000), []int{64, 288230376151712369}); err == nil {
		t.Error("an overflowing shape was accepted")
	}
	if _, err := f32.NPY(make([]byte, 8), []int{0, 2}); err == nil {
		t.Error("shape (0, 2) accepted for 2 elements")
	}
	for _, shape := range [][]int{{4}, {-1, 2}} {
		if _, err := f32.NPY(make([]byte, 8), shape); err == nil {
			t.Errorf("shape %v accepted for 2 elements", shape)
		}
	}
	if _, err := f32.NPY(make([]byte, 6), nil); err == nil {
		t.Error("6 bytes accepted as f32")
	}
}

func TestErrors(t *testing.T) {
	f32, _ := Parse("f32")
	enc := func(vs ...float32) []byte {
		b := make([]byte, 4*len(vs))
		for i, v := range vs {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b
	}
	ref := enc(1, 2, 4, 8)
	got := enc(1, 2.5, 4, 8.001)
	differing, outside, maxAbs, maxRel := f32.Errors(got, ref, 0, 0)
	if differing != 2 || outside != 2 || math.Abs(maxAbs-0.5) > 1e-6 || math.Abs(maxRel-0.2) > 1e-6 {
		t.Errorf("exact: differing %d outside %d maxAbs %g maxRel %g; want 2 2 0.5 0.2", differing, outside, maxAbs, maxRel)
	}
	if _, outside, _, _ := f32.Errors(got, ref, 0, 0.3); outside != 0 {
		t.Errorf("rtol 0.3: %d outside, want 0", outside)
	}
	if _, outside, _, _ := f32.Errors(got, ref, 0.01, 0); outside != 1 {
		t.Errorf("atol 0.01: %d outside, want 1 (the 2.5)", outside)
	}
	nan := enc(1, float32(math.NaN()), 4, 8)
	if _, outside, maxAbs, _ := f32.Errors(nan, ref, 1e9, 1e9); outside != 1 || !math.IsNaN(maxAbs) {
		t.Errorf("NaN: outside %d maxAbs %g; want 1 and NaN", outside, maxAbs)
	}
}

// FuzzNPY: any bytes and any shape give a valid .npy file or an error, never a panic; a file
// written holds exactly the bytes given after a header whose length is a multiple of 64.
func FuzzNPY(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 64}, "f32", 2, 1)
	f.Add(make([]byte, 160000), "f32", 64, 288230376151712369)
	f.Add([]byte{1, 2, 3}, "bf16", -1, 3)
	f.Fuzz(func(t *testing.T, data []byte, name string, d0, d1 int) {
		ty, err := Parse(name)
		if err != nil {
			return
		}
		out, err := ty.NPY(data, []int{d0, d1})
		if err != nil {
			return
		}
		hi, n := mbits.Mul64(uint64(d0), uint64(d1))
		if d0 < 0 || d1 < 0 || hi != 0 || n*uint64(ty.Size) != uint64(len(data)) {
			t.Fatalf("shape (%d, %d) of %s accepted for %d bytes", d0, d1, name, len(data))
		}
		header := len(out) - len(data)
		if header%64 != 0 || !bytes.Equal(out[header:], data) || !bytes.HasPrefix(out, []byte("\x93NUMPY")) {
			t.Fatalf("bad file: header %d bytes", header)
		}
	})
}
