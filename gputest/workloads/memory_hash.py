"""Memory capture in hash mode: exact-size cudaMalloc buffers (odd lengths, tails) filled
by a kernel, and one buffer written by two streams where the second stream's write comes
later in time (it spins first).

Usage: memory_hash.py OUTDIR. Writes OUTDIR/<name>.bin with the bytes each checked launch
left in its buffer (copied by the program itself after a synchronize), so the harness can
compare gpurr's recorded after-launch hash with the hash of those bytes."""
import json
import os
import sys

import cupy as cp
import numpy as np

SRC = r"""
extern "C" __global__ void gpurr_mem_fill(unsigned char* x, unsigned long long n, unsigned int seed,
                                          long long spin) {
    long long t0 = clock64();
    while (clock64() - t0 < spin) {}
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        x[i] = (unsigned char)((i * 2654435761ull + seed) >> 13);
}
"""
SIZES = {"odd": 1000003, "page": 4096, "tail": 3 * 65536 + 5, "tiny": 17, "big": 8 << 20}


def pattern(n, seed):
    i = np.arange(n, dtype=np.uint64)
    return (((i * np.uint64(2654435761) + np.uint64(seed)) >> np.uint64(13)) & np.uint64(0xFF)).astype(np.uint8)


def read(ptr, n):
    host = np.empty(n, dtype=np.uint8)
    cp.cuda.runtime.memcpy(host.ctypes.data, ptr, n, cp.cuda.runtime.memcpyDeviceToHost)
    return host


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    fill = cp.RawKernel(SRC, "gpurr_mem_fill")
    checks = []
    for k, (name, n) in enumerate(SIZES.items()):
        ptr = cp.cuda.runtime.malloc(n)
        fill((64,), (256,), (np.uint64(ptr), np.uint64(n), np.uint32(k + 1), np.int64(0)))
        cp.cuda.runtime.deviceSynchronize()
        data = read(ptr, n)
        if not np.array_equal(data, pattern(n, k + 1)):
            sys.exit(f"memory_hash: buffer {name} holds the wrong bytes")
        data.tofile(os.path.join(out, name + ".bin"))
        checks.append({"name": name, "size": n})

    # Two streams write one buffer: s2 spins ~50 ms first, so s1's write and its hash
    # finish long before s2's write lands. A hash taken in stream order after s1's
    # launch sees s1's bytes; anything else (legacy stream, host sync) would not.
    n = 4 << 20
    ptr = cp.cuda.runtime.malloc(n)
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    spin = 50 * 1000 * 1000 * 2  # ~50 ms at ~2 GHz
    with s2:
        fill((64,), (256,), (np.uint64(ptr), np.uint64(n), np.uint32(200), np.int64(spin)))
    with s1:
        fill((64,), (256,), (np.uint64(ptr), np.uint64(n), np.uint32(100), np.int64(0)))
    s1.synchronize()
    s2.synchronize()
    final = read(ptr, n)
    if not np.array_equal(final, pattern(n, 200)):
        sys.exit("memory_hash: the spinning stream's write did not land last; the race test is void")
    pattern(n, 100).tofile(os.path.join(out, "stream1.bin"))
    pattern(n, 200).tofile(os.path.join(out, "stream2.bin"))
    checks.append({"name": "stream2", "size": n})  # launched first
    checks.append({"name": "stream1", "size": n})
    # Launch order: the sizes in order, then stream 2's launch, then stream 1's.
    print(json.dumps({"workload": "memory_hash", "checks": checks}))


if __name__ == "__main__":
    main()
