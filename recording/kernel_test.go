package recording_test

import (
	"testing"

	"github.com/gpurr/gpurr/recording"
)

// TestKernelIdentity checks KernelIdentity against values worked out
// separately (FNV-1a 64 by hand, docs/format.md), so that a change of the
// rule, which would part every recording from the ones made before it,
// cannot pass unnoticed.
func TestKernelIdentity(t *testing.T) {
	for _, c := range []struct {
		module, name string
		want         uint64
	}{
		{"", "", 0xaf64724c8602eb6e},
		{"", "_Z10add_kernelPfPKfS1_i", 0xa499371b62a7ad22},
		{"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "triton_poi_fused_add_mul_0", 0x8c315208d584c8b7},
	} {
		if got := recording.KernelIdentity(c.module, c.name); got != c.want {
			t.Errorf("KernelIdentity(%q, %q) = %#016x, want %#016x", c.module, c.name, got, c.want)
		}
	}
}

func TestDemangle(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"_Z10add_kernelPfPKfS1_i", "add_kernel(float*, float const*, float const*, int)"},
		{"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_",
			"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"},
		// A compiler-made clone reads as its function.
		{"_ZN3c104cuda20CUDACachingAllocator10emptyCacheEv.constprop.0", "c10::cuda::CUDACachingAllocator::emptyCache()"},
		{"_Z3foov.cold", "foo()"},
		// Kernels that are not C++ (Triton, cuBLAS), C functions, and
		// names that only look mangled stay as they are.
		{"triton_poi_fused_add_mul_0", "triton_poi_fused_add_mul_0"},
		{"sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"},
		{"cuLaunchKernel", "cuLaunchKernel"},
		{"_Z", "_Z"},
		{"_Zgarbage(", "_Zgarbage("},
		{"_Z3foov$tail", "_Z3foov$tail"},
		{"_ZTSnot a type (", "_ZTSnot a type ("},
		{"_ZTSN5torch8autograd14AccumulateGradE", "typeinfo name for torch::autograd::AccumulateGrad"},
		{"_RNvCs1234_7mycrate3foo", "_RNvCs1234_7mycrate3foo"},
		{"", ""},
	} {
		if got := recording.Demangle(c.name); got != c.want {
			t.Errorf("Demangle(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}
