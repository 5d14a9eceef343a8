// A kernel with a planted data race, for the race.planted GPU test: each thread writes its
// slot of shared memory, then reads the slot of a thread one warp on, with the barrier between
// the two left out. Between the two each thread spends ~10 µs on arithmetic the read's address
// depends on, so run as it is every warp of a CTA writes long before any reads (the race stays
// hidden, as such races do); a delay before some warps' shared store (gpurr race) makes their
// neighbours read the zero the slot was cleared to. The program launches it once and prints a
// JSON line.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

constexpr int N = 256, BLOCKS = 64;

extern "C" __global__ void racy_neighbour(const float *x, float *out) {
    __shared__ float s[N];
    int t = threadIdx.x, i = blockIdx.x * N + t;
    s[t] = 0.0f;
    __syncthreads();
    s[t] = x[i];                      // RACE: written here
    float busy = x[i];
    for (int k = 0; k < 4096; k++) busy = fmaf(busy, 0.999f, 0.001f);  // dependent FMAs
    int hidden = busy > 1e30f;        // never true, but the compiler cannot know: the read waits
    // __syncthreads() belongs here
    out[i] = s[(t + 32 + hidden) % N];  // RACE: read here, one warp on
}

int main() {
    float *x, *out;
    CHECK(cudaMalloc(&x, N * BLOCKS * sizeof(float)));
    CHECK(cudaMalloc(&out, N * BLOCKS * sizeof(float)));
    float host[N * BLOCKS];
    for (int i = 0; i < N * BLOCKS; i++) host[i] = 1.0f + i;
    CHECK(cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(out, 0, sizeof host));
    racy_neighbour<<<BLOCKS, N>>>(x, out);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    printf("{\"workload\": \"racy\", \"kernel\": \"racy_neighbour\"}\n");
    return 0;
}
