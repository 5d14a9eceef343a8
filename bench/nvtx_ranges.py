"""What an NVTX push/pop range costs the thread that makes it: ITERS torch.cuda.nvtx.range_push /
range_pop pairs, timed per pair in nanoseconds (the median of REPEATS timed loops, less the same
loop without the calls), after a warm-up. One kernel launch first, so CUDA (and a recording
agent) is up. No launches in the loop: the launch log's own cost, noisy at the scale of a range,
stays out of it.

Prints one JSON line."""
import json
import statistics
import time

import torch

ITERS = 200_000
REPEATS = 9
WARMUP = 10_000


def main():
    x = torch.zeros(1, device="cuda")
    x.add_(1)
    torch.cuda.synchronize()
    push, pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop

    def ranges(n):
        for _ in range(n):
            push("step")
            pop()

    def empty(n):
        for _ in range(n):
            pass

    ranges(WARMUP)
    per_pair = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        ranges(ITERS)
        t1 = time.perf_counter()
        empty(ITERS)
        t2 = time.perf_counter()
        per_pair.append(((t1 - t0) - (t2 - t1)) / ITERS * 1e9)
    print(json.dumps({"bench": "nvtx_ranges", "ns_per_range": round(statistics.median(per_pair), 1),
                      "repeats_ns": [round(t, 1) for t in per_pair], "ranges": WARMUP + REPEATS * ITERS}))


if __name__ == "__main__":
    main()
