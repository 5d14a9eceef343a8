package nanscan

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpurr/gpurr/internal/dtype"
)

func f32bytes(vs []float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func bf16bytes(vs []float32) []byte {
	b := make([]byte, 2*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(v)>>16))
	}
	return b
}

// normal is n values as a layer's activations are: N(0, 1), seeded.
func normal(n int) []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	vs := make([]float32, n)
	for i := range vs {
		vs[i] = float32(r.NormFloat64())
	}
	return vs
}

func TestJudge(t *testing.T) {
	types, err := dtype.ParseList("f32,bf16,f16")
	if err != nil {
		t.Fatal(err)
	}
	kept := func(b []byte, hint *dtype.Type) ([]string, bool) {
		ks, unclear := judge(Count(b, types), hint)
		var names []string
		for _, k := range ks {
			names = append(names, k.Type)
		}
		return names, unclear
	}
	vs := normal(1 << 16)
	// Finite f32 data: read as f16 its low halves hold NaN patterns, which are not reported.
	if c := Count(f32bytes(vs), types); c[2].NaN == 0 {
		t.Fatal("finite f32 data read as f16 shows no NaN: the test lost its point")
	}
	if names, unclear := kept(f32bytes(vs), nil); names != nil || unclear {
		t.Errorf("finite f32 data: reported as %v (unclear %v), want nothing", names, unclear)
	}
	// A NaN arithmetic made, in f32 data: reported as f32 alone.
	withNaN := append([]float32(nil), vs...)
	withNaN[100] = float32(math.NaN())
	withNaN[200] = float32(math.Inf(1))
	if names, _ := kept(f32bytes(withNaN), nil); len(names) != 1 || names[0] != "f32" {
		t.Errorf("f32 data with a NaN: reported as %v, want [f32]", names)
	}
	// The same in bf16 data: reported as bf16.
	if names, _ := kept(bf16bytes(withNaN), nil); len(names) == 0 || names[0] != "bf16" {
		t.Errorf("bf16 data with a NaN: reported as %v, want bf16 first", names)
	}
	// The kernel's name decides: f16 data in a c10::Half kernel.
	f16 := make([]byte, 4)
	binary.LittleEndian.PutUint16(f16, 0x3c00)     // 1.0
	binary.LittleEndian.PutUint16(f16[2:], 0x7e00) // NaN
	hint := KernelType("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<c10::Half>>(int, c10::Half*)", types)
	if hint == nil || hint.Name != "f16" {
		t.Fatalf("KernelType of a c10::Half kernel = %v", hint)
	}
	if names, _ := kept(f16, hint); len(names) != 1 || names[0] != "f16" {
		t.Errorf("f16 data in a c10::Half kernel: reported as %v, want [f16]", names)
	}
	// Integer indices read as floats: small integers are not float data of any type.
	ints := make([]byte, 4*4096)
	for i := range 4096 {
		binary.LittleEndian.PutUint32(ints[4*i:], uint32(i*7919%50257))
	}
	binary.LittleEndian.PutUint32(ints, 0x7f8a1234) // and one NaN pattern no arithmetic makes
	if names, unclear := kept(ints, nil); names != nil || !unclear {
		t.Errorf("int32 indices: reported as %v (unclear %v), want nothing and unclear", names, unclear)
	}
}

func TestKernelType(t *testing.T) {
	types, _ := dtype.ParseList("f32,bf16,f16")
	for name, want := range map[string]string{
		"void at::native::elementwise_kernel<128, 4, at::native::FillFunctor<float>>(int, float*)": "f32",
		"void at::native::reduce_kernel<c10::BFloat16, float>(c10::BFloat16*)":                     "",
		"triton_poi_fused_add_0": "",
		"void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>": "",
		"kernel(__nv_bfloat16 const*, __nv_bfloat16*)":                                             "bf16",
	} {
		got := KernelType(name, types)
		if (got == nil) != (want == "") || got != nil && got.Name != want {
			t.Errorf("KernelType(%q) = %v, want %q", name, got, want)
		}
	}
}

// FuzzCount: any bytes, as each float type, give counts that add up: every element is finite
// or NaN or Inf, made NaN/Inf are among them, odd values among the finite.
func FuzzCount(f *testing.F) {
	f.Add(f32bytes([]float32{1, float32(math.NaN()), float32(math.Inf(-1)), 1e-30}))
	f.Add([]byte{0xff, 0x7f, 0x00, 0x7c, 0x01, 0x00})
	types, _ := dtype.ParseList("f32,f64,bf16,f16")
	f.Fuzz(func(t *testing.T, b []byte) {
		for i, c := range Count(b, types) {
			n := uint64(len(b) / types[i].Size)
			if c.Finite+c.NaN+c.Inf != n || c.Computed > c.NaN+c.Inf || c.Odd > c.Finite {
				t.Fatalf("%s: %+v for %d elements", c.Type, c, n)
			}
			if (c.NaN+c.Inf > 0) != (c.First >= 0) || c.First > 0 && c.First%int64(types[i].Size) != 0 {
				t.Fatalf("%s: first at %d with %d NaN, %d Inf", c.Type, c.First, c.NaN, c.Inf)
			}
		}
	})
}
