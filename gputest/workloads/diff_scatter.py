"""A small training-like loop whose one nondeterministic kernel is a float scatter-add with
many colliding indices (the atomics' order changes the sums' rounding run to run); everything
before it is deterministic. Two recordings of it must part ways at the scatter-add.

Usage: diff_scatter.py"""
import json

import torch


def main():
    torch.manual_seed(0)
    n, bins = 1 << 20, 64
    x = torch.randn(n, device="cuda")
    idx = torch.randint(0, bins, (n,), device="cuda")
    w = torch.randn(bins, bins, device="cuda")
    for _ in range(3):
        y = torch.relu(x * 2)
        acc = torch.zeros(bins, device="cuda")
        acc.scatter_add_(0, idx, y)  # MARK: scatter
        out = torch.tanh(w @ acc)
        x = x + 1e-3 * out.sum()
    torch.cuda.synchronize()
    print(json.dumps({"workload": "diff_scatter", "checksum": float(x.sum())}))


if __name__ == "__main__":
    main()
