"""Fixture workload for testdata/recordings/torch-graphs: eager ops, a cuBLAS
matmul and a CUDA graph captured at known lines and replayed, on two streams.
Small on purpose: the recording is committed."""
import torch

x = torch.arange(4096, device="cuda", dtype=torch.float32)
for _ in range(3):
    x = x * 2 + 1  # FIXTURE: eager
a = torch.ones(128, 128, device="cuda", dtype=torch.float16)
c = a @ a  # FIXTURE: matmul

side = torch.cuda.Stream()
static = torch.zeros(4096, device="cuda")
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    static.add_(1)  # FIXTURE: side-stream
torch.cuda.current_stream().wait_stream(side)

graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    out = static * 3  # FIXTURE: graph-mul
    out = out.sin()  # FIXTURE: graph-sin
for _ in range(4):
    graph.replay()
torch.cuda.synchronize()
assert float(c[0, 0]) == 128.0
print("torch_graphs ok", float(out.sum()))
