"""Launch-heavy training step: GPT-2 small (124M parameters, random init) on batch 8 x 512,
bf16 autocast, AdamW (PyTorch's default foreach implementation). About 1,200 kernel launches a
step, over half of them from the autograd engine's C++ thread, which runs no Python; the step is
bound by the host, so every microsecond a recorder adds per launch shows.

  --model hf      transformers' GPT2LMHeadModel (the default where transformers is installed)
  --model plain   the same shape written in plain PyTorch (no transformers needed)
  --compile       torch.compile the model (Triton kernels, compiled backward, deep Python stacks)
  --profiler      time the steps inside torch.profiler (CPU + CUDA activities), the peer

Times each step with CUDA events and reports the median over STEPS steps after WARMUP steps
(bench/run.py checks that a recorded run holds the launches). Prints one JSON line."""
import argparse
import json
import math
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F
from steps import checksum_state, time_steps


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.c_fc, self.mlp_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.1)
        x = x + self.drop(self.c_proj(a.transpose(1, 2).reshape(b, t, d)))
        return x + self.drop(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))


class PlainGPT2(nn.Module):
    """GPT-2 small's shape: 12 layers, 12 heads, d=768, vocab 50257, tied embeddings."""

    def __init__(self, vocab=50257, d=768, layers=12, heads=12, seq=1024):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * layers))

    def forward(self, input_ids, labels):
        x = self.drop(self.wte(input_ids) + self.wpe(torch.arange(input_ids.shape[1], device=input_ids.device)))
        for blk in self.h:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels[:, 1:].flatten())


def build(kind):
    if kind == "auto":
        try:
            import transformers  # noqa: F401
            kind = "hf"
        except ImportError:
            kind = "plain"
    if kind == "plain":
        return kind, PlainGPT2()
    from transformers import GPT2Config, GPT2LMHeadModel
    hf = GPT2LMHeadModel(GPT2Config())  # GPT-2 small, random weights

    class Wrapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = hf

        def forward(self, input_ids, labels):
            return self.m(input_ids=input_ids, labels=labels).loss

    return kind, Wrapped()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["auto", "hf", "plain"], default="auto")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--profiler", action="store_true")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--checksum-every", type=int, default=0,
                    help="the peer of step digests: a plain PyTorch checksum of the state (steps.checksum_state) "
                         "at the start of every Nth step")
    a = ap.parse_args()

    torch.manual_seed(0)
    kind, model = build(a.model)
    model = model.cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    run = torch.compile(model) if a.compile else model
    data = torch.randint(0, 50257, (a.batch, a.seq), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = run(data, data)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    prof = None
    if a.profiler:
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        prof = torch.profiler.profile(activities=acts)
    ms, losses, cpu_ms = time_steps("gpt2_step", step, a.warmup, a.steps, within=prof,
                                    check=lambda: checksum_state(model, opt), check_every=a.checksum_every)
    print(json.dumps({"bench": "gpt2_step", "model": kind, "compiled": a.compile, "profiler": a.profiler,
                      "ms_per_step": round(statistics.median(ms), 3), "host_cpu_ms_per_step": round(cpu_ms, 3),
                      "steps_ms": [round(m, 3) for m in ms],
                      "steps": a.steps, "warmup": a.warmup, "params": sum(p.numel() for p in model.parameters()),
                      "first_loss": round(losses[0], 4), "last_loss": round(losses[-1], 4)}))


if __name__ == "__main__":
    main()
