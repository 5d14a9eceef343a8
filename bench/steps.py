"""Timing of training steps, shared by the step benchmarks (train_step.py, gpt2_step.py)."""
import contextlib

import torch


def time_steps(name, step, warmup, steps, within=None):
    """Runs step() warmup times, then steps times, each timed with CUDA events around it (inside
    the context manager within, e.g. a profiler); returns the ms of each and the losses step()
    returned. Exits when a loss is NaN or diverged: a broken step measures nothing."""
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    times, losses = [], []
    with within or contextlib.nullcontext():
        for _ in range(steps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            losses.append(step().detach())
            end.record()
            times.append((start, end))
        torch.cuda.synchronize()
    losses = [float(l) for l in losses]
    if not all(l == l and l < 20 for l in losses):
        raise SystemExit(f"{name}: bad losses {losses[:3]}...")
    return [s.elapsed_time(e) for s, e in times], losses
