// Kernels of gpurr's built-in demo workload (internal/demo). scripts/gen-ptx
// compiles this file to ../ptx/demo.ptx, which the binary embeds.
//
// The data are small non-negative integers held in floats, so every result
// is exact and the host can check it bit for bit; the reduction adds in
// 64-bit integers, so the order of its atomic additions cannot change the
// sum.

extern "C" {

// gpurr_demo_fill sets x[i] = (i * mul + add) mod 1024 for i < n.
__global__ void gpurr_demo_fill(float *x, unsigned int n, unsigned int mul, unsigned int add)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] = (float)((i * mul + add) & 1023u);
    }
}

// gpurr_demo_saxpy sets y[i] = a * x[i] + y[i] for i < n, with a grid-stride
// loop so any grid covers any n.
__global__ void gpurr_demo_saxpy(unsigned int n, float a, const float *x, float *y)
{
    unsigned int stride = gridDim.x * blockDim.x;
    for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = a * x[i] + y[i];
    }
}

// gpurr_demo_reduce adds (unsigned long long)x[i] for i < n to *out. Each
// thread sums a grid-stride slice, each block sums its threads in shared
// memory, and one atomic addition per block reaches *out. It needs a
// power-of-two block size and blockDim.x * 8 bytes of dynamic shared memory.
__global__ void gpurr_demo_reduce(const float *x, unsigned int n, unsigned long long *out)
{
    extern __shared__ unsigned long long gpurr_demo_partial[];
    unsigned int tid = threadIdx.x;
    unsigned int stride = gridDim.x * blockDim.x;
    unsigned long long sum = 0;
    for (unsigned int i = blockIdx.x * blockDim.x + tid; i < n; i += stride) {
        sum += (unsigned long long)x[i];
    }
    gpurr_demo_partial[tid] = sum;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s /= 2) {
        if (tid < s) {
            gpurr_demo_partial[tid] += gpurr_demo_partial[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) {
        atomicAdd(out, gpurr_demo_partial[0]);
    }
}

}
