"""What the Triton workloads share: torch and Triton imported, or exit 3 (the harness's "cannot
run here") saying which is missing; need_gpu() exits 3 when torch sees no GPU."""
import sys

try:
    import torch
    import triton
    import triton.language as tl
except ImportError as e:
    print(f"torch or triton not installed: {e}", file=sys.stderr)
    sys.exit(3)

__all__ = ["torch", "triton", "tl", "need_gpu"]


def need_gpu():
    if not torch.cuda.is_available():
        print("torch sees no GPU", file=sys.stderr)
        sys.exit(3)
