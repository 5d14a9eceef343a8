"""A small deterministic training loop on one GPU (an MLP, torch.optim), for step digests and
gpurr bisect: two runs make the same bytes, launch for launch, unless something is planted.

  --plant scatter  from step 2 on, a float index_add_ with heavily colliding indices (float
                   atomics: its sums round differently run to run) feeds the next layer
  --plant nan      at step 3 the loss is the log of a negative number: NaN, which backward
                   carries into the gradients and the optimizer into the weights
  --lr X           the learning rate (default 1e-3); --opt sgd or adam (default sgd), or
                   manual: a hand-written SGD update, no torch.optim, each step inside an
                   NVTX range "step N" (what gpurr's --step-range takes)
  --steps N        training steps (default 6)

Prints one JSON line."""
import argparse
import json

import torch
import torch.nn as nn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plant", choices=["none", "scatter", "nan"], default="none")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--opt", choices=["sgd", "adam", "manual"], default="sgd")
    ap.add_argument("--steps", type=int, default=6)
    a = ap.parse_args()

    torch.manual_seed(0)
    d, bins = 512, 64
    l1, l2, l3 = nn.Linear(d, d).cuda(), nn.Linear(d, d).cuda(), nn.Linear(d, 1).cuda()
    params = [*l1.parameters(), *l2.parameters(), *l3.parameters()]
    opt = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}.get(a.opt, lambda p, lr: None)(params, lr=a.lr)
    x = torch.randn(4096, d, device="cuda")
    y = torch.randn(4096, 1, device="cuda")
    idx = torch.randint(0, bins, (4096,), device="cuda")
    for step in range(a.steps):
        if opt is None:
            torch.cuda.nvtx.range_push(f"step {step}")
        h = torch.relu(l1(x))
        if a.plant == "scatter" and step >= 2:
            acc = torch.zeros(bins, d, device="cuda").index_add_(0, idx, h)  # MARK: planted-scatter
            h = h + torch.tanh(acc / 64)[idx]  # unsaturated: the rounding differences reach the loss
        loss = (l3(torch.relu(l2(h))) - y).square().mean()
        if a.plant == "nan" and step == 3:
            loss = torch.log(loss - 1e9)  # MARK: planted-nan
        loss.backward()
        if opt is None:
            with torch.no_grad():
                for p in params:
                    p.add_(p.grad, alpha=-a.lr)
                    p.grad = None
            torch.cuda.nvtx.range_pop()
            continue
        opt.step()  # MARK: optimizer
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    print(json.dumps({"workload": "bisect_train", "plant": a.plant, "lr": a.lr, "steps": a.steps,
                      "loss": float(loss)}))


if __name__ == "__main__":
    main()
