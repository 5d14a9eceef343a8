"""Copies and waits: a batch copied to the GPU from pinned memory, labels copied asynchronously
from pageable memory on a side stream (the driver stages them: the host waits anyway), a
memset through the driver, the loss copied back with .cpu(), a stream synchronize and an event
waited for by the host and by a stream. Each call is on a line marked for the test. Prints on
its last line what it did."""
import ctypes
import json
import sys

import torch

N = 1 << 20  # float32 elements: 4 MiB
LABELS = 1 << 18  # 1 MiB
MEMSET_BYTES, MEMSET_VALUE = 1 << 16, 7
SLEEP_CYCLES = 20_000_000  # a spin kernel, so that each wait below waits


def main():
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        sys.exit(3)
    libcuda = ctypes.CDLL("libcuda.so.1")
    libcuda.cuMemsetD8Async.argtypes = [ctypes.c_uint64, ctypes.c_ubyte, ctypes.c_size_t, ctypes.c_void_p]
    side = torch.cuda.Stream()
    pinned = torch.ones(N, pin_memory=True)
    pageable = torch.full((LABELS,), 2.0)
    x = pinned.to("cuda")  # MARK: h2d
    total = x.sum()  # MARK: sum
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP_CYCLES)  # MARK: sleep
        labels = pageable.to("cuda", non_blocking=True)  # MARK: h2d_pageable
    buf = torch.empty(MEMSET_BYTES, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    r = libcuda.cuMemsetD8Async(buf.data_ptr(), MEMSET_VALUE, MEMSET_BYTES, stream)  # MARK: memset
    side.synchronize()  # MARK: stream_sync
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLEEP_CYCLES)
        done = torch.cuda.Event()
        done.record(side)
    torch.cuda.current_stream().wait_event(done)  # MARK: wait_event
    done.synchronize()  # MARK: event_sync
    loss = total.cpu()  # MARK: d2h
    torch.cuda.synchronize()
    print(json.dumps({"workload": "copies", "h2d_bytes": N * 4, "pageable_bytes": LABELS * 4,
                      "memset_bytes": MEMSET_BYTES, "memset_value": MEMSET_VALUE, "memset_result": r,
                      "memset_sum": int(buf.sum()), "labels_sum": float(labels.sum()), "d2h_bytes": 4,
                      "loss": float(loss)}))


if __name__ == "__main__":
    main()
