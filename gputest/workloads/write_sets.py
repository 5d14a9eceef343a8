"""Hash mode's write sets (--write-sets), for the writesets.* GPU tests.

Usage: write_sets.py MODE OUTDIR [VALUE]. Writes OUTDIR/<name>.bin with the final bytes of the
buffers the harness compares recorded hashes with, and prints a JSON line.
  proved  a Triton kernel reading src and writing dst, LAUNCHES times: its PTX proves src
          read-only, so src is carried; then a cuBLAS GEMM c = a @ b, LAUNCHES times.
  chase   a Triton kernel stores VALUE through a pointer it loads from a table (its PTX stores
          through a pointer loaded from memory: it may write anything), then the src-reading
          kernel reads the buffer it wrote.
  miss    a Triton kernel reads src and writes dst = src + 1, and on its MISS_AT-th launch only
          also adds VALUE to src: learned write sets call src read-only before that.
"""
import json
import os
import sys
import time

from triton_gpu import need_gpu, tl, torch, triton

LAUNCHES = 12
MISS_AT = 50
MISS_LAUNCHES = 80
N = 16384  # 64 KiB of f32: one chunk, quick for the harness's Python hash


@triton.jit
def scale_kernel(src, dst, n, c, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(dst + i, tl.load(src + i, mask=m) * c, mask=m)


@triton.jit
def chase_kernel(table, value, BLOCK: tl.constexpr):
    target = tl.load(table).to(tl.pointer_type(tl.float32))
    i = tl.arange(0, BLOCK)
    tl.store(target + i, tl.zeros([BLOCK], dtype=tl.float32) + value)


@triton.jit(do_not_specialize=["launch", "at"])  # one kernel for every launch number
def maybe_kernel(src, dst, n, launch, at, value, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    x = tl.load(src + i, mask=m)
    tl.store(dst + i, x + 1.0, mask=m)
    if launch == at:
        tl.store(src + i, x + value, mask=m)


def save(out, name, t):
    torch.cuda.synchronize()
    t.detach().cpu().contiguous().view(torch.uint8).numpy().tofile(os.path.join(out, name + ".bin"))


def main():
    mode, out = sys.argv[1], sys.argv[2]
    value = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    os.makedirs(out, exist_ok=True)
    need_gpu()
    grid = (triton.cdiv(N, 1024),)
    src = torch.arange(N, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(src)
    result = {"workload": "write_sets", "mode": mode, "launches": LAUNCHES, "n": N}
    if mode == "proved":
        for k in range(LAUNCHES):
            scale_kernel[grid](src, dst, N, float(k + 2), BLOCK=1024)
            if k == 0:
                torch.cuda.synchronize()
                time.sleep(0.3)  # the writer reads the kernel's PTX: later launches carry
        save(out, "src", src)
        save(out, "dst", dst)
        a = torch.randn(256, 256, device="cuda")
        b = torch.randn(256, 256, device="cuda")
        c = torch.empty(256, 256, device="cuda")
        for k in range(LAUNCHES):
            torch.mm(a, b, out=c)
            if k in (0, 4):  # the writer learns from the first launches: give it the time
                torch.cuda.synchronize()
                time.sleep(0.3)
        save(out, "a", a)
        save(out, "b", b)
        save(out, "c", c)
    elif mode == "chase":
        target = torch.ones(1024, device="cuda", dtype=torch.float32)
        table = torch.tensor([target.data_ptr()], device="cuda", dtype=torch.int64)
        for k in range(4):  # src-reading launches whose src (target) is carried
            scale_kernel[grid](target, dst, 1024, 2.0, BLOCK=1024)
            if k == 0:
                torch.cuda.synchronize()
                time.sleep(0.3)
        chase_kernel[(1,)](table, value, BLOCK=1024)
        scale_kernel[grid](target, dst, 1024, 2.0, BLOCK=1024)  # must hash target again
        save(out, "target", target)
        result["launches"] = 5
    elif mode == "miss":
        for k in range(1, MISS_LAUNCHES + 1):
            maybe_kernel[grid](src, dst, N, k, MISS_AT, value, BLOCK=1024)
            if k in (1, 5):  # the PTX, then 3 unchanged launches: the writer learns before launch 6
                torch.cuda.synchronize()
                time.sleep(0.3)
        save(out, "src", src)
        result.update(launches=MISS_LAUNCHES, miss_at=MISS_AT)
    else:
        sys.exit(f"write_sets: unknown mode {mode}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
