// racy.cu's kernel with its barrier in place, for the race.correct and race.roundtrip GPU
// tests: every thread's shared store happens before any thread of its CTA reads, whatever
// delays gpurr race puts in, so no trial may change the result. The program launches it once
// and prints a JSON line.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

constexpr int N = 256, BLOCKS = 64;

extern "C" __global__ void synced_neighbour(const float *x, float *out) {
    __shared__ float s[N];
    int t = threadIdx.x, i = blockIdx.x * N + t;
    s[t] = 0.0f;
    __syncthreads();
    s[t] = x[i];
    float busy = x[i];
    for (int k = 0; k < 4096; k++) busy = fmaf(busy, 0.999f, 0.001f);
    int hidden = busy > 1e30f;
    __syncthreads();
    out[i] = s[(t + 32 + hidden) % N];
}

int main() {
    float *x, *out;
    CHECK(cudaMalloc(&x, N * BLOCKS * sizeof(float)));
    CHECK(cudaMalloc(&out, N * BLOCKS * sizeof(float)));
    float host[N * BLOCKS];
    for (int i = 0; i < N * BLOCKS; i++) host[i] = 1.0f + i;
    CHECK(cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(out, 0, sizeof host));
    synced_neighbour<<<BLOCKS, N>>>(x, out);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    printf("{\"workload\": \"race_free\", \"kernel\": \"synced_neighbour\"}\n");
    return 0;
}
