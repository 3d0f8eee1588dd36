#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""One rank of a PyTorch training-like loop for tests/gpu/run.sh's 'profiler' phase.

Each iteration: a matmul chain (compute), then two all-reduces (48 + 16 MiB
gradient buckets), serialised on the default stream. Ground truth per
iteration from CUDA events. With --torch-profiler, torch.profiler records
active steps and the rank also reports per-iteration compute (non-NCCL
kernels) and communication (NCCL kernels) as torch.profiler sees them.
Without it, the Crux profiler plugin (NCCL_PROFILER_PLUGIN=crux) may hold
CUPTI and publish the profile record, which run.sh reads with cruxctl.

Environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and NCCL_HOSTID per
rank so that ranks sharing one GPU go through the network transport).
Prints one JSON line.
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--matrix", type=int, default=4096)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--torch-profiler", action="store_true")
    a = ap.parse_args()

    rank = int(os.environ["RANK"])
    dev = torch.device("cuda:0")
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    n = a.matrix
    x = torch.randn(n, n, device=dev)
    w = torch.randn(n, n, device=dev) / n ** 0.5
    big = torch.ones(a.mib * 3 // 4 * 2 ** 18, device=dev)
    small = torch.ones(a.mib // 4 * 2 ** 18, device=dev)
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
    comp, comm, wall = [], [], []

    def step():
        ev[0].record()
        y = x
        for _ in range(4):
            y = torch.mm(y, w)
        ev[1].record()
        dist.all_reduce(big)
        dist.all_reduce(small)
        ev[2].record()
        torch.cuda.synchronize()
        comp.append(ev[0].elapsed_time(ev[1]) / 1e3)
        comm.append(ev[1].elapsed_time(ev[2]) / 1e3)

    prof_out = {}
    if a.torch_profiler:
        from torch.profiler import ProfilerActivity, profile, schedule
        active = min(40, a.iters // 2)
        sched = schedule(wait=a.iters // 4, warmup=5, active=active, repeat=1)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=sched) as p:
            last = time.perf_counter()
            for _ in range(a.iters):
                step()
                p.step()
                now = time.perf_counter()
                wall.append(now - last)
                last = now
        # Kernel records as torch.profiler exports them (the Chrome trace one
        # opens in Perfetto): each GPU kernel once, with its duration in us.
        import tempfile
        k_comm = k_comp = 0.0
        with tempfile.NamedTemporaryFile(suffix=".json") as tf:
            p.export_chrome_trace(tf.name)
            with open(tf.name) as f:
                trace = json.load(f)
        for e in trace.get("traceEvents", []):
            if e.get("cat") != "kernel" or "dur" not in e:
                continue
            if "nccl" in e.get("name", "").lower():
                k_comm += float(e["dur"])
            else:
                k_comp += float(e["dur"])
        prof_out = {"torch_compute_s": k_comp / 1e6 / active, "torch_comm_s": k_comm / 1e6 / active,
                    "torch_steps": active}
    else:
        last = time.perf_counter()
        for _ in range(a.iters):
            step()
            now = time.perf_counter()
            wall.append(now - last)
            last = now
    h = len(comp) // 2
    out = {"rank": rank, "iters": a.iters, "compute_s": statistics.mean(comp[h:]),
           "comm_s": statistics.mean(comm[h:]), "iter_s": statistics.mean(wall[h:]),
           "torch": bool(a.torch_profiler)}
    out.update(prof_out)
    print(json.dumps(out), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
