"""gpurr demo's program: a small PyTorch training loop, recorded twice.

Run b's learning rate is one float32 ulp larger than run a's, as a value
computed another way or read back from a config would be: the runs part ways
at the first optimizer step, in a kernel whose inputs differ in one scalar.
At step NAN_STEP the loss gains a log-likelihood term whose input holds
negative numbers: the log makes a NaN, and the loss is NaN from there.

Usage: python train.py a|b"""
import struct
import sys

import torch
import torch.nn.functional as F

STEPS = 6
NAN_STEP = 4
LR = 0.05


def next_float32(x):
    """The float32 one unit in the last place above x."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    return struct.unpack("<f", struct.pack("<I", bits + 1))[0]


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(16, 32)
        self.out = torch.nn.Linear(32, 1)

    def forward(self, x):
        h = torch.tanh(self.hidden(x))  # MARK: forward
        return self.out(h)


def main():
    run = sys.argv[1] if len(sys.argv) > 1 else "a"
    if run not in ("a", "b"):
        sys.exit(f"usage: python train.py a|b (not {run!r})")
    lr = LR if run == "a" else next_float32(LR)
    torch.manual_seed(0)
    model = Model().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=lr, foreach=True)
    x = torch.randn(64, 16, device="cuda")
    y = torch.randn(64, 1, device="cuda")
    for step in range(STEPS):
        opt.zero_grad()
        pred = model(x)
        loss = F.mse_loss(pred, y)
        if step == NAN_STEP:
            loss = loss - 0.01 * torch.log(pred).mean()  # MARK: nan
        loss.backward()
        opt.step()  # MARK: step
    print(f"train.py {run}: lr {lr!r}, loss {loss.item()} after {STEPS} steps")


if __name__ == "__main__":
    main()
