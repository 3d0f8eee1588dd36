#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The fairness guard's runs of crux-sim JSONs judged against TACCL* and the
reference snapshots: per run the utilisation, the share of Crux-full's gain
over TACCL* kept, the worst slowdown, the jobs above the bound (and those of
them the guard did not report infeasible: the jobs it holds), the worst
slowdown of a held job, the jobs reported infeasible, and at the reference
snapshots the highest slowdown and the held jobs above their plan's bound in
the evaluator and in the reference model.

usage: python3 sim/guard-infeasible.py [--json OUT] RESULT.json [...]
       (crux-sim runs with taccl and crux-full among their policies; with
       --json, the figures per topology and policy over the files, each
       file one seed, with the median, min and max across them)
"""
import json
import statistics
import sys


def figures(r, base, full):
    bound = r["max_slowdown"]
    infeasible = set(r.get("infeasible_job_ids", []))
    sd = [(i, x) for i, x in zip(r["job_id"], r["job_slowdown"]) if x is not None]
    above = [i for i, x in sd if bound > 0 and x > bound * (1 + 1e-9)]
    held = [x for i, x in sd if i not in infeasible]
    snaps = r["reference_snapshots"]
    # files written before crux-sim counted the held jobs at its snapshots
    has = bool(snaps) and "held_above_bound_eval" in snaps[0]

    def snap(key, agg):
        return agg(q[key] for q in snaps) if has else None

    return {
        "util": r["mean_gpu_util"],
        "gain_kept": (r["mean_gpu_util"] - base) / (full - base) if full > base else None,
        "worst": max(x for _, x in sd),
        "worst_held": max(held) if held else None,
        "above_bound": len(above),
        "held_above_bound": len([i for i in above if i not in infeasible]),
        "reported_infeasible": r.get("infeasible_jobs", 0),
        "snap_worst_eval": max([q["max_slowdown_eval"] for q in snaps] or [0]),
        "snap_worst_ref": max([q["max_slowdown_ref"] for q in snaps] or [0]),
        "snap_held_worst_eval": snap("held_max_slowdown_eval", max),
        "snap_held_worst_ref": snap("held_max_slowdown_ref", max),
        "snap_held_above_eval": snap("held_above_bound_eval", sum),
        "snap_held_above_ref": snap("held_above_bound_ref", sum),
        "snap_net_jobs": sum(q["net_jobs"] for q in snaps),
    }


def spread(vals):
    v = [x for x in vals if x is not None]
    if not v:
        return None
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}


def main(argv):
    out = None
    if len(argv) >= 2 and argv[0] == "--json":
        out, argv = argv[1], argv[2:]
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    agg = {}
    for path in argv:
        with open(path) as f:
            doc = json.load(f)
        runs = {r["policy"]: r for r in doc["runs"]}
        if "taccl" not in runs or "crux-full" not in runs:
            print(f"{path}: needs taccl and crux-full among the policies", file=sys.stderr)
            return 1
        base = runs["taccl"]["mean_gpu_util"]
        full = runs["crux-full"]["mean_gpu_util"]
        topo = doc["topology"]["kind"]
        seed = doc["workload"]["seed"]
        print(f"{path}: {topo} seed {seed}, taccl {100 * base:.2f} %, crux-full {100 * full:.2f} %")
        for name, r in runs.items():
            g = figures(r, base, full)
            agg.setdefault(topo, {}).setdefault(name, []).append(dict(g, seed=seed))
            kept = "   n/a" if g["gain_kept"] is None else f"{100 * g['gain_kept']:6.1f}"
            held = g["worst_held"] or 0
            print(f"  {name:16s} util {100 * g['util']:6.2f}  kept {kept} %"
                  f"  worst {g['worst']:7.2f} (held {held:6.2f})"
                  f"  above the bound {g['above_bound']:4d} (held {g['held_above_bound']:3d})"
                  f"  reported {g['reported_infeasible']:4d}"
                  f"  snapshots: worst {g['snap_worst_eval']:.2f} eval {g['snap_worst_ref']:.2f} ref")
            if g["snap_held_above_eval"] is not None and r["max_slowdown"] > 0:
                print(f"  {'':16s} held jobs at the snapshots: above their plan's bound"
                      f" {g['snap_held_above_eval']} eval, {g['snap_held_above_ref']} ref"
                      f" (of {g['snap_net_jobs']} network jobs), worst"
                      f" {g['snap_held_worst_eval']:.2f} eval, {g['snap_held_worst_ref']:.2f} ref")
    if out:
        res = {"tool": "sim/guard-infeasible.py", "files": argv, "topologies": {}}
        for topo, pols in agg.items():
            res["topologies"][topo] = {
                name: {"per_seed": rows,
                       **{k: spread([x[k] for x in rows]) for k in rows[0] if k != "seed"}}
                for name, rows in pols.items()}
        with open(out, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
