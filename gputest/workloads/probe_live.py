"""Live probes (gpurr record --probe) for the probe.live GPU test: a Triton kernel whose
program SLOW runs a long loop while the others run it once, launched LAUNCHES times from each
of two Python threads on their own streams, beside a Triton kernel --probe does not pick. The
instrumented kernel must compute what the plain one does: the program checks its results and
prints a JSON line."""
import json
import sys
import threading

from triton_gpu import need_gpu, tl, torch, triton

PROGRAMS = 48
BLOCK = 256
SLOW = 5
SLOW_ITERS = 20000
LAUNCHES = 20


@triton.jit
def gpurr_probe_slow(x_ptr, out_ptr, slow, slow_iters, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    acc = tl.load(x_ptr + offs)
    iters = 1 + (pid == slow).to(tl.int32) * slow_iters
    for _ in range(iters):
        acc = acc * 0.5 + 1.0
    tl.store(out_ptr + offs, acc)


@triton.jit
def gpurr_probe_other(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1.0)


def worker(errors):
    try:
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            x = torch.full((PROGRAMS * BLOCK,), 2.0, device="cuda")
            out = torch.empty_like(x)
            other = torch.empty_like(x)
            for _ in range(LAUNCHES):
                gpurr_probe_slow[(PROGRAMS,)](x, out, SLOW, SLOW_ITERS, BLOCK=BLOCK)
                gpurr_probe_other[(PROGRAMS,)](x, other, BLOCK=BLOCK)
            stream.synchronize()
            # x = 2 is the fixed point of acc * 0.5 + 1: every element stays 2.
            if not torch.equal(out, x) or not torch.equal(other, x + 1):
                errors.append("wrong results from the probed kernel")
    except Exception as e:  # noqa: BLE001 - the test reads it
        errors.append(repr(e))


def main():
    need_gpu()
    errors = []
    threads = [threading.Thread(target=worker, args=(errors,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        print(f"probe_live: {errors}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"workload": "probe_live", "programs": PROGRAMS, "slow": SLOW, "launches": 2 * LAUNCHES}))


if __name__ == "__main__":
    main()
