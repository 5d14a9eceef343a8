"""Copies into device memory that a later kernel reads, for copy states (format 1.17). MODE is:

  rewind  a kernel fills a tensor x, a copy from the host overwrites it, then a kernel reads it
          (x * 2): the bytes before that kernel are the copy's, not the fill's.
  log     under PyTorch's cudaMallocAsync allocator (each tensor its own allocation, which
          gpurr clears as it is made), a copy from the host puts negative numbers into a tensor
          z, then torch.log(z) makes NaN: its inputs, the copy's and a fresh allocation's, were
          finite.

Each call is on a line marked for the test. Prints on its last line what it did.

Usage: copy_states.py MODE"""
import json
import os
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "rewind"
if MODE == "log":
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"  # before torch reads it

import torch  # noqa: E402

N = 1 << 14  # float32 elements: 64 KiB


def main():
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        sys.exit(3)
    result = {"workload": "copy_states", "mode": MODE, "n": N}
    if MODE == "rewind":
        x = torch.empty(N, device="cuda")
        x.fill_(1.0)  # MARK: fill
        src = torch.arange(N, dtype=torch.float32)
        x.copy_(src)  # MARK: copy
        y = x * 2  # MARK: read
        torch.cuda.synchronize()
        result.update(x_addr=x.data_ptr(), y_sum=float(y.sum()), varies=["x_addr"])
    elif MODE == "log":
        z = torch.empty(N, device="cuda")
        neg = torch.full((N,), -1.0)
        z.copy_(neg)  # MARK: copy_neg
        w = torch.log(z)  # MARK: log
        nans = int(torch.isnan(w).sum())
        torch.cuda.synchronize()
        result.update(nans=nans, allocator=torch.cuda.get_allocator_backend())
    else:
        print(f"copy_states.py: unknown mode {MODE!r}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
