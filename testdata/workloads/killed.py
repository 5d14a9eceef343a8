"""Fixture workload for testdata/recordings/killed: launches a known number
of kernels, says READY, then waits to be killed with SIGKILL."""
import sys
import time

import torch

x = torch.zeros(256, device="cuda")
for _ in range(500):
    x.add_(1)  # FIXTURE: killed-loop
torch.cuda.synchronize()
print("READY", flush=True)
time.sleep(600)
sys.exit(1)  # not reached: the regeneration script kills it
