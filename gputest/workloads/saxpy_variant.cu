// Replacement modules for the replay.module GPU test, built with nvcc -cubin: the same kernel
// name and parameters as gridstride.py's saxpy_gridstride. Without -DWRONG it computes the
// same result with a different loop (an A/B that must replay bit-exact); with -DWRONG it adds
// one (a "fix" that changes the output, which replay must report).
extern "C" __global__ void saxpy_gridstride(const float *x, float *y, float a, long long n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += stride) {
        float v = __fmaf_rn(a, x[i], y[i]);
#ifdef WRONG
        v += 1.0f;
#endif
        y[i] = v;
    }
}
