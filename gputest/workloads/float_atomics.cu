// A kernel that sums floats into one cell with atomicAdd from every thread of 256 CTAs, for the
// race.atomics GPU test: the order the additions land in changes from run to run, and with
// addends of many magnitudes so does the rounded sum, so gpurr race must call the kernel
// nondeterministic from its plain replays, before any delay. The program launches it once and
// prints a JSON line (not the sum, which varies).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

constexpr int N = 256, BLOCKS = 256;

extern "C" __global__ void atomic_sum(const float *x, float *sum) {
    atomicAdd(sum, x[blockIdx.x * N + threadIdx.x]);
}

int main() {
    float *x, *sum;
    static float host[N * BLOCKS];
    CHECK(cudaMalloc(&x, sizeof host));
    CHECK(cudaMalloc(&sum, sizeof(float)));
    unsigned state = 12345;
    for (int i = 0; i < N * BLOCKS; i++) {
        state = state * 1664525u + 1013904223u;
        // Mantissas and exponents both vary (2^-10 to 2^10, either sign): float addition
        // of these is far from associative.
        float m = 1.0f + (state >> 9) / 8388608.0f;
        int e = (int)((state >> 3) % 21) - 10;
        host[i] = ((state & 1) ? -1.0f : 1.0f) * ldexpf(m, e);
    }
    CHECK(cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(sum, 0, sizeof(float)));
    atomic_sum<<<BLOCKS, N>>>(x, sum);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    printf("{\"workload\": \"float_atomics\", \"kernel\": \"atomic_sum\"}\n");
    return 0;
}
