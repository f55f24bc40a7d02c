#!/usr/bin/env python3
"""torch.distributed.FileStore doing the set+get mixes of `fastrun-bench store`, for comparison.

Usage: torch_filestore.py SECONDS DIR PATTERN PROCS...  (prints one line "PROCS RATE" per count,
rate in set+get round trips per second summed over the processes). PATTERN: "rewrite" (each
process cycles through 64 keys of its own) or "fresh" (each set is of a key never set before, as
a rendezvous sets its keys). The store file lives in a fresh
temporary directory inside DIR (the filesystem measured), removed at the end; children are
always reaped.
"""
import multiprocessing as mp
import os
import queue as queue_mod
import shutil
import sys
import tempfile
import time


def client(path, world, index, seconds, fresh, ready, go, out):
    import torch.distributed as dist
    store = dist.FileStore(path, world)
    value = b"v" * 32
    ready.put(index)
    go.wait(60)
    n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(16):
            key = f"p{index}/f{n}" if fresh else f"p{index}/k{n % 64}"
            store.set(key, value)
            if len(store.get(key)) != len(value):
                raise RuntimeError("wrong value size")
            n += 1
    out.put(n / seconds)


def collect(queue, kids, limit):
    """One item per child, failing fast (not at the limit) when a child died without one."""
    items, deadline = [], time.monotonic() + limit
    while len(items) < len(kids):
        try:
            items.append(queue.get(timeout=0.2))
        except queue_mod.Empty:
            if time.monotonic() > deadline or any(k.exitcode not in (None, 0) for k in kids):
                raise RuntimeError("a torch FileStore client failed or did not report in time")
    return items


def rate(directory, procs, seconds, fresh):
    path = os.path.join(directory, f"store-{procs}-{'fresh' if fresh else 'rewrite'}")
    ctx = mp.get_context("spawn")  # torch in a forked child is not supported
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    kids = [ctx.Process(target=client, args=(path, procs, i, seconds, fresh, ready, go, out)) for i in range(procs)]
    for k in kids:
        k.start()
    try:
        collect(ready, kids, 120)
        go.set()
        return sum(collect(out, kids, seconds + 60))
    finally:
        for k in kids:
            k.join(timeout=10)
            if k.is_alive():
                k.kill()
                k.join()


def main():
    if len(sys.argv) < 5 or sys.argv[3] not in ("rewrite", "fresh"):
        print(__doc__, file=sys.stderr)
        return 2
    seconds = float(sys.argv[1])
    fresh = sys.argv[3] == "fresh"
    directory = tempfile.mkdtemp(prefix="bench-torch-", dir=sys.argv[2])
    try:
        for procs in (int(a) for a in sys.argv[4:]):
            print(procs, rate(directory, procs, seconds, fresh), flush=True)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
