#!/usr/bin/env python3
"""The rank of `fastrun-bench restart`'s torchrun column: the C++ rank's steps in Python.

Usage (under torchrun 2.x --max-restarts 1): torch_restart.py DIR [DYING]. Attempt 0: every rank
initialises the default group (gloo) and passes a barrier; rank DYING (default 1) then stamps DIR/death and
exits 1 while the others wait in a second barrier until the agent stops them. Attempt 1: every
rank stamps DIR/start-1-RANK first thing (before importing torch), initialises the group, passes
a barrier and stamps DIR/joined-RANK. Stamps are CLOCK_MONOTONIC in ms, the C++ side's clock.
"""
import os
import sys
import time


def stamp(path):
    with open(path, "w") as f:
        f.write(f"{time.clock_gettime(time.CLOCK_MONOTONIC) * 1e3:.6f}\n")


def main():
    out = sys.argv[1]
    dying = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    rank = int(os.environ["RANK"])
    stamp(f"{out}/start-{attempt}-{rank}")
    import torch.distributed as dist
    dist.init_process_group("gloo")
    dist.barrier()
    if attempt == 0:
        if rank == dying:
            stamp(f"{out}/death")
            os._exit(1)
        dist.barrier()  # the dying rank never comes: the agent stops this attempt
        return 1
    stamp(f"{out}/joined-{rank}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
