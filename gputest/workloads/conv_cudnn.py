"""A cuDNN convolution (forward and backward) at marked lines."""
import json
import sys

import torch


def main():
    torch.backends.cudnn.enabled = True
    x = torch.randn(8, 16, 32, 32, device="cuda", dtype=torch.float16, requires_grad=True)
    w = torch.randn(32, 16, 3, 3, device="cuda", dtype=torch.float16, requires_grad=True)
    y = torch.nn.functional.conv2d(x, w, padding=1)  # MARK: conv-forward
    y.sum().backward()
    ref = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
    err = float((y.double() - ref).norm() / ref.norm())
    if not err < 1e-2:
        print(f"conv_cudnn: relative error {err}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"workload": "conv_cudnn", "cudnn": torch.backends.cudnn.version()}))


if __name__ == "__main__":
    main()
