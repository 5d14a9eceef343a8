"""Fork after CUDA is initialised: two children (one leaves with os._exit, one with a normal
interpreter exit that runs atexit handlers) do pure-Python work; a DataLoader with 2 forked
workers feeds the GPU; the parent keeps launching and checks its own results."""
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

AFTER_FORK = 200
CHILD_TIMEOUT_S = 60


class Squares(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        return torch.full((16,), float(i * i))  # CPU only: workers must not touch CUDA


def fork_child(normal_exit):
    pid = os.fork()
    if pid == 0:
        total = sum(i * i for i in range(200_000))
        code = 0 if total == 2666646666700000 else 1
        if normal_exit:
            sys.exit(code)  # runs Python finalisation and C atexit handlers in the child
        os._exit(code)
    return pid


def wait_child(pid):
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return f"hung for {CHILD_TIMEOUT_S} s"


def main():
    x = torch.zeros(1024, device="cuda")
    x.add_(1.0)
    torch.cuda.synchronize()

    problems = []
    for normal_exit in (False, True):
        pid = fork_child(normal_exit)
        for _ in range(AFTER_FORK // 2):  # the parent launches while the child runs
            x.add_(1.0)  # MARK: after-fork
        code = wait_child(pid)
        if code != 0:
            problems.append(f"child (normal_exit={normal_exit}) ended with {code}")

    loader = DataLoader(Squares(), batch_size=8, num_workers=2, multiprocessing_context="fork")
    total = torch.zeros((), device="cuda")
    for batch in loader:
        total += batch.cuda().sum()
    torch.cuda.synchronize()

    want_total = 16.0 * sum(i * i for i in range(64))
    if float(total) != want_total:
        problems.append(f"DataLoader sum {float(total)} != {want_total}")
    if not bool((x == 1 + AFTER_FORK).all()):
        problems.append(f"parent tensor {x[:3].tolist()} != {1 + AFTER_FORK}")
    if problems:
        print("fork_after_init: " + "; ".join(problems), file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"workload": "fork_after_init", "after_fork_calls": AFTER_FORK,
                      "children": 2, "loader_workers": 2}))


if __name__ == "__main__":
    main()
