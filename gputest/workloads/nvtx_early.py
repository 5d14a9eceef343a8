"""NVTX before CUDA: the program pushes a range before its first CUDA call, so NVTX loads its
tool (gpurr's agent) before the CUDA driver does, and creates a domain then; after CUDA is up,
it launches inside ranges of the default domain and of that domain. Prints on its last line
what it did."""
import json
import sys

import torch


def main():
    torch.cuda.nvtx.range_push("before cuda")  # NVTX loads the agent here; CUDA has not started it
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        sys.exit(3)
    x = torch.zeros(1024, device="cuda")  # CUDA starts the agent
    torch.cuda.synchronize()
    with torch.cuda.nvtx.range("after cuda"):
        for _ in range(3):
            x.add_(1.0)
    torch.cuda.nvtx.range_pop()  # "before cuda": pushed before the agent recorded anything
    torch.cuda.synchronize()
    print(json.dumps({"workload": "nvtx_early", "launches_in_range": 3, "sum": float(x.sum())}))


if __name__ == "__main__":
    main()
