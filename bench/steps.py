"""Timing of training steps, shared by the step benchmarks (train_step.py, gpt2_step.py)."""
import contextlib
import time

import torch


def checksum_state(model, opt):
    """The plain PyTorch check of what a step digest hashes: one norm per parameter and optimizer
    state tensor (torch._foreach_norm: a few fused kernels), kept on the GPU (no sync), as a
    training loop that logs a checksum of its state would."""
    ts = [p.detach() for p in model.parameters()]
    ts += [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v) and v.is_cuda and v.numel() > 1]
    return torch.stack(torch._foreach_norm([t.float() if t.dtype != torch.float32 else t for t in ts]))


def time_steps(name, step, warmup, steps, within=None, check=None, check_every=0):
    """Runs step() warmup times, then steps times, each timed with CUDA events around it (inside
    the context manager within, e.g. a profiler); returns the ms of each and the losses step()
    returned, and the launching thread's CPU time per timed step in ms (near the step time, the step
    is bound by the host, not the GPU). With check and check_every N, check() runs at the start of every Nth step (steps
    N-1, 2N-1, ... counted from the first warmup step, as gpurr's --digest-every numbers the
    steps whose digest the next step begins with), inside its timing. Exits when a loss is NaN
    or diverged: a broken step measures nothing."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times, losses, checks = [], [], []
    cpu0 = time.thread_time()
    with within or contextlib.nullcontext():
        for j in range(steps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            if check and check_every and (warmup + j) % check_every == 0:
                checks.append(check())
            losses.append(step().detach())
            end.record()
            times.append((start, end))
        cpu_ms = (time.thread_time() - cpu0) * 1e3 / max(steps, 1)
        torch.cuda.synchronize()
    losses = [float(l) for l in losses]
    if checks and not all(bool(torch.isfinite(c).all()) for c in checks):
        raise SystemExit(f"{name}: a state checksum is not finite")
    if not all(l == l and l < 20 for l in losses):
        raise SystemExit(f"{name}: bad losses {losses[:3]}...")
    return [s.elapsed_time(e) for s, e in times], losses, cpu_ms
