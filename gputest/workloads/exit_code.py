"""Run one kernel, then exit with the code given as the first argument."""
import json
import sys

import torch


def main():
    code = int(sys.argv[1])
    x = torch.ones(256, device="cuda")
    x.add_(1.0)  # MARK: exit-add
    torch.cuda.synchronize()
    if not bool((x == 2).all()):
        print("exit_code: wrong result", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"workload": "exit_code", "exit": code}))
    sys.exit(code)


if __name__ == "__main__":
    main()
