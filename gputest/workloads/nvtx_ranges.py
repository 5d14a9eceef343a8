"""NVTX ranges from PyTorch on two threads, for gpurr record's range recording: each worker
thread nests "worker T" / "step S" / "forward" and "backward" push/pop ranges
(torch.cuda.nvtx.range) around a known number of launches, on a stream of its own; the main
thread starts a start/end range (torch.cuda.nvtx.range_start) that worker 0 ends, launches
outside every range, and runs one forward/backward under emit_nvtx (ranges named after the ops).
Prints on its last line what it did, with each worker's Linux thread id."""
import json
import sys
import threading

import torch

from worker_threads import run_workers

THREADS = 2
STEPS = 3
FORWARD = 4   # launches in each "forward" range: x.add_ is one kernel
BACKWARD = 2  # launches in each "backward" range: x.mul_ is one kernel
N = 4096


def main():
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        sys.exit(3)
    warm = torch.zeros(N, device="cuda")
    warm.add_(1.0)
    warm.mul_(1.0)  # load both kernels before any range
    torch.cuda.synchronize()
    load = torch.cuda.nvtx.range_start("load")
    tids = [0] * THREADS
    sums = [0.0] * THREADS
    errors = []
    barrier = threading.Barrier(THREADS)

    def worker(t):
        try:
            tids[t] = threading.get_native_id()
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                x = torch.zeros(N, device="cuda")
                barrier.wait(timeout=120)  # both threads' ranges overlap in time
                with torch.cuda.nvtx.range(f"worker {t}"):
                    for s in range(STEPS):
                        with torch.cuda.nvtx.range(f"step {s}"):
                            with torch.cuda.nvtx.range("forward"):
                                for _ in range(FORWARD):
                                    x.add_(1.0)
                            with torch.cuda.nvtx.range("backward"):
                                for _ in range(BACKWARD):
                                    x.mul_(1.0)
                stream.synchronize()
            if t == 0:
                torch.cuda.nvtx.range_end(load)  # ended on another thread than it started
            sums[t] = float(x.sum().item())
        except Exception as e:  # report every thread's failure, never hang the other
            errors.append(f"worker {t}: {type(e).__name__}: {e}")
            barrier.abort()

    run_workers("nvtx_ranges", THREADS, worker, errors)
    outside = torch.ones(N, device="cuda") * 2  # MARK: outside-ranges
    # Op-level ranges from autograd's profiler, as Nsight users get them.
    w = torch.randn(64, 64, device="cuda", requires_grad=True)
    with torch.autograd.profiler.emit_nvtx():
        (w @ w).sum().backward()
    torch.cuda.synchronize()
    print(json.dumps({"workload": "nvtx_ranges", "threads": THREADS, "steps": STEPS, "forward": FORWARD,
                      "backward": BACKWARD, "tids": tids, "varies": ["tids"], "sums": sums, "outside": float(outside.sum())}))


if __name__ == "__main__":
    main()
