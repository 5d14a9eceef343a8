"""One elementwise launch over 1 GiB of regions (512 MiB in, 512 MiB out), for the replay
latency benchmark.

Usage: replay_big.py"""
import json

import torch


def main():
    torch.manual_seed(0)
    x = torch.randn(1 << 27, device="cuda")
    y = x * 2.0  # MARK: mul
    torch.cuda.synchronize()
    print(json.dumps({"workload": "replay_big", "sum": round(float(y[:1000].sum()), 3)}))


if __name__ == "__main__":
    main()
