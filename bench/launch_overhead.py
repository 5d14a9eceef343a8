"""Launch-bound PyTorch eager loop: ITERS calls of x.add_(1) on a 1-element GPU tensor.

Reports wall time per call in microseconds (each call is one kernel launch), the median of
REPEATS timed loops after a warm-up, synchronising before and after each loop.
  --profiler: the same loop inside torch.profiler (CPU + CUDA activities), in this process.
Prints one JSON line."""
import argparse
import json
import statistics
import time

import torch

ITERS = 20_000
REPEATS = 11
WARMUP = 2_000


def loop(x, n):
    for _ in range(n):
        x.add_(1)


def measure(x):
    loop(x, WARMUP)
    torch.cuda.synchronize()
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        loop(x, ITERS)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / ITERS * 1e6)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profiler", action="store_true")
    args = ap.parse_args()
    x = torch.zeros(1, device="cuda")
    if args.profiler:
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts):
            times = measure(x)
    else:
        times = measure(x)
    calls = WARMUP + REPEATS * ITERS
    if float(x.item()) != calls:  # every launch ran, exactly once
        raise SystemExit(f"launch_overhead: x = {x.item()}, want {calls}")
    print(json.dumps({"bench": "launch_overhead", "mode": "profiler" if args.profiler else "plain",
                      "us_per_launch": round(statistics.median(times), 3),
                      "repeats_us": [round(t, 3) for t in times], "launches": calls}))


if __name__ == "__main__":
    main()
