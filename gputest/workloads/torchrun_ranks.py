"""Run under torchrun with 2 processes: each rank launches LAUNCHES kernels on its GPU
(LOCAL_RANK modulo the device count, so one GPU serves both) at a marked line.

gpurr must write one recording per rank, tagged with RANK, LOCAL_RANK and WORLD_SIZE."""
import json
import os
import sys

import torch

LAUNCHES = 100


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
    x = torch.zeros(1024, device="cuda")
    for _ in range(LAUNCHES):
        x.add_(1)  # MARK: rank-add
    if float(x[0]) != LAUNCHES:
        print(f"torchrun_ranks: rank {rank}: x = {float(x[0])}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"workload": "torchrun_ranks", "world_size": world, "launches_per_rank": LAUNCHES}))


if __name__ == "__main__":
    main()
