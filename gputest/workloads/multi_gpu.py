"""Launch on every GPU: PER_DEVICE elementwise ops at a marked line on each device.
Exits 3 with the reason when there is only one GPU."""
import json
import sys

import torch

PER_DEVICE = 100


def main():
    count = torch.cuda.device_count()
    if count < 2:
        print(f"SKIP: needs 2 or more GPUs, this machine has {count}")
        sys.exit(3)
    xs = [torch.zeros(1024, device=f"cuda:{d}") for d in range(count)]
    for _ in range(PER_DEVICE):
        for x in xs:
            x.add_(1.0)  # MARK: multi-add
    bad = []
    for d, x in enumerate(xs):
        torch.cuda.synchronize(d)
        if not bool((x == PER_DEVICE).all()):
            bad.append(d)
    if bad:
        print(f"multi_gpu: wrong result on devices {bad}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"workload": "multi_gpu", "devices": count, "per_device": PER_DEVICE}))


if __name__ == "__main__":
    main()
