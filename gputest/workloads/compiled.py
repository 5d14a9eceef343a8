"""torch.compile of a small function, called CALLS times from a marked line.

Exits 3 with the reason when torch.compile itself does not work on this machine."""
import json
import sys

import torch

CALLS = 50


def f(x, y):
    return torch.nn.functional.gelu(x * y + 1.0).sum(dim=-1)


def main():
    x = torch.randn(256, 1024, device="cuda")
    y = torch.randn(256, 1024, device="cuda")
    try:
        cf = torch.compile(f)
        cf(x, y)  # compiles
        torch.cuda.synchronize()
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0][:200]
        print(f"SKIP: torch.compile does not work here: {type(e).__name__}: {first}")
        sys.exit(3)
    for _ in range(CALLS):
        out = cf(x, y)  # MARK: compiled-call
    torch.cuda.synchronize()
    ref = f(x.double(), y.double())
    err = float((out.double() - ref).norm() / ref.norm())
    if not err < 1e-4:
        print(f"compiled: relative error {err:.3g} against eager float64", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"workload": "compiled", "calls": CALLS}))


if __name__ == "__main__":
    main()
