"""Launch a CuPy raw kernel forever (or --max N times) and say how far it got.

Protocol on stdout, each line flushed: "READY <pid>" once the kernel has run once; before each
batch "UPTO <n>" (an upper bound on launches issued so far, counting the first one), after it
"DONE <n>". With --max N it stops after N launches and prints a JSON line."""
import argparse
import json
import os
import sys

import cupy as cp
import numpy as np

KERNEL = "gpurr_sigkill_tick"
SRC = r"""
extern "C" __global__ void gpurr_sigkill_tick(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
"""
N = 256
BATCH = 500


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", type=int, default=0, help="stop after this many launches (0: never)")
    args = ap.parse_args()

    kern = cp.RawKernel(SRC, KERNEL)
    x = cp.zeros(N, dtype=cp.float32)

    def launch():
        kern((1,), (N,), (x, np.int32(N)))

    launch()
    n = 1
    cp.cuda.runtime.deviceSynchronize()
    print(f"READY {os.getpid()}", flush=True)
    while not args.max or n < args.max:
        batch = BATCH if not args.max else min(BATCH, args.max - n)
        print(f"UPTO {n + batch}", flush=True)
        for _ in range(batch):
            launch()
        n += batch
        cp.cuda.runtime.deviceSynchronize()
        print(f"DONE {n}", flush=True)
    host = x.get()
    if not np.all(host == n):
        print(f"sigkill: expected {n}, got {np.unique(host)[:5]}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"workload": "sigkill", "kernel": KERNEL, "launches": n}))


if __name__ == "__main__":
    main()
