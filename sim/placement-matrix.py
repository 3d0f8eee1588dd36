#!/usr/bin/env python3
"""Summarise the placement x network policy runs of placement-matrix.sh.

usage: placement-matrix.py RUN_DIR OUT.json PLOT_PREFIX PLACEMENT...

RUN_DIR holds one crux-sim JSON per (placement, load, seed), named
PLACEMENT-LOAD-SEED.json. Writes OUT.json (every run's figures, and per cell
the median with min-max over seeds; placement gains against pack and Crux's
gains against the other network policies, paired by seed) and
PLOT_PREFIX-LOAD.dat for gnuplot; prints the tables the README quotes.
"""
import json
import os
import re
import statistics
import sys


def spread(xs):
    return {"median": round(statistics.median(xs), 4), "min": round(min(xs), 4),
            "max": round(max(xs), 4), "n": len(xs)}


def fmt(s, nd=1):
    return f"{s['median']:.{nd}f} [{s['min']:.{nd}f}-{s['max']:.{nd}f}]"


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    run_dir, out_path, plot_prefix = sys.argv[1:4]
    placements = sys.argv[4:]
    runs = []
    setup = None
    name_re = re.compile(r"^(.+)-([0-9.]+)-([0-9]+)\.json$")
    for fn in sorted(os.listdir(run_dir)):
        m = name_re.match(fn)
        if not m:
            continue
        with open(os.path.join(run_dir, fn)) as f:
            d = json.load(f)
        if setup is None:
            setup = {"topology": d["topology"], "workload": d["workload"]}
        for r in d["runs"]:
            if r["finished"] != r["jobs"]:
                sys.exit(f"{fn}: {r['policy']} finished {r['finished']} of {r['jobs']} jobs: "
                         "the figures would not be comparable")
            runs.append({
                "placement": m.group(1), "load": float(m.group(2)), "seed": int(m.group(3)),
                "policy": r["policy"], "util_pct": 100 * r["mean_gpu_util"],
                "mean_jct_h": r["mean_jct_s"] / 3600, "makespan_h": r["end_s"] / 3600,
                "slowdown_p50": r["slowdown"]["p50"], "slowdown_p99": r["slowdown"]["p99"],
                "slowdown_max": r["slowdown"]["max"], "preemptions": r["preemptions"],
                "wall_s": r["wall_s"]})
    if not runs:
        sys.exit(f"{run_dir}: no runs")
    policies = []
    for r in runs:
        if r["policy"] not in policies:
            policies.append(r["policy"])
    loads = sorted({r["load"] for r in runs})
    by = {(r["placement"], r["load"], r["seed"], r["policy"]): r for r in runs}
    seeds = sorted({r["seed"] for r in runs})
    metrics = ["util_pct", "mean_jct_h", "makespan_h", "slowdown_p50", "slowdown_p99",
               "slowdown_max", "preemptions"]

    def col(p, l, pol, k):
        return [by[(p, l, s, pol)][k] for s in seeds if (p, l, s, pol) in by]

    cells = []
    for l in loads:
        for p in placements:
            for pol in policies:
                if not col(p, l, pol, "util_pct"):
                    continue
                c = {"load": l, "placement": p, "policy": pol}
                for k in metrics:
                    c[k] = spread(col(p, l, pol, k))
                cells.append(c)

    def paired(p, q, l, pol_a, pol_b, k):
        """Per seed: 100 x (a / b - 1), a = (p, pol_a), b = (q, pol_b)."""
        xs = []
        for s in seeds:
            a, b = by.get((p, l, s, pol_a)), by.get((q, l, s, pol_b))
            if a and b and b[k] > 0:
                xs.append(100 * (a[k] / b[k] - 1))
        return spread(xs) if xs else None

    gains = []
    for l in loads:
        for p in placements:
            if p == "pack":
                continue
            for pol in policies:
                g = {"load": l, "placement": p, "policy": pol, "vs": "pack"}
                for k in ("util_pct", "mean_jct_h", "makespan_h"):
                    g[k + "_change_pct"] = paired(p, "pack", l, pol, pol, k)
                if g["util_pct_change_pct"]:
                    gains.append(g)
    crux = []
    for l in loads:
        for p in placements:
            for base in policies:
                if base == "crux-full":
                    continue
                g = {"load": l, "placement": p, "policy": "crux-full", "vs": base}
                for k in ("util_pct", "mean_jct_h"):
                    g[k + "_change_pct"] = paired(p, p, l, "crux-full", base, k)
                if g["util_pct_change_pct"]:
                    crux.append(g)

    doc = {
        "experiment": "sim-placement",
        "command": "sh sim/placement-matrix.sh build",
        "setup": setup,
        "loads": loads, "seeds": seeds, "placements": placements, "policies": policies,
        "notes": "utilisation over [0, last arrival]; JCT includes queueing; makespan: "
                 "until the last job ends; slowdown: a job's mean iteration time over its "
                 "isolated one with the same placement; cells: median, min, max over seeds; "
                 "*_change_pct: per seed 100 x (a/b - 1), paired on the same trace",
        "cells": cells, "placement_vs_pack": gains, "crux_full_vs": crux, "runs": runs,
    }
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")

    # gnuplot data: one row per policy, per placement 6 columns.
    for l in loads:
        with open(f"{plot_prefix}-{l}.dat", "w") as f:
            f.write("# policy" + "".join(
                f" {p}_util {p}_umin {p}_umax {p}_jct {p}_jmin {p}_jmax" for p in placements)
                + "\n")
            for pol in policies:
                row = [pol]
                for p in placements:
                    u, j = spread(col(p, l, pol, "util_pct")), spread(col(p, l, pol, "mean_jct_h"))
                    row += [u["median"], u["min"], u["max"], j["median"], j["min"], j["max"]]
                f.write(" ".join(str(x) for x in row) + "\n")

    cell = {(c["load"], c["placement"], c["policy"]): c for c in cells}
    for l in loads:
        print(f"\n## offered load {l}: utilisation % / mean JCT h (median [min-max] over "
              f"{len(seeds)} seeds)\n")
        print("| placement | " + " | ".join(policies) + " |")
        print("|---|" + "---|" * len(policies))
        for p in placements:
            row = [f"{fmt(cell[(l, p, pol)]['util_pct'])} / {fmt(cell[(l, p, pol)]['mean_jct_h'], 2)}"
                   for pol in policies]
            print(f"| {p} | " + " | ".join(row) + " |")
        print(f"\n### load {l}: slowdown p99, makespan h, preemptions (median)\n")
        print("| placement | " + " | ".join(policies) + " |")
        print("|---|" + "---|" * len(policies))
        for p in placements:
            row = [f"{cell[(l, p, pol)]['slowdown_p99']['median']:.2f}, "
                   f"{cell[(l, p, pol)]['makespan_h']['median']:.1f}, "
                   f"{cell[(l, p, pol)]['preemptions']['median']:.0f}" for pol in policies]
            print(f"| {p} | " + " | ".join(row) + " |")
        print(f"\n### load {l}: mean JCT change vs pack, same policy (median [min-max] %)\n")
        print("| placement | " + " | ".join(policies) + " |")
        print("|---|" + "---|" * len(policies))
        for p in placements:
            if p == "pack":
                continue
            gs = {g["policy"]: g for g in gains if g["load"] == l and g["placement"] == p}
            print(f"| {p} | " + " | ".join(fmt(gs[pol]["mean_jct_h_change_pct"])
                                          for pol in policies) + " |")
        print(f"\n### load {l}: Crux-full vs each policy, same placement: utilisation / mean "
              "JCT change (median [min-max] %)\n")
        bases = [b for b in policies if b != "crux-full"]
        print("| placement | " + " | ".join(bases) + " |")
        print("|---|" + "---|" * len(bases))
        for p in placements:
            gs = {g["vs"]: g for g in crux if g["load"] == l and g["placement"] == p}
            print(f"| {p} | " + " | ".join(
                f"{fmt(gs[b]['util_pct_change_pct'])} / {fmt(gs[b]['mean_jct_h_change_pct'])}"
                for b in bases) + " |")


if __name__ == "__main__":
    main()
