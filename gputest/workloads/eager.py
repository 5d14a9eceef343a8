"""Eager PyTorch: an elementwise op at a marked line, and cuBLAS matmuls (fp16, bf16).

Prints on its last line what it did: the harness finds the marked lines by grepping this file.
"""
import json
import sys

import torch

ADDS = 300


def run_adds(x, n):
    for _ in range(n):
        x.add_(1.0)  # MARK: eager-add
    return x


def rel_err(got, ref):
    return float((got.double() - ref).norm() / ref.norm())


def main():
    x = run_adds(torch.zeros(4096, device="cuda"), ADDS)
    a = torch.randn(512, 768, device="cuda", dtype=torch.float16)
    b = torch.randn(768, 256, device="cuda", dtype=torch.float16)
    a16, b16 = a.bfloat16(), b.bfloat16()
    c = torch.mm(a, b)  # MARK: eager-mm
    c16 = torch.mm(a16, b16)  # MARK: eager-mm-bf16
    torch.cuda.synchronize()

    ref = a.cpu().double() @ b.cpu().double()
    problems = []
    if not bool((x == ADDS).all()):
        problems.append(f"add_: expected all {ADDS}, got {x.unique().tolist()[:5]}")
    if not rel_err(c.cpu(), ref) < 1e-2:
        problems.append(f"fp16 mm relative error {rel_err(c.cpu(), ref):.3g}")
    if not rel_err(c16.cpu(), ref) < 3e-2:
        problems.append(f"bf16 mm relative error {rel_err(c16.cpu(), ref):.3g}")
    if problems:
        print("eager: " + "; ".join(problems), file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"workload": "eager", "adds": ADDS, "mm": [512, 768, 256]}))


if __name__ == "__main__":
    main()
