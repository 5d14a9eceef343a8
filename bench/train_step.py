"""GPU-bound training step of a small GPT-like decoder with random weights (bf16 autocast,
fused AdamW). Times each step with CUDA events; reports the median over STEPS steps after
WARMUP steps. Prints one JSON line."""
import argparse
import json
import statistics

import torch
import torch.nn as nn
import torch.nn.functional as F
from steps import checksum_state, time_steps


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, d, layers, heads, seq):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d-model", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--checksum-every", type=int, default=0,
                    help="the peer of step digests: a plain PyTorch checksum of the state (steps.checksum_state) "
                         "at the start of every Nth step")
    a = ap.parse_args()

    torch.manual_seed(0)
    model = GPT(a.vocab, a.d_model, a.layers, a.heads, a.seq).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    data = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device="cuda")
    inp, tgt = data[:, :-1], data[:, 1:]

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(inp).flatten(0, 1).float(), tgt.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    ms, losses, cpu_ms = time_steps("train_step", step, a.warmup, a.steps,
                            check=lambda: checksum_state(model, opt), check_every=a.checksum_every)
    params = sum(p.numel() for p in model.parameters())
    tokens = a.batch * a.seq
    med = statistics.median(ms)
    print(json.dumps({"bench": "train_step", "ms_per_step": round(med, 3), "host_cpu_ms_per_step": round(cpu_ms, 3), "steps": a.steps, "warmup": a.warmup,
                      "steps_ms": [round(m, 3) for m in ms], "params": params,
                      "tokens_per_s": round(tokens / med * 1e3), "first_loss": round(losses[0], 4),
                      "last_loss": round(losses[-1], 4)}))


if __name__ == "__main__":
    main()
