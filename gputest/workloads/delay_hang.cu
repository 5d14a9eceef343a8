// A hand-off that deadlocks when one warp is late, for the race.hang GPU test: warp 1 stores
// its scratch row, then raises the flag only if it got there within BUDGET_NS of the kernel's
// start; warp 0 spins until the flag is up. Run plainly, warp 1 is there in a microsecond or
// two and the kernel ends; with a delay before warp 1's store (gpurr race), the flag never
// rises and warp 0 spins forever. The program launches it once and prints a JSON line.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

constexpr unsigned long long BUDGET_NS = 50000;

__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void handoff(volatile int *flag, int *scratch, int *out, unsigned long long budget_ns) {
    int t = threadIdx.x;
    if (t >= 32) {  // warp 1: the producer
        unsigned long long start = now_ns();
        scratch[t - 32] = t;  // MARK: producer-store
        if (now_ns() - start < budget_ns && t == 32) *flag = 1;
    } else {  // warp 0: the consumer
        while (*flag == 0) {
        }
        out[t] = t + 1;
    }
}

int main() {
    int *flag, *scratch, *out;
    CHECK(cudaMalloc(&flag, sizeof(int)));
    CHECK(cudaMalloc(&scratch, 32 * sizeof(int)));
    CHECK(cudaMalloc(&out, 32 * sizeof(int)));
    CHECK(cudaMemset(flag, 0, sizeof(int)));
    CHECK(cudaMemset(scratch, 0, 32 * sizeof(int)));
    CHECK(cudaMemset(out, 0, 32 * sizeof(int)));
    handoff<<<1, 64>>>(flag, scratch, out, BUDGET_NS);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    int host[32];
    CHECK(cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 32; i++) {
        if (host[i] != i + 1) {
            fprintf(stderr, "handoff: out[%d] = %d, want %d\n", i, host[i], i + 1);
            return 1;
        }
    }
    printf("{\"workload\": \"delay_hang\", \"kernel\": \"handoff\"}\n");
    return 0;
}
