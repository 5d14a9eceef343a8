"""A kernel that spins on a flag nobody sets, after a few that finish: the hang the watchdog
(gpurr record --hang-timeout) must report and, with --hang-kill, end. Bare, with --bare, it
launches only the kernels that finish and prints a JSON line (the harness's bare run)."""
import json
import sys

import cupy as cp

SRC = r"""
extern "C" __global__ void gpurr_hang_tick(float* x) { x[threadIdx.x] += 1.0f; }
extern "C" __global__ void gpurr_hang_spin(volatile int* flag) {
    while (*flag == 0) { }
}
"""


def main():
    mod = cp.RawModule(code=SRC)
    tick, spin = mod.get_function("gpurr_hang_tick"), mod.get_function("gpurr_hang_spin")
    x = cp.zeros(32, dtype=cp.float32)
    for _ in range(10):
        tick((1,), (32,), (x,))
    cp.cuda.runtime.deviceSynchronize()
    if "--bare" in sys.argv:
        print(json.dumps({"workload": "hang", "ticks": 10}))
        return
    flag = cp.zeros(1, dtype=cp.int32)
    spin((1,), (1,), (flag,))  # MARK: spin
    cp.cuda.runtime.deviceSynchronize()  # never returns
    print("hang: the spinning kernel finished", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
    main()
