"""Run under torchrun with one process: a small deterministic DistributedDataParallel training
loop on one GPU. NCCL still makes its communicator, its own buffers and its kernels' memory,
which differ from run to run; the program's memory does not. Prints one JSON line."""
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 16)).cuda(), device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 256, device="cuda")
    for _ in range(6):
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    dist.destroy_process_group()
    print(json.dumps({"workload": "ddp_one", "loss": float(loss)}))


if __name__ == "__main__":
    main()
