"""A grid-stride SAXPY written as a CuPy RawKernel, launched once with a deliberately small
shape: any grid and block give the same result, so gpurr tune can search shapes on it.

Usage: gridstride.py [N]"""
import json
import sys

try:
    import cupy as cp
except ImportError:
    print("SKIP: cupy is not installed")
    sys.exit(3)

SOURCE = r"""
extern "C" __global__ void saxpy_gridstride(const float *x, float *y, float a, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        y[i] = a * x[i] + y[i];
}
"""


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
    kernel = cp.RawKernel(SOURCE, "saxpy_gridstride")
    rng = cp.random.default_rng(0)
    x = rng.standard_normal(n, dtype=cp.float32)
    y = rng.standard_normal(n, dtype=cp.float32)
    kernel((16,), (64,), (x, y, cp.float32(2.0), cp.int64(n)))  # MARK: saxpy
    cp.cuda.runtime.deviceSynchronize()
    print(json.dumps({"workload": "gridstride", "sum": round(float(y.sum()), 2)}))


if __name__ == "__main__":
    main()
