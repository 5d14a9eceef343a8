"""A hand-written Triton kernel launched LAUNCHES times from a marked line."""
import json
import sys

import torch
import triton
import triton.language as tl

LAUNCHES = 100
N = 100_000
BLOCK = 1024


@triton.jit
def gpurr_triton_add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def main():
    x = torch.randn(N, device="cuda")
    y = torch.randn(N, device="cuda")
    out = torch.empty_like(x)
    grid = (triton.cdiv(N, BLOCK),)
    for _ in range(LAUNCHES):
        out.fill_(float("nan"))
        gpurr_triton_add[grid](x, y, out, N, BLOCK=BLOCK)  # MARK: triton-launch
    torch.cuda.synchronize()
    if not torch.equal(out, x + y):
        print("triton_kernel: out != x + y", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"workload": "triton_kernel", "kernel": "gpurr_triton_add",
                      "launches_expected": LAUNCHES, "grid_x": grid[0]}))


if __name__ == "__main__":
    main()
