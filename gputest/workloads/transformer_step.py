"""One training step of a small transformer block with random weights: layer norm, cuBLAS
GEMMs, softmax attention, a Triton GELU kernel, reductions, an SGD update, and one planted
nondeterministic kernel (a float scatter-add with many colliding indices, a histogram of the
activations). gpurr replay must replay every deterministic launch bit-exactly.

Usage: transformer_step.py"""
import json
import sys

import torch
import torch.nn.functional as F

try:
    import triton
    import triton.language as tl
except ImportError:
    print("SKIP: triton is not installed")
    sys.exit(3)


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * tl.sigmoid(1.702 * x), mask=mask)


class TritonGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        gelu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)  # MARK: triton
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(1.702 * x)
        return g * (s + 1.702 * x * s * (1 - s))


def main():
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        sys.exit(3)
    torch.manual_seed(0)
    batch, seq, d, heads = 4, 64, 256, 4
    dev = "cuda"
    p = {name: (torch.randn(*shape, device=dev) * 0.05).requires_grad_()
         for name, shape in {"qkv": (3 * d, d), "proj": (d, d), "up": (4 * d, d), "down": (d, 4 * d)}.items()}
    ln_w = torch.ones(d, device=dev, requires_grad=True)
    x = torch.randn(batch, seq, d, device=dev)
    target = torch.randn(batch, seq, d, device=dev)
    hist = torch.zeros(64, device=dev)

    h = F.layer_norm(x, (d,), ln_w)
    q, k, v = (h @ p["qkv"].t()).split(d, dim=-1)  # MARK: gemm
    q, k, v = (t.reshape(batch, seq, heads, d // heads).transpose(1, 2) for t in (q, k, v))
    att = torch.softmax(q @ k.transpose(-1, -2) / (d // heads) ** 0.5, dim=-1)  # MARK: softmax
    a = (att @ v).transpose(1, 2).reshape(batch, seq, d) @ p["proj"].t()
    h = x + a
    m = TritonGelu.apply(h @ p["up"].t()) @ p["down"].t()
    out = h + m
    loss = ((out - target) ** 2).mean()  # MARK: loss
    loss.backward()
    with torch.no_grad():
        for t in [*p.values(), ln_w]:
            t.add_(t.grad, alpha=-1e-2)
        idx = (out.detach().flatten().abs() * 1000).long() % 64
        hist.scatter_add_(0, idx, out.detach().flatten())  # MARK: scatter
    torch.cuda.synchronize()
    print(json.dumps({"workload": "transformer_step", "loss": round(float(loss), 4)}))


if __name__ == "__main__":
    main()
