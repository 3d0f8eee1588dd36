#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""crux-sim sweep: Crux-full against every baseline over fabrics, loads and seeds.

Usage: python3 sim/sweep.py [BUILD_DIR] [--seeds N] [--par P] [--out FILE]
                                  [--plot FILE] [--quick]

Every run is one `crux-sim run` with every policy (the baselines, the baselines
on Crux's least-congested paths, Crux's ablation, and the diagnostic orders)
on one generated workload. Sweeps (a small cluster and a short horizon so that
the whole sweep runs in minutes on two shared cores; see sim/README.md):
  fabric: uplink:NIC ratio 0.25/0.5/1/2 x channels 4/16/64 at offered load 0.8,
          the ToR layer 2:1 oversubscribed whatever the ratio (fewer, faster
          uplinks as the ratio grows);
  load:   offered load 0.6/0.8/1.0 on the thinnest of those fabrics and on a
          production-like one (1:1, uplinks twice a NIC port), 16 channels.
Writes the per-run figures, the medians over seeds with their range, and the
diagnostic rows to --out (bench/results/sim-sweep.json) and the gain against
the uplink:NIC ratio to --plot (bench/results/sim-sweep-ratio.png, gnuplot).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

POLICIES = ["ecmp", "sincronia", "taccl", "cassini-lite", "crux-pa", "crux-ps-pa",
            "crux-full", "sincronia-lcp", "cassini-lite-lcp", "crux-random-order",
            "crux-reversed-order", "crux-one-level"]
BASELINES = ["ecmp", "sincronia", "sincronia-lcp", "taccl", "cassini-lite",
             "cassini-lite-lcp"]
DIAGS = ["crux-random-order", "crux-reversed-order", "crux-one-level"]

# Cluster: 16 ToRs x 8 hosts x 8 GPUs (1,024 GPUs), 200G NICs, jobs scattered.
CLUSTER = {"tors": 16, "hosts_per_tor": 8, "nic_gbps": 200, "placement": "random"}
WORKLOAD = {"jobs": 300, "days": 2, "max_job_gpus": 128}
RATIOS = [0.25, 0.5, 1, 2]
CHANNELS = [4, 16, 64]
LOADS = [0.6, 0.8, 1.0]


def fabric(ratio, oversub, channels):
    """A two-layer Clos whose uplinks are ratio x a NIC port, sized for oversub:1."""
    up = ratio * CLUSTER["nic_gbps"]
    down = CLUSTER["hosts_per_tor"] * CLUSTER["nic_gbps"]
    aggs = down / oversub / up
    if abs(aggs - round(aggs)) > 1e-9:
        raise SystemExit(f"sweep: ratio {ratio} at {oversub}:1 gives {aggs} uplinks")
    return {"name": f"clos2 r{ratio:g} {oversub:g}:1 {channels}ch", "uplink_nic_ratio": ratio,
            "oversubscription": oversub, "channels": channels, "aggs": int(round(aggs)),
            "uplink_gbps": up, "nic_gbps": CLUSTER["nic_gbps"],
            "hosts_per_tor": CLUSTER["hosts_per_tor"], "tors": CLUSTER["tors"]}


def experiments(quick):
    """Every ratio x every channel count at load 0.8; the three loads on the
    thinnest fabric and on a production-like one (1:1, uplinks twice a NIC
    port), 16 channels."""
    if quick:
        return [("fabric", fabric(0.25, 2, 16), 0.8), ("fabric", fabric(2, 2, 16), 0.8)]
    ex = []
    for r in RATIOS:
        for c in CHANNELS:
            ex.append(("fabric", fabric(r, 2, c), 0.8))
    for f in (fabric(0.25, 2, 16), fabric(2, 1, 16)):
        for load in LOADS:
            if not (f["oversubscription"] == 2 and load == 0.8):  # in the grid
                ex.append(("load", f, load))
    return ex


def run_one(sim, f, load, seed, tmp):
    out = os.path.join(tmp, f"{f['name'].replace(' ', '_').replace(':', '-')}_l{load}_s{seed}.json")
    cmd = ["nice", "-n", "10", sim, "run", "--topo", "clos2", "--tors", str(f["tors"]),
           "--aggs", str(f["aggs"]), "--hosts-per-tor", str(f["hosts_per_tor"]),
           "--host-gbps", f"{f['nic_gbps']:g}", "--tor-gbps", f"{f['uplink_gbps']:g}",
           "--channels", str(f["channels"]), "--placement", CLUSTER["placement"],
           "--jobs", str(WORKLOAD["jobs"]), "--days", str(WORKLOAD["days"]),
           "--max-job-gpus", str(WORKLOAD["max_job_gpus"]), "--load", f"{load:g}",
           "--seed", str(seed), "--policy", ",".join(POLICIES), "--no-progress",
           "--json", out]
    if os.path.exists(out):  # a run kept from an interrupted sweep (--work)
        return read_runs(out)
    env = dict(os.environ)
    env.pop("CRUX_MAX_SLOWDOWN", None)
    env.pop("CRUX_LEVEL_WEIGHTS", None)
    p = subprocess.run(cmd[:-1] + [out + ".part"], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise SystemExit(f"sweep: {' '.join(cmd)} failed:\n{p.stderr}")
    os.rename(out + ".part", out)
    return read_runs(out)


def read_runs(out):
    with open(out) as fh:
        res = json.load(fh)
    runs = {}
    for r in res["runs"]:
        jct = sorted(x for x in r["job_jct_s"] if x is not None)
        runs[r["policy"]] = {
            "util": 100 * r["mean_gpu_util"], "busy_of_held": r["busy_of_held"],
            "jct_median_h": statistics.median(jct) / 3600 if jct else None,
            "jct_mean_h": r["mean_jct_s"] / 3600 if r["mean_jct_s"] is not None else None,
            "finished": r["finished"], "jobs": r["jobs"],
            "slowdown_p99": r["slowdown"]["p99"], "slowdown_max": r["slowdown"]["max"],
            "wall_s": r["wall_s"]}
    return runs


def med_range(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"median": round(statistics.median(xs), 4), "min": round(min(xs), 4),
            "max": round(max(xs), 4)}


def summarise(per_seed):
    """Medians over seeds: each policy's figures, Crux-full's gain over each baseline
    (per seed, then the median), and the diagnostic rows."""
    s = {"policies": {}, "crux_full_gain_pct": {}, "crux_full_busy_gain_pct": {},
         "crux_full_jct_median_change_pct": {}}
    for p in POLICIES:
        s["policies"][p] = {k: med_range([r[p][k] for r in per_seed])
                            for k in ("util", "busy_of_held", "jct_median_h", "slowdown_p99",
                                      "slowdown_max")}
    for b in BASELINES + DIAGS + ["crux-pa", "crux-ps-pa"]:
        s["crux_full_gain_pct"][b] = med_range(
            [100 * (r["crux-full"]["util"] / r[b]["util"] - 1) for r in per_seed])
        s["crux_full_busy_gain_pct"][b] = med_range(
            [100 * (r["crux-full"]["busy_of_held"] / r[b]["busy_of_held"] - 1) for r in per_seed])
        s["crux_full_jct_median_change_pct"][b] = med_range(
            [100 * (r["crux-full"]["jct_median_h"] / r[b]["jct_median_h"] - 1)
             for r in per_seed if r[b]["jct_median_h"]])
    return s


def plot(summary, path):
    """Gain of Crux-full over each baseline against the uplink:NIC ratio (load 0.8)."""
    tmp = tempfile.mkdtemp(prefix="crux-sweep-plot.")
    files = []
    for c in CHANNELS:
        rows = [e for e in summary if e["sweep"] == "fabric" and e["fabric"]["channels"] == c]
        if not rows:
            continue
        fn = os.path.join(tmp, f"ch{c}.dat")
        with open(fn, "w") as fh:
            fh.write("# ratio " + " ".join(f"{b}_med {b}_min {b}_max" for b in BASELINES) + "\n")
            for e in sorted(rows, key=lambda e: e["fabric"]["uplink_nic_ratio"]):
                g = e["summary"]["crux_full_gain_pct"]
                fh.write(f"{e['fabric']['uplink_nic_ratio']:g} " + " ".join(
                    f"{g[b]['median']} {g[b]['min']} {g[b]['max']}" for b in BASELINES) + "\n")
        files.append((c, fn))
    if not files:
        return
    gp = [f"set terminal pngcairo size {420 * len(files)},420 font ',9'",
          f"set output '{path}'", f"set multiplot layout 1,{len(files)} title "
          '"crux-sim: Crux-full utilisation gain over each baseline (median of 5 seeds, '
          'min-max bars; 2:1 Clos, 1,024 GPUs, offered load 0.8)"',
          "set logscale x 2", "set xrange [0.18:2.8]", "set xtics (0.25, 0.5, 1, 2)",
          "set xlabel 'uplink rate / NIC port rate'", "set ylabel 'gain (%)'", "set grid",
          "set key top right font ',8'"]
    for c, fn in files:
        parts = []
        for k, b in enumerate(BASELINES):
            col = 2 + 3 * k
            parts.append(f"'{fn}' using 1:{col}:{col + 1}:{col + 2} with yerrorlines "
                         f"title '{b}'")
        gp.append(f"set title '{c} channels per host pair'")
        gp.append("plot " + ", ".join(parts))
    gp.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(gp) + "\n", text=True, check=True)


def fmt(m, sign=True):
    if m is None:
        return "-"
    f = "{:+.1f}" if sign else "{:.1f}"
    return f"{f.format(m['median'])} [{f.format(m['min'])}, {f.format(m['max'])}]"


def tables(doc):
    """The README's tables (markdown), from a sweep JSON."""
    ex = doc["experiments"]
    names = {"ecmp": "ECMP", "sincronia": "Sincronia", "sincronia-lcp": "Sincronia-LCP",
             "taccl": "TACCL*", "cassini-lite": "CASSINI-lite",
             "cassini-lite-lcp": "CASSINI-lite-LCP"}
    out = ["Crux-full's utilisation gain over each baseline, %, median [min, max] over "
           f"{len(ex[0]['seeds'])} seeds (offered load 0.8, 2:1 Clos):", "",
           "| uplink:NIC | channels | Crux-full util % | " +
           " | ".join(names[b] for b in BASELINES) + " |",
           "|---|---|---|" + "---|" * len(BASELINES)]
    for e in ex:
        if e["sweep"] != "fabric":
            continue
        sm = e["summary"]
        out.append(f"| {e['fabric']['uplink_nic_ratio']:g} | {e['fabric']['channels']} | "
                   f"{fmt(sm['policies']['crux-full']['util'], False)} | " +
                   " | ".join(fmt(sm["crux_full_gain_pct"][b]) for b in BASELINES) + " |")
    out += ["", "By offered load (16 channels; the thin fabric is the grid's ratio-0.25 one; "
            "JCT: change of the median JCT against TACCL*, %):", "",
            "| fabric | load | Crux-full util % | busy/held | " +
            " | ".join(names[b] for b in BASELINES) + " | JCT vs TACCL* |",
            "|---|---|---|---|" + "---|" * len(BASELINES) + "---|"]
    rows = [e for e in ex if e["fabric"]["channels"] == 16 and
            (e["sweep"] == "load" or e["fabric"]["uplink_nic_ratio"] == 0.25)]
    for e in sorted(rows, key=lambda e: (e["fabric"]["oversubscription"] == 1, e["load"])):
        sm, f = e["summary"], e["fabric"]
        fab = (f"{f['oversubscription']:g}:1, {f['aggs']} x {f['uplink_gbps']:g}G "
               f"(ratio {f['uplink_nic_ratio']:g})")
        out.append(f"| {fab} | {e['load']:g} | {fmt(sm['policies']['crux-full']['util'], False)} | "
                   f"{sm['policies']['crux-full']['busy_of_held']['median']:.3f} | " +
                   " | ".join(fmt(sm["crux_full_gain_pct"][b]) for b in BASELINES) +
                   f" | {fmt(sm['crux_full_jct_median_change_pct']['taccl'])} |")
    out += ["", "Diagnostic rows (Crux-full's paths; its Max-K-Cut compression with a random "
            "or the reversed order, or one level): utilisation %, and Crux-full's gain over "
            "each, %, median [min, max]:", "",
            "| experiment | Crux-full | random order | reversed order | one level | "
            "vs random | vs reversed | vs one level |", "|---|---|---|---|---|---|---|---|"]
    for e in ex:
        sm, f = e["summary"], e["fabric"]
        out.append(f"| ratio {f['uplink_nic_ratio']:g}, {f['oversubscription']:g}:1, "
                   f"{f['channels']} ch, load {e['load']:g} | " +
                   " | ".join(fmt(sm["policies"][p]["util"], False) for p in
                              ("crux-full",) + tuple(DIAGS)) + " | " +
                   " | ".join(fmt(sm["crux_full_gain_pct"][d]) for d in DIAGS) + " |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--par", type=int, default=int(os.environ.get("CRUX_SIM_PAR", "2")))
    ap.add_argument("--out", default="bench/results/sim-sweep.json")
    ap.add_argument("--plot", default="bench/results/sim-sweep-ratio.png")
    ap.add_argument("--work", help="keep every run's crux-sim JSON here; runs already "
                    "there are reused (resume an interrupted sweep)")
    ap.add_argument("--quick", action="store_true",
                    help="2 fabrics x 1 load, for a smoke test")
    ap.add_argument("--tables", metavar="JSON",
                    help="print the README's tables from a sweep JSON and exit")
    a = ap.parse_args()
    if a.tables:
        with open(a.tables) as fh:
            print(tables(json.load(fh)))
        return
    sim = os.path.join(a.build, "sim/crux-sim")
    if not os.access(sim, os.X_OK):
        raise SystemExit(f"sweep: {sim} not found; build first (meson compile -C {a.build})")
    if a.seeds < 1 or a.par < 1:
        raise SystemExit("sweep: --seeds and --par must be at least 1")
    ex = experiments(a.quick)
    seeds = list(range(1, a.seeds + 1))
    tmp = a.work or tempfile.mkdtemp(prefix="crux-sweep.")
    os.makedirs(tmp, exist_ok=True)
    jobs = [(i, f, load, s) for i, (_, f, load) in enumerate(ex) for s in seeds]
    jobs.sort(key=lambda j: j[1]["channels"] == 64)  # the longest runs last
    results = {}
    with ThreadPoolExecutor(max_workers=a.par) as pool:
        futs = {pool.submit(run_one, sim, f, load, s, tmp): (i, s) for i, f, load, s in jobs}
        for n, fut in enumerate(futs, 1):
            results[futs[fut]] = fut.result()
            print(f"sweep: {n}/{len(jobs)} runs", file=sys.stderr)
    out = []
    for i, (kind, f, load) in enumerate(ex):
        per_seed = [results[(i, s)] for s in seeds]
        out.append({"sweep": kind, "fabric": f, "load": load, "seeds": seeds,
                    "per_seed": per_seed, "summary": summarise(per_seed)})
        g = out[-1]["summary"]["crux_full_gain_pct"]
        print(f"{f['name']:>22} load {load:g}: Crux-full vs " + ", ".join(
            f"{b} {g[b]['median']:+.1f}% [{g[b]['min']:+.1f}, {g[b]['max']:+.1f}]"
            for b in BASELINES))
    doc = {
        "benchmark": "sim-sweep",
        "command": "python3 sim/sweep.py build --seeds %d" % a.seeds,
        "cluster": CLUSTER, "workload": WORKLOAD,
        "model": "crux-sim, phase-aware evaluator (default), K = 8, every run to completion",
        "metrics": {
            "util": "mean cluster GPU utilisation over [0, last arrival], %",
            "busy_of_held": "compute-busy GPU time / GPU time held by running jobs",
            "crux_full_gain_pct": "per seed 100 (util(crux-full) / util(baseline) - 1), "
                                  "median and range over seeds",
            "diagnostics": "crux_full_gain_pct over crux-random-order, crux-reversed-order "
                           "and crux-one-level (Crux-full's paths; its compression with a "
                           "random or reversed order, or one level)"},
        "policies": POLICIES, "baselines": BASELINES,
        "experiments": out}
    with open(a.out, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    print(tables(doc))
    print(f"json: {a.out}")
    if a.plot:
        plot(out, a.plot)
        print(f"plot: {a.plot}")


if __name__ == "__main__":
    main()
