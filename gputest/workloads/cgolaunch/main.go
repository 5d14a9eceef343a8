// Command cgolaunch is a Go program that uses CUDA through cgo: it loads
// libcuda.so.1 with dlopen, loads a PTX kernel and launches it from a Go
// function through static C functions, then checks the result. gputest's
// native.symbols_go records it with --callstack native and checks that the
// C frames inside this Go binary have names (they are only in .symtab).
//
// Built by make into bin/cgolaunch (the GPU machine has no Go). The last
// stdout line is a JSON object with what it did; exit 3 when there is no GPU.
package main

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef uint64_t CUdeviceptr;

static CUresult (*cu_init)(unsigned);
static CUresult (*cu_device_get)(int *, int);
static CUresult (*cu_ctx_create)(void **, unsigned, int);
static CUresult (*cu_module_load_data)(void **, const void *);
static CUresult (*cu_module_get_function)(void **, void *, const char *);
static CUresult (*cu_mem_alloc)(CUdeviceptr *, size_t);
static CUresult (*cu_memset_d32)(CUdeviceptr, unsigned, size_t);
static CUresult (*cu_memcpy_dtoh)(void *, CUdeviceptr, size_t);
static CUresult (*cu_launch_kernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, void *, void **, void **);
static CUresult (*cu_ctx_synchronize)(void);

static const char add_ptx[] =
    ".version 7.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry cgolaunch_add(.param .u64 p0, .param .f32 p1, .param .u32 p2)\n{\n"
    ".reg .pred %p<2>; .reg .b32 %r<6>; .reg .f32 %f<4>; .reg .b64 %rd<5>;\n"
    "ld.param.u64 %rd1, [p0]; ld.param.f32 %f1, [p1]; ld.param.u32 %r2, [p2];\n"
    "mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x; mov.u32 %r5, %tid.x; mad.lo.s32 %r1, %r3, %r4, %r5;\n"
    "setp.ge.s32 %p1, %r1, %r2; @%p1 bra DONE;\n"
    "cvta.to.global.u64 %rd2, %rd1; mul.wide.s32 %rd3, %r1, 4; add.s64 %rd4, %rd2, %rd3;\n"
    "ld.global.f32 %f2, [%rd4]; add.f32 %f3, %f2, %f1; st.global.f32 [%rd4], %f3;\n"
    "DONE: ret;\n}\n";

static void *fn;

// setup returns "" or what failed; 3 in *skip when there is no driver or GPU.
static const char *setup(CUdeviceptr *x, int n, int *skip) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) { *skip = 1; return "no libcuda.so.1"; }
#define SYM(var, name) if (!(*(void **)&var = dlsym(lib, name))) return "libcuda has no " name
  SYM(cu_init, "cuInit"); SYM(cu_device_get, "cuDeviceGet"); SYM(cu_ctx_create, "cuCtxCreate_v2");
  SYM(cu_module_load_data, "cuModuleLoadData"); SYM(cu_module_get_function, "cuModuleGetFunction");
  SYM(cu_mem_alloc, "cuMemAlloc_v2"); SYM(cu_memset_d32, "cuMemsetD32_v2");
  SYM(cu_memcpy_dtoh, "cuMemcpyDtoH_v2"); SYM(cu_launch_kernel, "cuLaunchKernel");
  SYM(cu_ctx_synchronize, "cuCtxSynchronize");
#undef SYM
  int dev;
  void *ctx, *mod;
  if (cu_init(0) || cu_device_get(&dev, 0)) { *skip = 1; return "no CUDA device"; }
  if (cu_ctx_create(&ctx, 0, dev)) return "cuCtxCreate failed";
  if (cu_module_load_data(&mod, add_ptx)) return "cuModuleLoadData failed";
  if (cu_module_get_function(&fn, mod, "cgolaunch_add")) return "cuModuleGetFunction failed";
  if (cu_mem_alloc(x, (size_t)n * 4)) return "cuMemAlloc failed";
  if (cu_memset_d32(*x, 0, (size_t)n)) return "cuMemsetD32 failed";
  return "";
}

// Two static functions between Go and the driver: local symbols, named only in .symtab.
static __attribute__((noinline)) int cgolaunch_inner(CUdeviceptr x, float v, int n) {
  void *params[] = {&x, &v, &n};
  int r = cu_launch_kernel(fn, (unsigned)(n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, params, NULL);
  __asm__ volatile("" ::: "memory");
  return r;
}

static __attribute__((noinline)) int cgolaunch_outer(CUdeviceptr x, float v, int n) {
  int r = cgolaunch_inner(x, v, n);
  __asm__ volatile("" ::: "memory");
  return r;
}

// Go's os.Exit and a return from main end the process without libc's
// exit handlers, where CUDA tools (gpurr's agent, CUPTI) finish their
// work; a CUDA program in Go ends through exit(3), as cgo programs that
// use such tools do.
static void exit_process(int code) { exit(code); }

static int finish(CUdeviceptr x, float *out, int n) {
  if (cu_ctx_synchronize()) return 1;
  return cu_memcpy_dtoh(out, x, (size_t)n * 4) != 0;
}
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"os"
	"unsafe"
)

const (
	elements = 4096
	launches = 200
)

//go:noinline
func launchFromGo(x C.CUdeviceptr) error {
	if r := C.cgolaunch_outer(x, 1, elements); r != 0 {
		return fmt.Errorf("cuLaunchKernel: CUDA error %d", int(r))
	}
	return nil
}

func main() {
	var x C.CUdeviceptr
	var skip C.int
	if msg := C.GoString(C.setup(&x, elements, &skip)); msg != "" {
		fmt.Fprintln(os.Stderr, "cgolaunch:", msg)
		if skip != 0 {
			os.Exit(3)
		}
		os.Exit(1)
	}
	for i := 0; i < launches; i++ {
		if err := launchFromGo(x); err != nil {
			fmt.Fprintln(os.Stderr, "cgolaunch:", err)
			os.Exit(1)
		}
	}
	out := make([]float32, elements)
	if C.finish(x, (*C.float)(unsafe.Pointer(&out[0])), elements) != 0 {
		fmt.Fprintln(os.Stderr, "cgolaunch: synchronize or copy failed")
		os.Exit(1)
	}
	for i, v := range out {
		if v != launches {
			fmt.Fprintf(os.Stderr, "cgolaunch: x[%d] = %g, want %d\n", i, v, launches)
			os.Exit(1)
		}
	}
	res, _ := json.Marshal(map[string]any{"workload": "cgolaunch", "kernel": "cgolaunch_add", "launches": launches,
		"frames": []string{"cgolaunch_inner", "cgolaunch_outer", "_Cfunc_cgolaunch_outer"}})
	fmt.Println(string(res))
	os.Stdout.Sync()
	C.exit_process(0)
}
