// A cooperative kernel with a grid-wide sync, launched with cudaLaunchCooperativeKernel, for
// the replay.cooperative GPU test: each CTA writes its partial sums, the grid syncs, and CTA 0
// adds them up in a fixed order, so the output is deterministic and replay must be bit-exact
// (launched as an ordinary kernel, grid.sync() faults).
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

namespace cg = cooperative_groups;

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

constexpr int N = 1 << 20, THREADS = 256;

extern "C" __global__ void grid_sum(const float *x, float *partial, float *total, int n) {
    cg::grid_group grid = cg::this_grid();
    __shared__ float s[THREADS];
    float acc = 0;
    for (int i = grid.thread_rank(); i < n; i += grid.size()) acc += x[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w /= 2) {
        if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
    grid.sync();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        float t = 0;
        for (unsigned b = 0; b < gridDim.x; b++) t += partial[b];
        *total = t;
    }
}

int main() {
    int dev = 0, coop = 0, sms = 0, per_sm = 0;
    CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev));
    if (!coop) {
        printf("SKIP: the device cannot launch cooperative kernels\n");
        return 3;
    }
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grid_sum, THREADS, 0));
    int blocks = sms * (per_sm < 2 ? per_sm : 2);
    float *x, *partial, *total;
    CHECK(cudaMalloc(&x, N * sizeof(float)));
    CHECK(cudaMalloc(&partial, blocks * sizeof(float)));
    CHECK(cudaMalloc(&total, sizeof(float)));
    static float host[N];
    for (int i = 0; i < N; i++) host[i] = (float)((i * 7919) % 1000) / 1000.0f;
    CHECK(cudaMemcpy(x, host, sizeof host, cudaMemcpyHostToDevice));
    int n = N;
    void *args[] = {&x, &partial, &total, &n};
    CHECK(cudaLaunchCooperativeKernel((void *)grid_sum, blocks, THREADS, args, 0, 0));
    CHECK(cudaDeviceSynchronize());
    float t;
    CHECK(cudaMemcpy(&t, total, sizeof t, cudaMemcpyDeviceToHost));
    printf("{\"workload\": \"coop_sync\", \"blocks\": %d, \"total\": %.3f}\n", blocks, t);
    return 0;
}
