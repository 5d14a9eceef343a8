"""8 Python threads, each on its own CUDA stream, each launching a CuPy raw kernel a known
number of times. A RawKernel call is exactly one cuLaunchKernel, so the count is exact."""
import json
import sys
import threading

import cupy as cp
import numpy as np

from worker_threads import run_workers

THREADS = 8
PER_THREAD = 400
N = 1024
KERNEL = "gpurr_tick"
SRC = r"""
extern "C" __global__ void gpurr_tick(float* buf, float inc, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) buf[i] += inc;
}
"""


def main():
    kern = cp.RawKernel(SRC, KERNEL)
    kern.compile()  # compile and load now, so no thread pays for it inside the timed region
    barrier = threading.Barrier(THREADS)
    errors = []

    def worker(t):
        try:
            stream = cp.cuda.Stream(non_blocking=True)
            with stream:
                buf = cp.zeros(N, dtype=cp.float32)  # memset on this stream, ordered before the kernels
                barrier.wait(timeout=120)  # all threads launch at once
                for _ in range(PER_THREAD):
                    kern(((N + 255) // 256,), (256,), (buf, np.float32(t + 1), np.int32(N)))
                host = buf.get(stream=stream)
                stream.synchronize()
            want = float(PER_THREAD * (t + 1))
            if not np.all(host == want):
                errors.append(f"thread {t}: expected {want}, got {np.unique(host)[:5]}")
        except Exception as e:  # report every thread's failure, never hang the others
            errors.append(f"thread {t}: {type(e).__name__}: {e}")
            barrier.abort()

    run_workers("threads_streams", THREADS, worker, errors)
    print(json.dumps({"workload": "threads_streams", "kernel": KERNEL, "threads": THREADS,
                      "streams": THREADS, "per_thread": PER_THREAD,
                      "launches_expected": THREADS * PER_THREAD}))


if __name__ == "__main__":
    main()
