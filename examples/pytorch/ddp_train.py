# SPDX-License-Identifier: Apache-2.0
"""A small DistributedDataParallel training loop for trying Crux with torchrun.

Synthetic data, a stack of linear layers sized by --width/--depth; one NCCL
all-reduce per gradient bucket each iteration, as in real DDP training.
With --mark, every iteration start is announced to the Crux preload through
its crux_iteration_mark() (looked up at run time; a no-op without the
preload); otherwise the preload finds the period in the NCCL call sequence.
--seconds S runs for S seconds instead of --iters (rank 0 decides and every
rank learns it through a one-element all-reduce, so all ranks run the same
iterations); --log FILE writes one line per iteration: its index, start and
end (wall clock, seconds), the end taken after the GPU finished it.
"""
import argparse
import ctypes
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--mark", action="store_true")
    p.add_argument("--seconds", type=float, default=0.0)
    p.add_argument("--log", default="")
    a = p.parse_args()
    if a.iters < 1 or a.width < 1 or a.depth < 1 or a.batch < 1 or a.seconds < 0:
        p.error("--iters, --width, --depth and --batch must be >= 1 and --seconds >= 0")

    dist.init_process_group("nccl")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    layers = []
    for _ in range(a.depth):
        layers += [torch.nn.Linear(a.width, a.width), torch.nn.ReLU()]
    model = DDP(torch.nn.Sequential(*layers).cuda(), device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    mark = None
    if a.mark:
        try:
            mark = ctypes.CDLL(None).crux_iteration_mark
        except AttributeError:
            mark = None
    x = torch.randn(a.batch, a.width, device="cuda")
    log = open(a.log, "w", buffering=1) if a.log else None
    stop = torch.zeros(1, device="cuda")
    t0 = time.time()
    i = 0
    while True:
        start = time.time()
        if mark:
            mark()
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
        if log:
            torch.cuda.synchronize()
            log.write(f"{i} {start:.6f} {time.time():.6f}\n")
        i += 1
        if dist.get_rank() == 0 and i % 50 == 0:
            torch.cuda.synchronize()
            print(f"iter {i}: {(time.time() - t0) / i * 1000:.1f} ms/iteration", flush=True)
        if a.seconds > 0:
            stop.fill_(1.0 if dist.get_rank() == 0 and time.time() - t0 >= a.seconds else 0.0)
            dist.all_reduce(stop, op=dist.ReduceOp.MAX)
            if stop.item() > 0:
                break
        elif i >= a.iters:
            break
    if log:
        log.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
