#!/usr/bin/python3
"""PyTorch's own DDP (gloo, mp.spawn) on the MLP of bench/torch/ddp_bench.cpp: writes rank 0's
median step time in seconds to --out. Run by fastrun-bench-torch; one intra-op thread per rank."""
import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    def __init__(self, hidden, layers):
        super().__init__()
        dims = [256] + [hidden] * layers
        self.fcs = nn.ModuleList(nn.Linear(dims[i], dims[i + 1]) for i in range(layers))
        self.head = nn.Linear(dims[-1], 10)

    def forward(self, x):
        for fc in self.fcs:
            x = torch.tanh(fc(x))
        return self.head(x)


def worker(rank, a):
    torch.set_num_threads(1)
    torch.manual_seed(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(a.port)
    dist.init_process_group("gloo", rank=rank, world_size=a.nproc)
    net = nn.parallel.DistributedDataParallel(Mlp(a.hidden, a.layers))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    x, y = torch.randn(a.batch, 256), torch.randn(a.batch, 10)
    times = []
    for step in range(3 + a.steps):
        dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        F.mse_loss(net(x), y).backward()
        opt.step()
        if step >= 3:
            times.append(time.perf_counter() - start)
    if rank == 0:
        with open(a.out, "w") as f:
            f.write(f"{sorted(times)[len(times) // 2]!r}\n")
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    for flag, default in (("--nproc", 2), ("--hidden", 512), ("--layers", 4), ("--batch", 32), ("--steps", 20)):
        p.add_argument(flag, type=int, default=default)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        a.port = s.getsockname()[1]
    mp.spawn(worker, args=(a,), nprocs=a.nproc, join=True)


if __name__ == "__main__":
    main()
