// Three kernels, the middle one a trap set to go off only later: late_trap reads the GPU's
// global timer and traps once it passes a deadline the host sets kDelayNs after the timer's
// value at the start (read by stamp). The program's own run ends long before that, so it runs
// clean; a replay of its launches after the deadline faults in late_trap, which loses the CUDA
// context, while scale, launched after it, replays in a fresh one. Every CUDA call is checked.
// The last stdout line is a JSON object.
//
// Build: nvcc -O2 -arch=sm_90 -o fault_later fault_later.cu
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK_RT(call)                                                                     \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

constexpr int kN = 1 << 12;
constexpr unsigned long long kDelayNs = 5ull * 1000 * 1000 * 1000;

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void stamp(unsigned long long* t) { *t = global_ns(); }

__global__ void late_trap(float* x, unsigned long long deadline, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (global_ns() > deadline) __trap();
  if (i < n) x[i] = static_cast<float>(i);
}

__global__ void scale(float* x, float f, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= f;
}

int main() {
  CHECK_RT(cudaSetDevice(0));
  unsigned long long *t, start = 0;
  float* x;
  CHECK_RT(cudaMalloc(&t, sizeof *t));
  CHECK_RT(cudaMalloc(&x, kN * sizeof(float)));
  stamp<<<1, 1>>>(t);
  CHECK_RT(cudaGetLastError());
  CHECK_RT(cudaMemcpy(&start, t, sizeof start, cudaMemcpyDeviceToHost));
  late_trap<<<kN / 256, 256>>>(x, start + kDelayNs, kN);
  CHECK_RT(cudaGetLastError());
  scale<<<kN / 256, 256>>>(x, 2.0f, kN);
  CHECK_RT(cudaGetLastError());
  float last = 0;
  CHECK_RT(cudaMemcpy(&last, x + kN - 1, sizeof last, cudaMemcpyDeviceToHost));
  if (last != 2.0f * (kN - 1)) {
    fprintf(stderr, "fault_later: x[%d] = %g, want %g\n", kN - 1, last, 2.0f * (kN - 1));
    return 1;
  }
  CHECK_RT(cudaFree(x));
  CHECK_RT(cudaFree(t));
  printf("{\"workload\": \"fault_later\", \"delay_s\": %llu, \"last\": %g}\n", kDelayNs / 1000000000ull, last);
  return 0;
}
