"""A two-layer model trained for a few steps, every forward line marked: gputest checks that each
kernel its backward pass launches (on autograd's engine thread, which runs no Python) names the
forward line of the op whose backward it is.

  --nan        plant a NaN in a backward computation: sqrt of a relu output that has zeros, whose
               gradient is 0 there, so SqrtBackward0 computes 0 / (2 * sqrt(0)) = NaN
  --compile    the same model under torch.compile (its backward is one compiled node)

The last stdout line is a JSON object with what it did."""
import argparse
import json

import torch
import torch.nn as nn


class TwoLayer(nn.Module):
    def __init__(self, nan):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(256, 512) * 0.05)
        self.w2 = nn.Parameter(torch.randn(512, 64) * 0.05)
        self.nan = nan

    def forward(self, x):
        h = x @ self.w1  # MARK: fwd-mm1
        h = torch.relu(h)  # MARK: fwd-relu
        if self.nan:
            h = torch.sqrt(h) * 0  # MARK: fwd-sqrt
        return h @ self.w2  # MARK: fwd-mm2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nan", action="store_true")
    ap.add_argument("--compile", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(0)
    model = TwoLayer(a.nan).cuda()
    run = torch.compile(model) if a.compile else model
    x = torch.randn(128, 256, device="cuda")
    target = torch.randn(128, 64, device="cuda")
    steps = 3
    for _ in range(steps):
        y = run(x)  # MARK: call
        loss = ((y - target) ** 2).mean()  # MARK: fwd-loss
        loss.backward()  # MARK: backward
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.01 * p.grad
                p.grad = None
    torch.cuda.synchronize()
    print(json.dumps({"workload": "autograd_lines", "steps": steps, "nan": a.nan, "compiled": a.compile,
                      "loss": f"{float(loss):.4f}", "finite_params": bool(all(torch.isfinite(p).all() for p in model.parameters()))}))


if __name__ == "__main__":
    main()
