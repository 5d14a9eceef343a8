"""A second of eager launches, for sampled GPU timing (gpurr record --gpu-timing=sample): long
enough for many timing windows. Prints on its last line what it did."""
import json

import torch

ADDS = 100_000


def main():
    x = torch.zeros(1024, device="cuda")
    for _ in range(ADDS):
        x.add_(1.0)
    torch.cuda.synchronize()
    print(json.dumps({"workload": "sampled", "adds": ADDS, "sum": float(x.sum())}))


if __name__ == "__main__":
    main()
