// One launch whose operands are 1.5 GiB (two 512 MiB inputs, a 512 MiB output), for the
// replay.big_operands GPU test: with the default 256 MiB staging ring, gpurr must snapshot it
// in pieces (never skip it for its size) and replay it bit-exact.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

constexpr size_t N = 128ull << 20;  // floats: 512 MiB each

extern "C" __global__ void fill(float *a, float *b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        a[i] = (float)(i % 1013) * 0.5f;
        b[i] = (float)(i % 997) * 0.25f;
    }
}

extern "C" __global__ void fma_big(const float *a, const float *b, float *c, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        c[i] = a[i] * b[i] + 1.0f;
}

int main() {
    float *a, *b, *c;
    CHECK(cudaMalloc(&a, N * sizeof(float)));
    CHECK(cudaMalloc(&b, N * sizeof(float)));
    CHECK(cudaMalloc(&c, N * sizeof(float)));
    fill<<<1024, 256>>>(a, b, N);
    fma_big<<<1024, 256>>>(a, b, c, N);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    float head[4];
    CHECK(cudaMemcpy(head, c + N - 4, sizeof head, cudaMemcpyDeviceToHost));
    printf("{\"workload\": \"big_operands\", \"tail\": [%.2f, %.2f, %.2f, %.2f]}\n", head[0], head[1], head[2], head[3]);
    return 0;
}
