"""CUDA graph: capture three ops at marked lines, replay them REPLAYS times.

The ops run eagerly WARMUP times first (same lines, not captured), then once under capture."""
import json
import math
import sys

import torch

REPLAYS = 50
WARMUP = 3
N = 1 << 16


def step(x):
    y = x * 2.0  # MARK: graph-op1
    z = y + 1.0  # MARK: graph-op2
    return torch.sin(z)  # MARK: graph-op3


def main():
    x = torch.zeros(N, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(WARMUP):
            step(x)
    torch.cuda.current_stream().wait_stream(side)

    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = step(x)

    acc = torch.zeros(N, device="cuda")
    values = [i / REPLAYS for i in range(REPLAYS)]
    for v in values:
        x.fill_(v)
        g.replay()
        acc.add_(out)
    torch.cuda.synchronize()

    want = sum(math.sin(2.0 * v + 1.0) for v in values)
    got = acc.cpu().double()
    if not torch.allclose(got, torch.full_like(got, want), rtol=1e-4, atol=1e-4):
        print(f"graphs: expected every element {want:.6f}, got {got[:4].tolist()}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"workload": "graphs", "replays": REPLAYS, "warmup": WARMUP,
                      "marks": ["graph-op1", "graph-op2", "graph-op3"]}))


if __name__ == "__main__":
    main()
