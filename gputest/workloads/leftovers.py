"""A deterministic program whose memory holds what it never wrote: a tensor of random bytes
(os.urandom, copied in from the host, so no kernel computes them) is freed, and the pool hands
its memory to the next tensor of its size, of which a kernel writes only the first half. What
the program computes does not depend on the other half, so two runs must agree under gpurr
diff, though the unwritten half of that allocation differs from run to run unless the recorder
clears new allocations. Prints one JSON line."""
import json
import os

import numpy as np
import torch

N = 1 << 20


def main():
    torch.cuda.set_device(0)
    for _ in range(3):
        junk = torch.from_numpy(np.frombuffer(os.urandom(4 * N), dtype=np.float32).copy()).cuda()
        del junk
        out = torch.empty(N, device="cuda")
        out[: N // 2].fill_(1.0)  # half-write: the other half keeps the pool's leftovers
        total = out[: N // 2].sum()
        del out
    torch.cuda.synchronize()
    print(json.dumps({"workload": "leftovers", "sum": float(total)}))


if __name__ == "__main__":
    main()
