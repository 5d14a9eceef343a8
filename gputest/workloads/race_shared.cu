// A shared-memory race hidden by long work, for the race.sides_shared GPU test: each thread
// writes its slot, spends ~10 µs on arithmetic, then reads the slot of a thread one warp on,
// with the barrier between the two left out; run as it is every warp writes long before any
// reads, so only a delay longer than the work exposes it. With "fixed" the program launches
// the same kernel with the barrier in. It prints a JSON line.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

constexpr int N = 256, BLOCKS = 64;

template <bool Fixed>
__device__ void neighbour(const float *x, float *out) {
    __shared__ float s[N];
    int t = threadIdx.x, i = blockIdx.x * N + t;
    s[t] = 0.0f;
    __syncthreads();
    float busy = x[i];
    s[t] = busy;  // MARK: shared-store
    for (int k = 0; k < 4096; k++) busy = fmaf(busy, 0.999f, 0.001f);  // dependent FMAs, ~10 µs
    int hidden = busy > 1e30f;  // never true, but the compiler cannot know: the read waits
    if (Fixed) __syncthreads();
    out[i] = s[(t + 32 + hidden) % N];  // MARK: shared-load
}

extern "C" __global__ void shared_hidden(const float *x, float *out) { neighbour<false>(x, out); }
extern "C" __global__ void shared_hidden_fixed(const float *x, float *out) { neighbour<true>(x, out); }

int main(int argc, char **argv) {
    bool fixed = argc > 1 && !strcmp(argv[1], "fixed");
    float *x, *out;
    CHECK(cudaMalloc(&x, N * BLOCKS * sizeof(float)));
    CHECK(cudaMalloc(&out, N * BLOCKS * sizeof(float)));
    static float host[N * BLOCKS];
    for (int i = 0; i < N * BLOCKS; i++) host[i] = 1.0f + i;
    CHECK(cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(out, 0, sizeof host));
    if (fixed) shared_hidden_fixed<<<BLOCKS, N>>>(x, out);
    else shared_hidden<<<BLOCKS, N>>>(x, out);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    printf("{\"workload\": \"race_shared\", \"fixed\": %s}\n", fixed ? "true" : "false");
    return 0;
}
