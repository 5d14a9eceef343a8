"""A Triton split reduction with an inter-CTA race through global memory, for the
race.triton_cta GPU test: programs 1..PARTS-1 each store the sum of their block into
partials[pid], and program 0 adds its own block's sum to the partials the others wrote, without
waiting for them. Before it reads, program 0 spends ~20 µs on dependent arithmetic the read's
address depends on, so run as it is every other program has long stored its partial (the race
stays hidden); a delay of a whole CTA before its store (gpurr race --placement cta) makes
program 0 read the zero the partial was cleared to. The program launches it once, checks the
sum, and prints a JSON line."""
import json
import sys

from triton_gpu import need_gpu, tl, torch, triton

PARTS = 16
BLOCK = 1024
ITERS = 8192


@triton.jit
def gpurr_split_sum(x_ptr, partial_ptr, out_ptr, PARTS: tl.constexpr, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0)
    part = tl.sum(tl.load(x_ptr + pid * BLOCK + tl.arange(0, BLOCK)), axis=0)
    if pid > 0:
        tl.store(partial_ptr + pid, part)  # MARK: partial-store
    else:
        busy = part
        for _ in range(ITERS):
            busy = busy * 0.999 + 0.001
        hidden = (busy > 1e30).to(tl.int32)  # never true, but the read must wait for it
        idx = tl.arange(0, PARTS)
        others = tl.load(partial_ptr + idx + hidden, mask=idx > 0, other=0.0, volatile=True)
        tl.store(out_ptr, part + tl.sum(others, axis=0))


def main():
    need_gpu()
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = torch.rand(PARTS * BLOCK, device="cuda", generator=gen)
    partials = torch.zeros(PARTS, device="cuda")
    out = torch.zeros(1, device="cuda")
    gpurr_split_sum[(PARTS,)](x, partials, out, PARTS=PARTS, BLOCK=BLOCK, ITERS=ITERS)
    torch.cuda.synchronize()
    want = x.double().sum().item()
    if abs(out.item() - want) > 1e-3 * want:
        print(f"triton_race: sum {out.item()} != {want}: the race showed without any delay", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"workload": "triton_race", "kernel": "gpurr_split_sum", "parts": PARTS}))


if __name__ == "__main__":
    main()
