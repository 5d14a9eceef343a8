"""A loop that plants one NaN at a known step with a kernel (fill_; `x[17] = nan` would be a
host-to-device copy, not a kernel): gpurr nan must name the launch and line.

Usage: nan_loop.py"""
import json

import torch


def main():
    torch.manual_seed(0)
    x = torch.randn(4096, device="cuda")
    w = torch.randn(4096, device="cuda")
    for step in range(6):
        x = torch.tanh(x * w)
        if step == 3:
            x[17:18].fill_(float("nan"))  # MARK: nan
    torch.cuda.synchronize()
    print(json.dumps({"workload": "nan_loop", "nan_step": 3, "nans": int(torch.isnan(x).sum())}))


if __name__ == "__main__":
    main()
