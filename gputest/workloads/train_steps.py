"""Three training steps of a small model with torch.optim.SGD (or as many as its argument
says), then one forward pass: the launches of step k follow k optimizer steps (gpurr query's
launches.step). Prints on its last line what it did."""
import json
import sys

import torch


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(32, 64, device="cuda")
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for _ in range(steps):
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
    with torch.no_grad():
        finite = bool(torch.isfinite(model(x).sum()))  # MARK: after-steps
    print(json.dumps({"workload": "train_steps", "steps": steps, "out_finite": finite}))


if __name__ == "__main__":
    main()
