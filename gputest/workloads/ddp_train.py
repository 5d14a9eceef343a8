"""Run under torchrun, one process per GPU: a small deterministic DistributedDataParallel
training loop (gradients all-reduced over NCCL), for step digests and gpurr bisect on
several ranks. Two runs make the same bytes in every rank's memory that is the program's
(NCCL's own buffers differ run to run), unless something is planted:

  --plant scatter  rank 1 alone adds a float index_add_ with heavily colliding indices (float
                   atomics) into its activations from step 0 on; rank 0 receives its
                   gradients through the all-reduce
  --plant nan      rank 0's loss at step 3 is the log of a negative number: NaN

Exits 3 (cannot run here) with fewer than 2 GPUs. Prints one JSON line per rank."""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plant", choices=["none", "scatter", "nan"], default="none")
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    if torch.cuda.device_count() < 2:
        print("ddp_train: needs 2 GPUs", file=sys.stderr)
        sys.exit(3)
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    torch.manual_seed(0)
    d, bins = 256, 32
    net = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 1)).cuda()
    model = DDP(net, device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator(device="cuda").manual_seed(rank)
    x = torch.randn(2048, d, device="cuda", generator=g)
    y = torch.randn(2048, 1, device="cuda", generator=g)
    idx = torch.randint(0, bins, (2048,), device="cuda", generator=g)
    for step in range(a.steps):
        inp = x
        if a.plant == "scatter" and rank == 1:
            acc = torch.zeros(bins, d, device="cuda").index_add_(0, idx, x)  # MARK: planted-scatter
            inp = x + torch.tanh(acc)[idx]
        loss = (model(inp) - y).square().mean()
        if a.plant == "nan" and rank == 0 and step == 3:
            loss = torch.log(loss - 1e9)  # MARK: planted-nan
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    dist.destroy_process_group()
    print(json.dumps({"workload": "ddp_train", "rank": rank, "plant": a.plant, "loss": float(loss)}))


if __name__ == "__main__":
    main()
