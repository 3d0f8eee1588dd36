# SPDX-License-Identifier: Apache-2.0
"""A small DistributedDataParallel training loop for trying Crux with torchrun.

Synthetic data, a stack of linear layers sized by --width/--depth; one NCCL
all-reduce per gradient bucket each iteration, as in real DDP training.
With --mark, every iteration start is announced to the Crux preload through
its crux_iteration_mark() (looked up at run time; a no-op without the
preload); otherwise the preload finds the period in the NCCL call sequence.
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
    a = p.parse_args()

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
    t0 = time.time()
    for i in range(a.iters):
        if mark:
            mark()
        opt.zero_grad(set_to_none=True)
        model(x).square().mean().backward()
        opt.step()
        if dist.get_rank() == 0 and (i + 1) % 50 == 0:
            torch.cuda.synchronize()
            print(f"iter {i + 1}: {(time.time() - t0) / (i + 1) * 1000:.1f} ms/iteration", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
