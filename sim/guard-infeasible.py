#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The fairness guard's runs of a crux-sim JSON judged against TACCL* and the
reference snapshots: per run the utilisation, the share of Crux-full's gain
over TACCL* kept, the worst slowdown, the jobs above the bound (and those of
them the guard did not report infeasible), the jobs reported infeasible, and
the highest slowdown at the reference snapshots in the evaluator and in the
reference model.

usage: python3 sim/guard-infeasible.py RESULT.json [...]
       (a crux-sim run with taccl and crux-full among its policies)
"""
import json
import sys


def main(paths):
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for path in paths:
        with open(path) as f:
            runs = {r["policy"]: r for r in json.load(f)["runs"]}
        if "taccl" not in runs or "crux-full" not in runs:
            print(f"{path}: needs taccl and crux-full among the policies", file=sys.stderr)
            return 1
        base = runs["taccl"]["mean_gpu_util"]
        full = runs["crux-full"]["mean_gpu_util"]
        print(f"{path}: taccl {100 * base:.2f} %, crux-full {100 * full:.2f} %")
        for name, r in runs.items():
            bound = r["max_slowdown"]
            infeasible = set(r.get("infeasible_job_ids", []))
            above = [i for i, x in zip(r["job_id"], r["job_slowdown"])
                     if x is not None and bound > 0 and x > bound * (1 + 1e-9)]
            feasible_above = [i for i in above if i not in infeasible]
            kept = (r["mean_gpu_util"] - base) / (full - base) if full != base else float("nan")
            worst = max(x for x in r["job_slowdown"] if x is not None)
            snaps = r["reference_snapshots"]
            se = max([q["max_slowdown_eval"] for q in snaps] or [0])
            sr = max([q["max_slowdown_ref"] for q in snaps] or [0])
            print(f"  {name:18s} util {100 * r['mean_gpu_util']:6.2f}  kept {100 * kept:7.1f} %"
                  f"  worst {worst:6.2f}  above the bound {len(above):4d}"
                  f" (not reported {len(feasible_above):3d})"
                  f"  reported infeasible {r.get('infeasible_jobs', 0):4d}"
                  f"  snapshots: worst slowdown {se:6.2f} evaluator, {sr:6.2f} reference")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
