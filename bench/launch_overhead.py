"""Launch-bound PyTorch loops, timed per kernel launch in microseconds: the median of REPEATS
timed loops after a warm-up, synchronising before and after each loop.

  --shape eager     ITERS calls of x.add_(1) on a 1-element GPU tensor from a shallow stack
  --shape deep      the same loop called from 64 Python frames deep (a torch.compile'd model's
                    launch stack is that deep): what taking a Python callstack costs
  --shape backward  backward passes through a chain of CHAIN multiplications: every launch is
                    made by autograd's C++ engine thread, deep inside libtorch, with no Python:
                    what taking a native callstack costs
  --shape triton    ITERS launches of a one-line Triton kernel adding 1 to a 1-element tensor:
                    Triton's own launcher (cuLaunchKernelEx where Triton uses it), bound by the host
  --shape gpubound  x.add_(1) on GPUBOUND_ELEMENTS floats, about 10 us of GPU time each, so the
                    loop is bound by the GPU: the time per launch is the GPU's per kernel, and
                    what GPU timing adds on the GPU side shows in it
  --profiler        the same loop inside torch.profiler (CPU + CUDA activities), in this process

Prints one JSON line."""
import argparse
import json
import statistics
import time

import torch

ITERS = 20_000
REPEATS = 11
WARMUP = 2_000
DEPTH = 64
CHAIN = 200  # multiplications per backward pass: one launch each in backward
GPUBOUND_ELEMENTS = 4 << 20  # 16 MiB read and written per kernel: ~11 us at 3 TB/s


def triton_add_one():
    """A Triton kernel that adds 1 to x[0], and a loop that launches it k times."""
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(x_ptr):
        tl.store(x_ptr, tl.load(x_ptr) + 1)

    def loop_triton(x, k):
        for _ in range(k):
            add_one[(1,)](x)
    return loop_triton


def loop(x, n):
    for _ in range(n):
        x.add_(1)


def at_depth(depth, fn, *args):
    """fn(*args) called from `depth` Python frames (this function's included)."""
    if depth <= 1:
        return fn(*args)
    return at_depth(depth - 1, fn, *args)


def measure(run, warmup=WARMUP):
    """run(k) makes at least k launches and returns how many; µs per launch of each repeat."""
    run(warmup)
    torch.cuda.synchronize()
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        launches = run(ITERS)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / launches * 1e6)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=["eager", "deep", "backward", "triton", "gpubound"], default="eager")
    ap.add_argument("--profiler", action="store_true")
    # --warmup ITERS makes each repeat one step of gpurr record --step-every ITERS (but for the
    # tensor's own first launch), so that timing by steps times whole repeats or none.
    ap.add_argument("--warmup", type=int, default=WARMUP)
    args = ap.parse_args()
    x = torch.zeros(GPUBOUND_ELEMENTS if args.shape == "gpubound" else 1, device="cuda")
    body = triton_add_one() if args.shape == "triton" else loop
    if args.shape == "backward":
        x = torch.ones(1, device="cuda", requires_grad=True)

        def run(k):
            # Only the backward pass is timed per launch: the forward's launches are made
            # before it, and its own time is not divided among the backward's launches.
            passes = max(1, k // CHAIN)
            ys = []
            for _ in range(passes):
                y = x
                for _ in range(CHAIN):
                    y = y * 1.0001
                ys.append(y)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for y in ys:
                y.backward()
            torch.cuda.synchronize()
            run.backward_s += time.perf_counter() - t0
            return passes * CHAIN
    else:
        def run(k):
            if args.shape == "deep":
                at_depth(DEPTH, loop, x, k)
            else:
                body(x, k)
            return k

    def timed():
        if args.shape != "backward":
            return measure(run, args.warmup)
        # Per backward launch: the time spent in y.backward() calls over the launches they made.
        out = []
        run(WARMUP)
        for _ in range(REPEATS):
            run.backward_s = 0.0
            launches = run(ITERS // 4)
            out.append(run.backward_s / launches * 1e6)
        return out

    run.backward_s = 0.0
    if args.profiler:
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts):
            times = timed()
    else:
        times = timed()
    if args.shape != "backward":
        calls = args.warmup + REPEATS * ITERS
        if float(x[0].item()) != calls or float(x[-1].item()) != calls:  # every launch ran, exactly once
            raise SystemExit(f"launch_overhead: x = {x[0].item()}..{x[-1].item()}, want {calls}")
    elif x.grad is None or not bool(torch.isfinite(x.grad).all()):
        raise SystemExit(f"launch_overhead: backward left x.grad = {x.grad}")
    print(json.dumps({"bench": "launch_overhead", "shape": args.shape,
                      "mode": "profiler" if args.profiler else "plain",
                      "us_per_launch": round(statistics.median(times), 3),
                      "repeats_us": [round(t, 3) for t in times],
                      "launches": (args.warmup + REPEATS * ITERS) if args.shape != "backward" else None}))


if __name__ == "__main__":
    main()
