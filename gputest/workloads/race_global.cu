// A global-memory producer/consumer across CTAs without a fence, for the race.sides_global GPU
// test: CTA 0's threads each write a word of a buffer, and its thread 0 raises a flag right
// after its own word, with no barrier and no __threadfence() before it; the other CTAs wait
// for the flag and read the buffer. Run as it is the producer's warps store at once and the
// consumers see every word; a delay before some producer warps' stores (gpurr race) makes a
// consumer read a word before it is written. With "fixed", the producer's threads fence and
// meet at a barrier before the flag. It prints a JSON line.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

constexpr int N = 128, BLOCKS = 16;

template <bool Fixed>
__device__ void handoff(const float *x, float *data, volatile int *flag, float *out) {
    int t = threadIdx.x;
    if (blockIdx.x == 0) {
        data[t] = x[t] * 2.0f;  // MARK: producer-store
        if (Fixed) {
            __threadfence();
            __syncthreads();
        }
        if (t == 0) *flag = 1;
        return;
    }
    if (t == 0) while (*flag == 0) { }
    __syncthreads();
    out[blockIdx.x * N + t] = Fixed ? ((volatile float *)data)[t] : data[t];  // MARK: consumer-load
}

extern "C" __global__ void global_handoff(const float *x, float *data, int *flag, float *out) { handoff<false>(x, data, flag, out); }
extern "C" __global__ void global_handoff_fixed(const float *x, float *data, int *flag, float *out) { handoff<true>(x, data, flag, out); }

int main(int argc, char **argv) {
    bool fixed = argc > 1 && !strcmp(argv[1], "fixed");
    float *x, *data, *out;
    int *flag;
    CHECK(cudaMalloc(&x, N * sizeof(float)));
    CHECK(cudaMalloc(&data, N * sizeof(float)));
    CHECK(cudaMalloc(&flag, sizeof(int)));
    CHECK(cudaMalloc(&out, N * BLOCKS * sizeof(float)));
    float host[N];
    for (int i = 0; i < N; i++) host[i] = 1.0f + i;
    CHECK(cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(data, 0, N * sizeof(float)));
    CHECK(cudaMemset(flag, 0, sizeof(int)));
    CHECK(cudaMemset(out, 0, N * BLOCKS * sizeof(float)));
    // BLOCKS CTAs fit on the GPU at once, so the consumers cannot starve the producer.
    if (fixed) global_handoff_fixed<<<BLOCKS, N>>>(x, data, flag, out);
    else global_handoff<<<BLOCKS, N>>>(x, data, flag, out);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    printf("{\"workload\": \"race_global\", \"fixed\": %s}\n", fixed ? "true" : "false");
    return 0;
}
