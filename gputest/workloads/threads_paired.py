"""8 Python threads, created in order, each with a CUDA stream of its own: each copies in data of
its own from the host and launches a few kernels on its stream (a fill, a multiply, an add, a
sum). The program is deterministic, but the order in which the threads reach their first launch
is not: each sleeps a random while (os.urandom) before it creates its stream, so the threads
launch, and get their stream handles, in another order in each run. Two recordings of it must
agree under gpurr diff, which pairs streams by the thread they belong to (threads by the order
they were created), not by the order they were first launched on.

Usage: threads_paired.py"""
import json
import os
import sys
import threading
import time

import torch

from worker_threads import run_workers

THREADS = 8
N = 1 << 14


def main():
    torch.ones(1, device="cuda")  # the context, made on the main thread before any worker starts
    torch.cuda.synchronize()
    delays = [b / 255 * 0.05 for b in os.urandom(THREADS)]  # up to 50 ms each: a new order every run
    sums = [None] * THREADS
    firsts = []  # the order the threads reached their launches, for the record
    lock = threading.Lock()
    errors = []

    def worker(t):
        try:
            time.sleep(delays[t])
            with lock:
                firsts.append(t)
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                host = torch.arange(N, dtype=torch.int64) * (t + 1)  # this thread's data, on the host
                x = host.to("cuda")  # copied in on this thread's stream
                y = torch.full((N,), t, dtype=torch.int64, device="cuda")
                z = x * 2 + y
                sums[t] = int(z.sum())  # waits for this stream's work only
        except Exception as e:  # report every thread's failure, never hang the others
            errors.append(f"thread {t}: {type(e).__name__}: {e}")

    run_workers("threads_paired", THREADS, worker, errors)
    want = [sum(2 * i * (t + 1) + t for i in range(N)) for t in range(THREADS)]
    if sums != want:
        raise SystemExit(f"threads_paired: sums {sums}, want {want}")
    # The launch order goes to stderr: it differs run to run, and the JSON line must not.
    print(f"threads_paired: threads launched in the order {firsts}", file=sys.stderr)
    print(json.dumps({"workload": "threads_paired", "threads": THREADS, "n": N, "sums": sums}))


if __name__ == "__main__":
    main()
