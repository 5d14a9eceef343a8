"""A program that profiles itself with torch.profiler, as a training loop with a profiler
schedule does: steps before, inside and after the profiled window. Prints on its last line what
its own profiler saw: the kernels of the profiled steps (each step launches ADDS elementwise
kernels at the marked line and one matmul) and their count, which a run under gpurr record must
match."""
import json

import torch

ADDS, STEPS = 20, 9  # steps 3-5 are profiled: wait 1, warmup 2, active 3 (of the schedule below)


def step(x, w):
    for _ in range(ADDS):
        x.add_(0.5)  # MARK: prof-add
    return (x @ w).tanh()


def main():
    torch.manual_seed(0)
    x = torch.zeros(256, 256, device="cuda")
    w = torch.randn(256, 256, device="cuda") / 16
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    seen = []
    sched = torch.profiler.schedule(wait=1, warmup=2, active=3, repeat=1)

    def ready(prof):
        seen.extend(e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)

    with torch.profiler.profile(activities=acts, schedule=sched, on_trace_ready=ready) as prof:
        for _ in range(STEPS):
            x = step(x, w)
            torch.cuda.synchronize()
            prof.step()
    adds = sum(1 for e in seen if "add" in e.name.lower() or "Add" in e.name)
    print(json.dumps({"workload": "profiler_inside", "cuda_events": len(seen) > 0,
                      "add_kernels": adds, "adds_per_step": ADDS, "profiled_steps": 3,
                      "checksum": round(float(x.double().sum()), 3)}))


if __name__ == "__main__":
    main()
