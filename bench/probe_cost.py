"""What live probes (gpurr record --probe) cost a Triton kernel's launches: --shape matmul times
a 4096^3 fp16 matmul (1,024 CTAs of 128x128, ~0.3 ms on an H100) per kernel with CUDA events,
the median of REPEATS timed batches of LAUNCHES; --shape small times a one-CTA kernel's
launches in a loop bound by the host (per launch: the agent's swap, the records' zeroing and
copy-back). Run under gpurr record with and without --probe 'gpurr_bench_.*:entry,exit'; the
ratio is the probes' cost. Prints one JSON line."""
import argparse
import json
import statistics
import time

import torch
import triton
import triton.language as tl

M = N = K = 4096
BM, BN, BK = 128, 128, 64


@triton.jit
def gpurr_bench_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BN)
    rm = (pid // grid_n) * BM + tl.arange(0, BM)
    rn = (pid % grid_n) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a = a_ptr + rm[:, None] * K + rk[None, :]
    b = b_ptr + rk[:, None] * N + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, K, BK):
        acc += tl.dot(tl.load(a), tl.load(b))
        a += BK
        b += BK * N
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@triton.jit
def gpurr_bench_small(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1.0)


def matmul(repeats, launches):
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)

    def run(n):
        for _ in range(n):
            gpurr_bench_matmul[grid](a, b, c, M, N, K, BM=BM, BN=BN, BK=BK, num_warps=8, num_stages=3)

    run(5)
    torch.cuda.synchronize()
    if not torch.allclose(c.float(), (a.float() @ b.float()), atol=1.0, rtol=1e-2):
        raise SystemExit("probe_cost: the matmul is wrong")
    per_kernel = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run(launches)
        end.record()
        end.synchronize()
        per_kernel.append(start.elapsed_time(end) / launches)
    return {"ms_per_kernel": round(statistics.median(per_kernel), 4), "repeats_ms": [round(t, 4) for t in per_kernel],
            "launches": 5 + repeats * launches, "ctas": grid[0]}


def small(repeats, launches):
    x = torch.zeros(1024, device="cuda")

    def run(n):
        for _ in range(n):
            gpurr_bench_small[(1,)](x, BLOCK=1024)

    run(100)
    torch.cuda.synchronize()
    per_launch = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run(launches)
        torch.cuda.synchronize()
        per_launch.append((time.perf_counter() - t0) / launches * 1e6)
    want = 100 + repeats * launches
    if x[0].item() != want:
        raise SystemExit(f"probe_cost: {x[0].item()} after {want} increments")
    return {"us_per_launch": round(statistics.median(per_launch), 3), "repeats_us": [round(t, 3) for t in per_launch],
            "launches": want}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=["matmul", "small"], default="matmul")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--launches", type=int, default=0, help="per timed batch (default: 50 matmuls, 5000 small)")
    o = ap.parse_args()
    if o.shape == "matmul":
        res = matmul(o.repeats, o.launches or 50)
    else:
        res = small(o.repeats, o.launches or 5000)
    print(json.dumps({"bench": "probe_cost", "shape": o.shape, **res}))


if __name__ == "__main__":
    main()
