#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Per-ring-step wait of the testbed's jobs, from the trainers' logs.

steps.py [--json FILE] RUN_DIR...

A run directory of run.sh (run-ARM-REP) holds one log per rank
(logs/JOB-rR.log: per iteration its start, compute end, end and every bucket's
end, CLOCK_MONOTONIC ns). Bucket b of a K-bucket job carries (b+1)/(K(K+1)/2)
of the gradient (trainer.c), and a ring all-reduce over n ranks is 2(n-1)
sequential steps moving 2(n-1)/n of it. Over a job's iterations (the first 3
left out: connection set-up, profiling) the bucket times are fitted by least
squares as

    time = 2(n-1) x alpha + bytes on the wire / rate

alpha is the wait per ring step that does not scale with bytes (queueing behind
other flows, latency), rate the job's effective rate. A fluid model has alpha 0.
Prints one line per run and job; --json writes them. Jobs of one bucket give no
fit (one point per iteration size) and are left out.
"""
import argparse
import glob
import json
import os
import statistics
import sys

SKIP = 3


def fit(path):
    with open(path) as f:
        head = f.readline().split()
        rows = [ln.split() for ln in f if ln[:1].isdigit()]
    kv = dict(x.split("=", 1) for x in head[2:] if "=" in x)
    try:
        n, grad, k = int(kv["nranks"]), int(kv["grad_bytes"]), int(kv["buckets"])
    except (KeyError, ValueError):
        return None
    rows = rows[SKIP:]
    if k < 2 or n < 2 or len(rows) < 2:
        return None
    shares = k * (k + 1) / 2
    xs, ys = [], []
    for r in rows:
        if len(r) < 4 + k:
            continue
        prev = int(r[2])
        for b in range(k):
            end = int(r[4 + b])
            xs.append(grad * (b + 1) / shares * 2 * (n - 1) / n)
            ys.append((end - prev) / 1e9)
            prev = end
    if len(set(xs)) < 2:
        return None
    slope, icpt = statistics.linear_regression(xs, ys)
    comm = [(int(r[3]) - int(r[2])) / 1e9 for r in rows]
    return {"job": kv.get("job", "?"), "ranks": n, "buckets": k, "iterations": len(rows),
            "alpha_ms_per_step": icpt / (2 * (n - 1)) * 1e3,
            "rate_mbit_s": 8 / slope / 1e6 if slope > 0 else None,
            "comm_s_per_iteration": statistics.mean(comm)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="")
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    out = []
    for d in a.runs:
        logs = sorted(glob.glob(os.path.join(d, "logs", "*-r0.log")))
        if not logs:
            print(f"steps.py: {d}: no logs/*-r0.log (a run directory of run.sh?)", file=sys.stderr)
            return 2
        for lg in logs:
            r = fit(lg)
            if r is None:
                continue
            r["run"] = "/".join(os.path.normpath(d).split(os.sep)[-2:])
            out.append(r)
            rate = f"{r['rate_mbit_s']:6.1f}" if r["rate_mbit_s"] else "   n/a"
            print(f"{r['run']:20s} {r['job']:9s} ranks {r['ranks']} buckets {r['buckets']}: "
                  f"wait per step {r['alpha_ms_per_step']:6.2f} ms, rate {rate} Mbit/s, "
                  f"comm {r['comm_s_per_iteration']:.3f} s per iteration")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"benchmark": "testbed-steps", "what": __doc__.splitlines()[0], "fits": out}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
