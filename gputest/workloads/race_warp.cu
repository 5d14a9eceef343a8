// A warp-divergent read before a __syncwarp, for the race.sides_warp GPU test: the lanes of a
// warp split on their parity; the even lanes write their slot of shared memory, then every
// lane reads its even neighbour's slot with the __syncwarp between the two left out. The
// lanes of a diverged warp run one side then the other, so as it is the odd lanes' read may
// run first; a delay before the even lanes' store (gpurr race, per thread) exposes it. With
// "fixed" the kernel has the __syncwarp. It prints a JSON line.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

constexpr int N = 128, BLOCKS = 32;

template <bool Fixed>
__device__ void pairs(const float *x, float *out) {
    __shared__ float s[N];
    int t = threadIdx.x, i = blockIdx.x * N + t;
    s[t] = 0.0f;
    __syncthreads();
    if ((t & 1) == 0) {
        s[t] = x[i] * 3.0f;  // MARK: even-store
    }
    if (Fixed) __syncwarp();
    out[i] = s[t & ~1];  // MARK: neighbour-load
}

extern "C" __global__ void warp_pairs(const float *x, float *out) { pairs<false>(x, out); }
extern "C" __global__ void warp_pairs_fixed(const float *x, float *out) { pairs<true>(x, out); }

int main(int argc, char **argv) {
    bool fixed = argc > 1 && !strcmp(argv[1], "fixed");
    float *x, *out;
    CHECK(cudaMalloc(&x, N * BLOCKS * sizeof(float)));
    CHECK(cudaMalloc(&out, N * BLOCKS * sizeof(float)));
    static float host[N * BLOCKS];
    for (int i = 0; i < N * BLOCKS; i++) host[i] = 1.0f + i;
    CHECK(cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(out, 0, sizeof host));
    if (fixed) warp_pairs_fixed<<<BLOCKS, N>>>(x, out);
    else warp_pairs<<<BLOCKS, N>>>(x, out);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    printf("{\"workload\": \"race_warp\", \"fixed\": %s}\n", fixed ? "true" : "false");
    return 0;
}
