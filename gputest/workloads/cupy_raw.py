"""A CuPy RawKernel (compiled by NVRTC, loaded with cuModuleLoadData) launched LAUNCHES times.

Its parameters (float*, float, int) sit at offsets 0, 8, 12: 3 parameters, 16 bytes."""
import json
import sys

import cupy as cp
import numpy as np

LAUNCHES = 200
N = 4096
KERNEL = "gpurr_cupy_scale"
SRC = r"""
extern "C" __global__ void gpurr_cupy_scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * a + 1.0f;
}
"""


def main():
    kern = cp.RawKernel(SRC, KERNEL)
    x = cp.zeros(N, dtype=cp.float32)
    for _ in range(LAUNCHES):
        kern(((N + 127) // 128,), (128,), (x, np.float32(1.0), np.int32(N)))
    host = x.get()
    if not np.all(host == LAUNCHES):
        print(f"cupy_raw: expected {LAUNCHES}, got {np.unique(host)[:5]}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"workload": "cupy_raw", "kernel": KERNEL, "launches_expected": LAUNCHES,
                      "param_count": 3, "param_bytes": 16, "grid_x": (N + 127) // 128,
                      "block_x": 128}))


if __name__ == "__main__":
    main()
