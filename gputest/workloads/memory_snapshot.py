"""Memory capture in snapshot mode. MODE is one of:

  exact   a 64 MiB buffer filled once, then POKES launches that each change one 64 KiB chunk;
          the program copies the whole buffer after every launch into OUTDIR/after<i>.bin
          (OUTDIR/before0.bin is the buffer before the first poke), for the harness to compare
          with `gpurr rewind`.
  drop    many launches that rewrite a 1 MiB buffer, to overflow a small staging ring.
  flight  POKES launches, then SIGUSR2 to itself (flight-recorder dump), then more launches.
  fault   POKES launches, then a kernel that writes to an illegal address.
  ring    fills of a 1 MiB and a 3.5 MiB buffer, alternating: with a 4 MiB staging ring, the big
          one only fits once the ring, left part-way by the small one, starts over.
  segv    POKES launches, then a segmentation fault in the host process.
  abort   POKES launches, then abort().

Usage: memory_snapshot.py MODE OUTDIR"""
import ctypes
import json
import os
import signal
import sys
import time

import cupy as cp
import numpy as np

SRC = r"""
extern "C" __global__ void gpurr_snap_fill(unsigned int* x, unsigned long long n, unsigned int seed) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        x[i] = (unsigned int)(i * 2654435761ull) ^ seed;
}
extern "C" __global__ void gpurr_snap_poke(unsigned int* x, unsigned long long first, unsigned int value) {
    x[first + blockIdx.x * blockDim.x + threadIdx.x] += value;  // 16384 words: one 64 KiB chunk
}
extern "C" __global__ void gpurr_snap_bad(unsigned int* bad, unsigned int* x) {
    bad[threadIdx.x] = x[threadIdx.x];
}
"""
CHUNK_WORDS = 65536 // 4
POKES = 8


def read(ptr, n):
    host = np.empty(n, dtype=np.uint8)
    cp.cuda.runtime.memcpy(host.ctypes.data, ptr, n, cp.cuda.runtime.memcpyDeviceToHost)
    return host


def main():
    mode, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    mod = cp.RawModule(code=SRC)
    fill, poke, bad = (mod.get_function(f"gpurr_snap_{k}") for k in ("fill", "poke", "bad"))
    n = (64 << 20) if mode == "exact" else (1 << 20)
    ptr = cp.cuda.runtime.malloc(n)
    words = n // 4
    fill((256,), (256,), (np.uint64(ptr), np.uint64(words), np.uint32(7)))
    cp.cuda.runtime.deviceSynchronize()
    result = {"workload": "memory_snapshot", "mode": mode, "size": n}

    def pokes(count, start=0):
        for i in range(start, start + count):
            chunk = (i * 7) % (n // 65536)
            poke((CHUNK_WORDS // 256,), (256,), (np.uint64(ptr), np.uint64(chunk * CHUNK_WORDS), np.uint32(i + 1)))
            if mode == "exact":
                cp.cuda.runtime.deviceSynchronize()
                read(ptr, n).tofile(os.path.join(out, f"after{i}.bin"))

    if mode == "exact":
        read(ptr, n).tofile(os.path.join(out, "before0.bin"))
        pokes(POKES)
        result["pokes"] = POKES
    elif mode == "drop":
        for i in range(2000):
            fill((256,), (256,), (np.uint64(ptr), np.uint64(words), np.uint32(i)))
        result["fills"] = 2001
    elif mode == "flight":
        pokes(POKES)
        cp.cuda.runtime.deviceSynchronize()
        os.kill(os.getpid(), signal.SIGUSR2)  # gpurr's flight recorder dumps; bare, ignored below
        time.sleep(1.0)
        pokes(4, POKES)
        result["pokes"] = POKES + 4
    elif mode == "fault":
        pokes(POKES)
        bad((1,), (32,), (np.uint64(16), np.uint64(ptr)))
        try:
            cp.cuda.runtime.deviceSynchronize()
            result["fault"] = "none"
        except cp.cuda.runtime.CUDARuntimeError as e:
            result["fault"] = str(e).split(":")[0]
        print(json.dumps(result), flush=True)
        os._exit(0)  # the context is dead: skip CuPy's teardown, which would only fail
    elif mode == "ring":
        big_n = 7 << 19
        big = cp.cuda.runtime.malloc(big_n)
        for i in range(4):
            fill((256,), (256,), (np.uint64(ptr), np.uint64(words), np.uint32(i)))
            fill((256,), (256,), (np.uint64(big), np.uint64(big_n // 4), np.uint32(i)))
        cp.cuda.runtime.deviceSynchronize()
        read(big, big_n).tofile(os.path.join(out, "big.bin"))
        result["fills"] = 9
    elif mode in ("segv", "abort"):
        pokes(POKES)
        cp.cuda.runtime.deviceSynchronize()
        result["pokes"] = POKES
        print(json.dumps(result), flush=True)
        if mode == "segv":
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        os.abort()
    cp.cuda.runtime.deviceSynchronize()
    print(json.dumps(result))


if __name__ == "__main__":
    if "GPURR_OUT" not in os.environ:  # bare: no flight recorder to catch SIGUSR2
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    main()
