"""Run under torchrun with 2 processes on 2 GPUs: a small data-parallel model (gradients
all-reduced over NCCL, as DDP does) trains a few steps, and
rank 1 alone adds noise drawn from the OS (different in every run) to its activations at a
marked line, a planted nondeterministic op. Two recordings of this job part ways first on
rank 1, at that line; rank 0 follows once the gradients are all-reduced.

Exits 3 (cannot run here) with fewer than 2 GPUs."""
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

STEPS = 4


def main():
    if torch.cuda.device_count() < 2:
        print("ddp_diverge: needs 2 GPUs", file=sys.stderr)
        sys.exit(3)
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 16)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
    x = torch.randn(64, 256, device="cuda", generator=torch.Generator(device="cuda").manual_seed(rank))
    for step in range(STEPS):
        h = model[0](x)
        if rank == 1 and step == 1:
            h = h + 1e-3 * torch.randn(h.shape, device="cuda", generator=gen)  # MARK: planted-noise
        loss = model[2](model[1](h)).square().mean()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    dist.destroy_process_group()
    print(json.dumps({"workload": "ddp_diverge", "world_size": int(os.environ["WORLD_SIZE"]), "steps": STEPS}))


if __name__ == "__main__":
    main()
