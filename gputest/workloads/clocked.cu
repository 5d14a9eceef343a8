// A kernel that spins on clock64() and writes the clock it started at, built as machine code only
// (nvcc -gencode arch=compute_90,code=sm_90: a cubin, no PTX), for the replay.clocked_cubin
// GPU test: its replay differs from its recording, and replay must say why from its SASS (it
// reads SR_CLOCKLO), not blame memory outside its regions. It writes the clock it started at,
// which differs from run to run (the cycles it spun are nearly the same every time).
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

extern "C" __global__ void clocked(long long *started, int spin) {
    long long t0 = clock64();
    while (clock64() - t0 < spin) {
    }
    started[blockIdx.x * blockDim.x + threadIdx.x] = t0;
}

int main() {
    long long *started;
    CHECK(cudaMalloc(&started, 64 * 32 * sizeof(long long)));
    clocked<<<64, 32>>>(started, 100000);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    printf("{\"workload\": \"clocked\", \"kernel\": \"clocked\"}\n");
    return 0;
}
