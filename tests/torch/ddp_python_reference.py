#!/usr/bin/python3
"""PyTorch's own DDP (gloo, torch.multiprocessing) on the model, data and initial weights of
tests/torch/ddp_torch_test.cpp: writes the torch version on the first line ("torch 2.15.0+cu132"),
then rank 0's loss per step, one per line, to --out, for the C++ adapter's loss curve to be
compared with. Run by the python whose torch is the LibTorch the test links (Debian's
/usr/bin/python3 for 1.13, the venv's python for a wheel's LibTorch; tests/torch/CMakeLists.txt).

mp.spawn rather than torchrun: Debian's torchrun 1.13 crashes at start on Python 3.11.
"""
import argparse
import math
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.fc1 = nn.Linear(8, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, 1)
        with torch.no_grad():  # the C++ test's formula, parameter k in registration order
            for k, p in enumerate(self.parameters()):
                i = torch.arange(p.numel(), dtype=torch.float64)
                p.view(-1).copy_(0.3 * torch.sin(0.7 * i + 1.3 * k))

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


def batch(step, ranks, rank, b):
    j = torch.arange(b, dtype=torch.float64)
    s = step * ranks * b + j * ranks + rank
    k = torch.arange(8, dtype=torch.float64)
    x = torch.sin(0.37 * s[:, None] + 0.11 * k[None, :]).float()
    y = torch.cos(0.05 * s)[:, None].float()
    return x, y


def worker(rank, args):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    dist.init_process_group("gloo", rank=rank, world_size=args.nproc)
    net = nn.parallel.DistributedDataParallel(Net(args.hidden))
    opt = torch.optim.SGD(net.parameters(), lr=args.lr)
    losses = []
    for step in range(args.steps):
        opt.zero_grad()
        x, y = batch(step, args.nproc, rank, args.batch)
        loss = F.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if rank == 0:
        with open(args.out, "w") as f:
            f.write(f"torch {torch.__version__}\n" + "".join(f"{v!r}\n" for v in losses))
    # Both ranks reach here before either tears its process group down: a rank that destroyed
    # its gloo group while the other still used the pair made a worker abort ("terminate called
    # without an active exception") in 1 of 16 runs beside two busy loops, and once in CI. With
    # the barrier torch 2.x still did, 1 of 16 runs beside two busy loops (2026-12-06), so the
    # test runs this reference up to three times (ddp_torch_test.cpp).
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        args.port = s.getsockname()[1]
    mp.spawn(worker, args=(args,), nprocs=args.nproc, join=True)


if __name__ == "__main__":
    main()
