"""A small training-like loop whose one nondeterministic kernel is a float scatter-add with
many colliding indices (the atomics' order changes the sums' rounding run to run); everything
before it is deterministic. Two recordings of it must part ways at the scatter-add.

With --deterministic the scatter-add is replaced by a plain sum over the same values, so two
runs must match launch for launch (gpurr verify against a manifest of the first).

Usage: diff_scatter.py [--deterministic]"""
import json
import sys

import torch


def main():
    deterministic = "--deterministic" in sys.argv[1:]
    torch.manual_seed(0)
    n, bins = 1 << 20, 64
    x = torch.randn(n, device="cuda")
    idx = torch.randint(0, bins, (n,), device="cuda")
    w = torch.randn(bins, bins, device="cuda")
    for _ in range(3):
        y = torch.relu(x * 2)
        if deterministic:
            acc = y.view(bins, -1).sum(1)  # a reduction: the same sums every run
        else:
            acc = torch.zeros(bins, device="cuda")
            acc.scatter_add_(0, idx, y)  # MARK: scatter
        out = torch.tanh(w @ acc)
        x = x + 1e-3 * out.sum()
    torch.cuda.synchronize()
    print(json.dumps({"workload": "diff_scatter", "deterministic": deterministic, "checksum": float(x.sum())}))


if __name__ == "__main__":
    main()
