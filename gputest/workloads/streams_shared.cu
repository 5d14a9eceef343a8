// Kernels on 32 streams, each writing its own element of one shared allocation, all at once,
// for the memory.streams_shared GPU test: every kernel reaches the whole allocation, so the
// state gpurr takes after one launch is taken while kernels of the other streams write it. The
// recording must still be consistent (every chunk holds the bytes its name hashes), and the
// states other streams wrote while they were taken are torn. Each kernel spins a while so the
// streams overlap; the result each writes is its stream index and round, which do not vary.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

constexpr int STREAMS = 32, ROUNDS = 10, ELEMS = 1 << 20;  // 4 MiB: 64 chunks

// write_own sets element s * (ELEMS / STREAMS) + i of its stream's slice, slowly.
extern "C" __global__ void write_own(int *shared, int s, int round) {
    int *mine = shared + s * (ELEMS / STREAMS);
    for (int i = threadIdx.x + blockIdx.x * blockDim.x; i < ELEMS / STREAMS; i += gridDim.x * blockDim.x) {
        int v = mine[i];
        for (int k = 0; k < 200; k++) v = (v * 1103515245 + 12345) & 0x7fffffff;  // work, so streams overlap
        mine[i] = s * 1000 + round + (v == 123456789);  // v: the same in every run
    }
}

int main() {
    int *shared;
    CHECK(cudaMalloc(&shared, ELEMS * sizeof(int)));
    CHECK(cudaMemset(shared, 0, ELEMS * sizeof(int)));
    cudaStream_t streams[STREAMS];
    for (auto &s : streams) CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int round = 0; round < ROUNDS; round++)
        for (int s = 0; s < STREAMS; s++) write_own<<<8, 128, 0, streams[s]>>>(shared, s, round);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    static int host[ELEMS];
    CHECK(cudaMemcpy(host, shared, sizeof host, cudaMemcpyDeviceToHost));
    long long sum = 0;
    for (int i = 0; i < ELEMS; i++) sum += host[i];
    printf("{\"workload\": \"streams_shared\", \"launches\": %d, \"sum\": %lld}\n", STREAMS * ROUNDS, sum);
    return 0;
}
