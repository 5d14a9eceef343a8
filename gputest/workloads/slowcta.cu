// A kernel with one deliberately slow CTA, for the probe.slow_cta GPU test: CTA 7 spins about
// 200 µs on clock64 before its work, the others do the work at once. The program launches it
// once and prints a JSON line.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

extern "C" __global__ void slow_cta(float *x) {
    if (blockIdx.x == 7) {
        long long t = clock64();
        while (clock64() - t < 400000) { }  // ~200 µs at 2 GHz
    }
    x[blockIdx.x * blockDim.x + threadIdx.x] += 1.0f;
}

int main() {
    const int blocks = 64, threads = 128;
    float *x;
    CHECK(cudaMalloc(&x, blocks * threads * sizeof(float)));
    CHECK(cudaMemset(x, 0, blocks * threads * sizeof(float)));
    slow_cta<<<blocks, threads>>>(x);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    printf("{\"workload\": \"slowcta\", \"kernel\": \"slow_cta\", \"slow\": 7}\n");
    return 0;
}
