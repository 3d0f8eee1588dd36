#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The testbed scenario described to the scheduling model, against the testbed.

predict.py --build BUILD [--measured FILE] [--scenario NAME] [--seeds N]
           [--phases N] [--applied-levels] [--per-run-paths [--path-windows]] [--out FILE]
           [--verdict [--check]]

Reads the scenario from `bench/testbed/run.sh --print-scenario` (fabric, levels,
weights, fairness bound, jobs and their hosts in ring order) and the emulated
models from `crux-tb-trainer --help` (compute per iteration, gradient bytes),
writes the same fabric and jobs as a crux-plan topology and jobs file, and runs
crux-plan for each arm of the testbed with the reference model on:

  none   --policy ecmp, one level           (no scheduling: default class, ECMP)
  crux   --policy crux --ecmp-paths         (cruxd without probing: it plans Crux-full,
                                             levels by Max-K-Cut, but its routes carry
                                             no ports, so the flows stay on ECMP paths)
  paths  --policy crux, K levels            (priorities and chosen paths)

The levels are the planner's own (a prediction made before the runs). With
--applied-levels they are those the agents applied, from the level logs of the
result file's run directories (cruxd logs every level change; levels.py): the
model runs once per level assignment the runs held (--levels-given), profiling
included (every job on the top level), and weighs each by the time the runs
spent in it over the analysis window (utilisation: time-weighted; iteration
time: the mean over the iterations, 1 / sum(share / iteration time)): the
model's error with the stack's decisions given, the planner's noise apart.
It also prints, per level assignment, each job's iterations that ran wholly
under it (median, count) beside the model's run of that assignment: where the
mix's error comes from.

With --per-run-paths --path-windows a run is modelled on the spines of each of
its 5-second windows in turn (paths-windows.txt: per window, each flow's spine
by its bytes there), the figures mixed by the bytes sent in them: a paths run
whose agent moved flows between spines as it re-planned.

With --per-run-paths each measured run is modelled once, on the spines its
connections took (run.sh records them: sockpaths.py, the run's paths.txt; per
flow the spine that carried most of its bytes, crux-plan --paths-given; a flow
with under --min-path-share of its bytes on that spine keeps the plan's path), and,
with --applied-levels, on that run's own level assignments; the prediction is
the median over the runs, and every run is also compared with its own model
(`per_run`): what is left once the ECMP draw is the run's, not a sample.

each with the testbed's level weights (HTB guaranteed shares) and fairness bound,
over N ECMP seeds (the testbed hashes source ports: its paths are a draw too;
default 64: a job's figure over the draws is often two-humped, its flows
collide on a spine or not, and the GPT-like job's none-arm median moved by
up to 12 % between 16, 32 and 64 seeds, by 0.1 % from 64 to 100).
A measured figure is the median over the arm's N runs, each on its own draw, so
the prediction is the model's expected median of N draws (resampled from its
seeds; with the 5th-95th percentiles of that median), for the reference model
and for the planner's own evaluator. Against the measured medians of a testbed
result file (run.sh's JSON), it prints and writes per arm the cluster GPU
utilisation and per job the iteration time: predicted, measured, error, and
whether the prediction is within +-10 %. Exit status 0 when it ran (the
comparison is a measurement, not a test); 2 on bad input.

--verdict ends the output with one line (make demo's last line): per goal of the
testbed, met or not, and how far the measured figure is from the model's:
  utilisation >= +10 % over none (the best Crux arm); the high-intensity job's
  JCT <= -20 % (the best Crux arm); the paths arm >= the priorities arm where
  the model says paths matter (its paths arm predicted > 2 % above its crux
  arm); the reference model within +-10 % of every arm's utilisation. That
  last goal is judged on the model as the runs ran (each run on its own spines
  and the agents' levels, as --per-run-paths --applied-levels; window by window
  with --path-windows) where the run
  directories recorded them (run.sh does since 2026-11-27), with the a-priori
  errors beside it; else a priori, saying why.
--check: exit 1 when a goal is missed (make demo CHECK=1).
"""
import argparse
import glob
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOL = 0.10
# Bytes each sending flow keeps queued at a shared bottleneck on fabric.sh's
# default stack (GSO <= 8 kB, window clamp 10 segments), when the result file's
# run directories do not say (run.sh samples the leaves' uplink queues in every
# run: run-*/queues-mean.txt): the none arm's median uplink backlog over the
# flows sending at a time, 5 runs of the default scenario (README, "Calibration";
# 54,254 bytes over 8.8 of its 12 crossing flows).
STANDING_DEFAULT = 6148.0


def die(msg):
    print(f"predict.py: {msg}", file=sys.stderr)
    sys.exit(2)


def scenario(name):
    try:
        out = subprocess.run(["bash", os.path.join(HERE, "run.sh"), "--scenario", name, "--print-scenario"],
                             capture_output=True, text=True, check=True).stdout
    except subprocess.CalledProcessError as e:
        die(f"run.sh --print-scenario failed: {e.stderr.strip()}")
    sc = {"jobs": []}
    for line in out.splitlines():
        key, _, rest = line.partition(" ")
        if key == "job":
            name_, model, role, iters, hosts = rest.split()
            sc["jobs"].append({"name": name_, "model": model, "role": role, "iters": int(iters),
                               "hosts": hosts.split(",")})
        elif key == "fabric":
            a = rest.split()
            sc["fabric"] = {a[i][2:]: int(a[i + 1]) for i in range(0, len(a), 2)}
        elif key in ("levels",):
            sc[key] = int(rest)
        elif key == "weights":
            sc[key] = [int(w) for w in rest.split()]
        elif key == "max_slowdown":
            sc[key] = float(rest)
        elif key == "cwnd":
            sc[key] = int(rest)
        elif key == "profile_window":
            sc[key] = float(rest)
    return sc


def models(build):
    exe = os.path.join(build, "bench", "testbed", "crux-tb-trainer")
    try:
        out = subprocess.run([exe, "--help"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        die(f"{exe}: {e} (build the testbed first: meson compile -C {build})")
    m = {}
    for line in out.splitlines():
        r = re.match(r"\s+(\w+)\s+compute\s+([0-9.]+) ms, gradient\s+([0-9.]+) MB in (\d+) bucket", line)
        if r:
            m[r.group(1)] = {"compute_s": float(r.group(2)) / 1000, "grad_bytes": float(r.group(3)) * (1 << 20),
                             "buckets": int(r.group(4))}
    if not m:
        die(f"no model in '{exe} --help'")
    return m


def cross_leaf_flows(sc):
    """Per job, its ring hops (one TCP flow each) whose ends sit on different leaves."""
    hpl = sc["fabric"]["hosts-per-leaf"]
    n = {}
    for job in sc["jobs"]:
        h = [int(x[1:]) for x in job["hosts"]]
        n[job["name"]] = sum(1 for i in range(len(h)) if h[i] // hpl != h[(i + 1) % len(h)] // hpl) \
            if len(h) > 1 else 0
    return n


def active_cross_flows(a, sc, mods):
    """The mean number of flows crossing the spines that are sending at a time in the
    none arm: a job's flows send only in its communication phase, a share 1 - compute /
    iteration of its time (the fluid model's none arm, median over seeds 1..4)."""
    cross = cross_leaf_flows(sc)
    comp = {j["name"]: mods[j["model"]]["compute_s"] for j in sc["jobs"]}
    vals = []
    with tempfile.TemporaryDirectory() as d:
        ids = write_inputs(sc, mods, d)[2]
        for seed in range(1, 5):
            run = plan_arm(a.build, sc, mods, d, "none", seed, a.phases, 0.0)
            vals.append(sum(cross[ids[j["id"]]] * max(1.0 - comp[ids[j["id"]]] / j["ref_iter_time"], 0.0)
                            for j in run["jobs"]))
    return statistics.median(vals)


def measured_standing(measured_path, sc, active):
    """The standing queue per sending flow from the none arm's sampled uplink queues,
    when the result file sits in run.sh's output directory; None otherwise. The
    samples average over time, idle flows included: the backlog is divided by the
    flows sending at a time (`active`), not by every flow crossing the spines."""
    vals = []
    for f in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(measured_path)),
                                           "run-none-*", "queues-mean.txt"))):
        r = re.search(r": (\d+) \(", open(f).read())
        if r:
            vals.append(float(r.group(1)))
    flows = sum(cross_leaf_flows(sc).values())
    if not vals or flows == 0 or active <= 0:
        return None
    return statistics.median(vals) / active, (f"{len(vals)} none-arm runs' uplink queues over {active:.1f} of "
                                              f"{flows} flows sending at a time")


def ring_steps(mo, n):
    """Sequential ring steps per iteration: 2(n-1) per bucket (reduce-scatter + all-gather)."""
    return mo["buckets"] * 2 * (n - 1) if n > 1 else 0


def write_inputs(sc, mods, d, extra=None):
    f = sc["fabric"]
    leaves, hpl, spines = f["leaves"], f["hosts-per-leaf"], f["spines"]
    host_g, spine_g = f["host-rate"] / 1000.0, f["spine-rate"] / 1000.0
    topo = os.path.join(d, "testbed.topo")
    jobs = os.path.join(d, "testbed.jobs")
    with open(topo, "w") as t:
        t.write("# the testbed's fabric (bench/testbed/fabric.sh), rates in Gbit/s\n")
        for s in range(spines):
            t.write(f"switch s{s}\n")
        for l in range(leaves):
            t.write(f"switch l{l}\n")
        for l in range(leaves):
            for h in range(hpl):
                i = l * hpl + h
                t.write(f"host h{i}\nlink h{i} l{l} {host_g:g}\n")
            for s in range(spines):
                t.write(f"link l{l} s{s} {spine_g:g}\n")
    ids = {}
    with open(jobs, "w") as j:
        j.write("# the testbed's jobs: compute then a ring all-reduce of the gradient, no overlap\n")
        for k, job in enumerate(sc["jobs"], start=1):
            mo = mods.get(job["model"])
            if mo is None:
                die(f"scenario job {job['name']}: model {job['model']} unknown to crux-tb-trainer")
            ids[k] = job["name"]
            n = len(job["hosts"])
            # compute = time per iteration off the wire: the GPU's compute plus the ring steps'
            # queueing latency (queue_latency); work = GPU-busy time, what utilisation counts
            lat = (extra or {}).get(job["name"], 0.0)
            j.write(f"job {k} hosts={','.join(job['hosts'])} gpus={n} "
                    f"compute={mo['compute_s'] + lat:g} work={n * mo['compute_s']:g} overlap=0 "
                    f"allreduce={mo['grad_bytes']:.0f} steps={max(ring_steps(mo, n), 1)}\n")
    return topo, jobs, ids


def queue_latency(sc, mods, run, ids, standing):
    """Per job, the queueing latency of its ring steps in one iteration (seconds).

    A ring step cannot start before the previous one's last byte has arrived, so
    every step waits once behind what the other flows of its class keep queued at
    the bottleneck; a fluid model has no such wait. With `standing` bytes queued per
    flow (TCP's standing queue: a property of the stack, measured), a step waits
    (k-1) x standing / C for k flows of its class sharing C, i.e. about
    standing / r at the flow's own rate r = C / k. Over a job's steps that is its
    fluid communication time x standing / (bytes per step). A job alone on its
    level (Crux's top level) shares no queue and waits for nothing."""
    by_name = {j["name"]: j for j in sc["jobs"]}
    level_count = {}
    for j in run["jobs"]:
        level_count[j["level"]] = level_count.get(j["level"], 0) + 1
    lat = {}
    for j in run["jobs"]:
        job = by_name[ids[j["id"]]]
        mo = mods[job["model"]]
        n = len(job["hosts"])
        steps = ring_steps(mo, n)
        if steps == 0 or level_count[j["level"]] < 2:
            continue
        step_bytes = mo["grad_bytes"] * 2 * (n - 1) / n / steps
        comm = max(j["ref_iter_time"] - mo["compute_s"] - lat.get(job["name"], 0.0), 0.0)
        lat[job["name"]] = comm * standing / step_bytes
    return lat


def plan_arm(build, sc, mods, d, arm, seed, phases, standing, given=None, paths=None):
    """crux-plan for one arm and seed; with `standing` > 0 a second pass adds the
    ring steps' queueing latency found from the first pass's rates. `given`:
    {job name: level} the agents applied, in place of the planner's; `paths`:
    [(job name, src, dst, spine)] the spines a run's connections took."""
    topo, jobs, ids = write_inputs(sc, mods, d)
    args = arm_args(arm, sc)
    num = {v: k for k, v in ids.items()}
    if given:
        args = args + ["--levels-given", ",".join(f"{num[n]}={lv}" for n, lv in sorted(given.items()))]
    if paths:
        args = args + ["--paths-given", ",".join(f"{num[n]}:{a}:{b}:{sp}" for n, a, b, sp in paths)]
    run = plan(build, topo, jobs, args, seed, phases)
    lat = {}
    if standing > 0:
        lat = queue_latency(sc, mods, run, ids, standing)
        topo, jobs, ids = write_inputs(sc, mods, d, lat)
        run = plan(build, topo, jobs, args, seed, phases)
    for j in run["jobs"]:
        j["queue_latency_s"] = lat.get(ids[j["id"]], 0.0)
    return run


def applied_levels(measured_path, sc, arm, step=0.05, samples=None, runs=None):
    """{level assignment (sorted (job, level) pairs): seconds} over the analysis
    windows of the arm's runs beside the result file (every job past its first
    iteration until the first job ends, as crux-tb-analyze), from the agents'
    level logs; a job still profiling (or not yet in the table) sits on the top
    level. None when the runs or their level logs are not there. `samples`, when
    given, receives {(assignment, job): [iteration time]} for every iteration
    that starts in the window and runs under one assignment throughout: what
    the model's run of that assignment predicts, measured."""
    sys.path.insert(0, HERE)
    import levels  # noqa: E402 (bench/testbed/levels.py: the same parsers)
    top = sc["levels"] - 1
    names = [j["name"] for j in sc["jobs"]]
    tally = {}
    for run in runs or arm_runs(measured_path, arm):
        log = next((p for p in (os.path.join(run, "cruxd.log"), os.path.join(run, "cruxd-h0.log"))
                    if os.path.exists(p)), None)
        if log is None:
            return None
        tl = levels.timeline(log)
        if not tl:
            return None
        try:
            its = {n: levels.iterations(os.path.join(run, "logs", f"{n}-r0.log"), strict=True) for n in names}
        except (OSError, ValueError):
            return None
        if any(not v for v in its.values()):
            return None

        def cfg_at(t):
            cfg = []
            for n in names:
                st = levels.level_at(tl.get(n, []), t)
                cfg.append((n, top if st is None or st[1] else st[0]))
            return tuple(cfg)
        a = max(v[0][1] for v in its.values())
        b = min(v[-1][1] for v in its.values())
        t = a
        while t < b:
            cfg = cfg_at(t)
            tally[cfg] = tally.get(cfg, 0.0) + step
            t += step
        if samples is None:
            continue
        for n in names:
            for s, e in its[n]:
                if not a <= s < b:
                    continue
                c = cfg_at(s)
                if all(cfg_at(u) == c for u in frange(s, e, step)) and cfg_at(e) == c:
                    samples.setdefault((c, n), []).append(e - s)
    return tally or None


def arm_runs(measured_path, arm):
    """The arm's run directories beside the result file, in run order (run-ARM-1, -2, ...)."""
    def rep(p):
        tail = p.rsplit("-", 1)[-1]
        return (0, int(tail)) if tail.isdigit() else (1, 0)
    return sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(measured_path)), f"run-{arm}-*")),
                  key=lambda p: (rep(p), p))


def table_rows(path, n):
    """The rows of n fields of one of sockpaths.py's tables, its comments left out."""
    with open(path) as fp:
        for line in fp:
            p = line.split()
            if not line.startswith("#") and len(p) == n:
                yield p


def fabric_host(addr, hpl):
    """A host's name from its fabric address (fabric.sh: host h of leaf l at 198.18.l.(4h + 2))."""
    o = addr.split(".")
    return f"h{int(o[2]) * hpl + (int(o[3]) - 2) // 4}"


def run_paths(run_dir, sc, min_share=0.0):
    """The spines one run's connections took (its paths.txt, written by sockpaths.py):
    per job and cross-leaf flow (ring order: each rank to the next), the spine that
    carried most of the flow's bytes, as [(job, src, dst, spine)], and the least
    share of a flow's bytes on its spine (a paths-arm flow moves when cruxd rebinds
    its port; the model keeps one path). None without the file or a flow's bytes."""
    f = sc["fabric"]
    hpl = f["hosts-per-leaf"]
    by = {}
    try:
        for p in table_rows(os.path.join(run_dir, "paths.txt"), 8):
            k = (p[0], fabric_host(p[2], hpl), fabric_host(p[3], hpl))
            by.setdefault(k, {}).setdefault(p[6], 0)
            by[k][p[6]] += int(p[7])
    except (OSError, ValueError, IndexError):
        return None
    out, least = [], 1.0
    leaf = {f"h{i}": i // hpl for i in range(f["leaves"] * hpl)}
    for job in sc["jobs"]:
        hs = job["hosts"]
        for r in range(len(hs)):
            a, b = hs[r], hs[(r + 1) % len(hs)]
            if a == b or leaf[a] == leaf[b]:
                continue
            sp = by.get((job["name"], a, b))
            if not sp or not sum(sp.values()):
                return None
            best = max(sp, key=sp.get)
            share = sp[best] / sum(sp.values())
            least = min(least, share)
            if share >= min_share:
                out.append((job["name"], a, b, best))
    return out, least


def run_path_windows(run_dir, sc, whole, most=8):
    """The spines one run's flows took window by window (paths-windows.txt, written
    by sockpaths.py: each 5-second snapshot's bytes per socket): per window, each
    cross-leaf flow on the spine that carried most of its bytes in it (a flow silent
    in a window: the spine of `whole`, run_paths' answer for the run, else the plan's),
    windows holding the same spines merged, as [(share of the bytes, [(job, src, dst,
    spine)])], the `most` largest, shares summing to 1. None without the file."""
    hpl = sc["fabric"]["hosts-per-leaf"]
    by, tot = {}, {}
    try:
        for p in table_rows(os.path.join(run_dir, "paths-windows.txt"), 9):
            w, k, b = int(p[0]), (p[1], fabric_host(p[3], hpl), fabric_host(p[4], hpl)), int(p[8])
            by.setdefault(w, {}).setdefault(k, {}).setdefault(p[7], 0)
            by[w][k][p[7]] += b
            tot[w] = tot.get(w, 0) + b
    except (OSError, ValueError, IndexError):
        return None
    base = {(n, x, y): sp for n, x, y, sp in (whole[0] if whole else [])}
    flows = list(base)
    groups = {}
    for w, ks in by.items():
        if not tot[w]:
            continue
        asg = []
        for k in flows:
            sp = ks.get(k)
            asg.append((*k, max(sp, key=sp.get) if sp else base[k]))
        key = tuple(asg)
        groups[key] = groups.get(key, 0) + tot[w]
    if not groups:
        return None
    best = sorted(groups.items(), key=lambda x: -x[1])[:most]
    total = sum(v for _, v in best)
    return [(v / total, list(k)) for k, v in best]


def model_spines(run, ids):
    """The spine of every cross-leaf flow in a crux-plan run's paths (what the model ran)."""
    out = {}
    for j in run.get("jobs", []):
        for p in j.get("paths", []):
            sp = [h for h in p.get("hops", []) if re.fullmatch(r"s\d+", h)]
            if sp:
                out[f"{ids[j['id']]} {p['src']}>{p['dst']}"] = sp[0]
    return out


def frange(a, b, step):
    while a < b:
        yield a
        a += step


def mix_runs(parts):
    """Per-level-assignment predictions [(share, run)] -> one run-like dict:
    utilisation by time, each job's iteration time as the mean over iterations; the
    levels those of the largest share."""
    first = max(parts, key=lambda x: x[0])[1]
    out = {"ref_model": {"gpu_util": sum(w * r["ref_model"]["gpu_util"] for w, r in parts)},
           "gpu_util": sum(w * r["gpu_util"] for w, r in parts), "jobs": []}
    for j in first["jobs"]:
        js = [(w, next(x for x in r["jobs"] if x["id"] == j["id"])) for w, r in parts]
        out["jobs"].append({"id": j["id"], "level": j["level"], "paths": j.get("paths", []),
                            "ref_iter_time": 1.0 / sum(w / x["ref_iter_time"] for w, x in js),
                            "iter_time": 1.0 / sum(w / x["iter_time"] for w, x in js),
                            "queue_latency_s": sum(w * x["queue_latency_s"] for w, x in js)})
    return out


def profiling_share(sc, prof, planned, ids):
    """The share of the analysis window (every job past its first iteration until the
    first job ends) during which the agent still profiles every job on the top level:
    the jobs start together and each is decided a profiling window after its start
    (levels.py on the mix runs: 4.5-5.5 s after its first iteration, 4-13 % of the
    window). `prof`, `planned`: the arm's runs with every job on the top level and on
    the planned levels."""
    w = sc.get("profile_window", 0.0)
    iters = {j["name"]: j["iters"] for j in sc["jobs"]}
    tp = {ids[j["id"]]: j["ref_iter_time"] for j in prof["jobs"]}
    td = {ids[j["id"]]: j["ref_iter_time"] for j in planned["jobs"]}
    start = max(tp.values())
    end = min(min(w / tp[n], iters[n]) * tp[n] + max(iters[n] - w / tp[n], 0) * td[n] for n in tp)
    return min(max(w - start, 0.0) / (end - start), 1.0) if end > start else 0.0


def predict_arm(a, sc, mods, d, arm, seed, tally, paths=None):
    """One seed's prediction of an arm: on the levels the runs held (tally), else the
    planner's, after the profiling window (every job on the top level) where it
    reaches into the analysis window. `paths`: one run's spines (run_paths)."""
    if not tally:
        run = plan_arm(a.build, sc, mods, d, arm, seed, a.phases, a.standing_bytes, paths=paths)
        if arm == "none" or not sc.get("profile_window"):
            return run
        ids = write_inputs(sc, mods, d)[2]
        top = {j["name"]: sc["levels"] - 1 for j in sc["jobs"]}
        prof = plan_arm(a.build, sc, mods, d, arm, seed, a.phases, a.standing_bytes, top, paths)
        p = profiling_share(sc, prof, run, ids)
        out = mix_runs([(p, prof), (1.0 - p, run)]) if p > 0 else run
        out["profiling_share"] = p
        return out
    total = sum(tally.values())
    cfgs = list(tally)
    parts = [(tally[cfg] / total, plan_arm(a.build, sc, mods, d, arm, seed, a.phases, a.standing_bytes, dict(cfg),
                                           paths))
             for cfg in cfgs]
    out = mix_runs(parts)
    out["configs"] = {cfg: {j["id"]: j["ref_iter_time"] for j in r["jobs"]} for cfg, (_, r) in zip(cfgs, parts)}
    return out


def plan(build, topo, jobs, args, seed, phases):
    exe = os.path.join(build, "agent", "sched", "crux-plan")
    cmd = [exe, "--topology", topo, "--jobs", jobs, "--seed", str(seed), "--reference",
           "--ref-phases", str(phases), "--json"] + args
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        die(f"{' '.join(cmd)}: {getattr(e, 'stderr', '') or e}")
    return json.loads(out)


def arm_args(arm, sc):
    w = ",".join(str(x) for x in sc.get("weights", []))
    common = ["--levels", str(sc["levels"])] + (["--level-weights", w] if w else []) + \
        (["--max-slowdown", f"{sc['max_slowdown']:g}"] if sc.get("max_slowdown", 0) > 0 else []) + \
        (["--guard-refine"] if sc.get("guard_refine") else [])
    if arm == "none":
        return ["--policy", "ecmp", "--levels", "1"]
    if arm == "crux":
        return ["--policy", "crux", "--ecmp-paths"] + common
    return ["--policy", "crux"] + common


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def median_of_runs(xs, n, draws=4000):
    """What the model predicts for a median over n runs, each on its own ECMP draw:
    the mean, over resamples of n of the model's draws (with replacement), of their
    median, and the 5th and 95th percentiles of that median. A job's figure over
    the draws is often two-humped (its flows collide on a spine or not), and the
    plain median of such a pool jumps between the humps with the set of seeds."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None, None
    rng = random.Random(0)
    ms = sorted(statistics.median(rng.choices(xs, k=n)) for _ in range(draws))
    return statistics.fmean(ms), ms[int(0.05 * draws)], ms[int(0.95 * draws) - 1]


def err(pred, meas):
    if pred is None or meas in (None, 0):
        return None
    return pred / meas - 1.0


class Missing(Exception):
    """The run directories lack what a comparison needs (the message says what)."""


def compare(a, sc, mods, measured, arms, per_run_paths, applied_on, windows=False):
    """The model against the measured medians, per arm and job: on ECMP draws and the
    planner's levels, or (per_run_paths) each run on its own spines and (applied_on)
    the agents' levels; with `windows`, each run on the spines of each of its
    5-second windows in turn (weighed by the bytes sent in them). Returns (rows,
    applied, flow_share, inputs)."""
    rows = {"arms": {}, "jobs": {}, "path_windows": bool(per_run_paths and windows)}
    applied, flow_share = {}, {}

    def central(xs, n):
        """The model's median of n runs: per run on its own spines (--per-run-paths;
        range: the runs' least and most), else resampled from the ECMP draws."""
        if not per_run_paths:
            return median_of_runs(xs, n)
        xs = [x for x in xs if x is not None]
        return (med(xs), min(xs), max(xs)) if xs else (None, None, None)
    with tempfile.TemporaryDirectory() as d:
        topo, jobs, ids = write_inputs(sc, mods, d)
        inputs = {"topology": open(topo).read(), "jobs": open(jobs).read()}
        for arm in arms:
            samples = {}
            tally = applied_levels(a.measured, sc, arm, samples=samples) \
                if arm != "none" and applied_on else None
            if applied_on and arm != "none" and not tally:
                raise Missing(f"--applied-levels: no level log for every run-{arm}-* beside {a.measured} "
                              "(cruxd.log or cruxd-h0.log with level lines, trainer logs with realtime_offset_ns)")
            if per_run_paths:
                runs, least = [], 1.0
                for k, rd in enumerate(arm_runs(a.measured, arm), start=1):
                    got = run_paths(rd, sc, a.min_path_share)
                    if not got:
                        raise Missing(f"--per-run-paths: {rd} has no paths.txt with every cross-leaf flow "
                            "(run.sh writes it with sockpaths.py since 2026-11-27: rerun the set)")
                    # with --applied-levels: this run's own level assignments
                    own = applied_levels(a.measured, sc, arm, runs=[rd]) if tally else None
                    win = run_path_windows(rd, sc, run_paths(rd, sc, 0.0)) if windows else None
                    if windows and not win:
                        raise Missing(f"--path-windows: {rd} has no paths-windows.txt (sockpaths.py writes it "
                                      "since 2026-11-27, second session: rerun the set)")
                    if win:
                        # each set of spines the run's windows held, by the bytes sent in them
                        parts = [(w, predict_arm(a, sc, mods, d, arm, k, own, asg)) for w, asg in win]
                        runs.append(mix_runs(parts))
                        top = max(parts, key=lambda x: x[0])[1]
                        if "configs" in top:
                            runs[-1]["configs"] = top["configs"]
                        runs[-1]["path_windows"] = [{"share": w, "spines": {f"{n} {x}>{y}": sp
                                                                            for n, x, y, sp in asg}}
                                                    for w, asg in win]
                    else:
                        runs.append(predict_arm(a, sc, mods, d, arm, k, own, got[0]))
                    runs[-1]["paths_given"] = [list(x) for x in got[0]]
                    runs[-1]["model_spines"] = model_spines(runs[-1], ids)
                    least = min(least, got[1])
                if not runs:
                    raise Missing(f"--per-run-paths: no run-{arm}-* directory beside {a.measured}")
                flow_share[arm] = least
            else:
                runs = [predict_arm(a, sc, mods, d, arm, s, tally) for s in range(1, a.seeds + 1)]
            if tally:
                total = sum(tally.values())
                # (per run on its own paths, a run models only the assignments it held)
                applied[arm] = [{"levels": dict(cfg), "share": sec / total,
                                 "jobs": {ids[i]: {"reference_iter_s": med([r["configs"].get(cfg, {}).get(i)
                                                                            for r in runs]),
                                                   "measured_iter_s": med(samples.get((cfg, ids[i]), [])),
                                                   "measured_iterations": len(samples.get((cfg, ids[i]), []))}
                                          for i in next(r["configs"][cfg] for r in runs if cfg in r["configs"])}}
                                for cfg, sec in sorted(tally.items(), key=lambda x: -x[1])]
            m = measured["arms"][arm]
            nm = len(m["cluster_gpu_utilization"]["runs"])
            ref_u, lo_u, hi_u = central([r["ref_model"]["gpu_util"] for r in runs], nm)
            ev_u = central([r["gpu_util"] for r in runs], nm)[0]
            mu = med(m["cluster_gpu_utilization"]["runs"])
            rows["arms"][arm] = {"measured_util": mu, "measured_runs": nm,
                                 "reference_util": ref_u, "evaluator_util": ev_u,
                                 "reference_util_median_p5_p95": [lo_u, hi_u],
                                 "reference_util_median_of_draws": med([r["ref_model"]["gpu_util"] for r in runs]),
                                 "reference_error": err(ref_u, mu), "evaluator_error": err(ev_u, mu),
                                 "reference_within_10pct": err(ref_u, mu) is not None and abs(err(ref_u, mu)) <= TOL,
                                 "levels_source": "applied" if arm in applied else "planned",
                                 "profiling_share": med([r.get("profiling_share") for r in runs]),
                                 "levels": {ids[j["id"]]: sorted({jj["level"] for r2 in runs for jj in r2["jobs"]
                                                                  if jj["id"] == j["id"]})
                                            for j in runs[0]["jobs"]}}
            if per_run_paths:
                # Run by run: the model on a run's own spines against that run.
                mr = m["cluster_gpu_utilization"]["runs"]
                pr = [{"measured_util": x, "reference_util": r["ref_model"]["gpu_util"],
                       "reference_error": err(r["ref_model"]["gpu_util"], x),
                       "spines": {f"{n} {a_}>{b_}": sp for n, a_, b_, sp in r["paths_given"]},
                       "model_spines": r.get("model_spines", {}),
                       "path_windows": r.get("path_windows"),
                       "jobs": {ids[jj["id"]]: {"reference_iter_s": jj["ref_iter_time"],
                                                "measured_iter_s": (m["jobs"].get(ids[jj["id"]], {})
                                                                    .get("iter_time_s", {}).get("runs") or
                                                                    [None] * len(runs))[k]}
                                for jj in r["jobs"]}}
                      for k, (x, r) in enumerate(zip(mr, runs))]
                rows["arms"][arm]["per_run"] = pr
                rows["arms"][arm]["least_flow_share_on_its_spine"] = flow_share.get(arm)
            if arm in applied:
                rows["arms"][arm]["levels"] = {n: sorted({c["levels"][n] for c in applied[arm]})
                                               for n in applied[arm][0]["levels"]}
                rows["arms"][arm]["levels_applied"] = applied[arm]
            for j in runs[0]["jobs"]:
                name = ids[j["id"]]
                mj = m["jobs"].get(name)
                if not mj:
                    continue
                pool = [jj["ref_iter_time"] for r in runs for jj in r["jobs"] if jj["id"] == j["id"]]
                nj = len(mj["iter_time_s"]["runs"])
                ref_t, lo_t, hi_t = central(pool, nj)
                ev_t = central([jj["iter_time"] for r in runs for jj in r["jobs"] if jj["id"] == j["id"]],
                               nj)[0]
                mt = med(mj["iter_time_s"]["runs"])
                lat = med([jj["queue_latency_s"] for r in runs for jj in r["jobs"] if jj["id"] == j["id"]])
                rows["jobs"].setdefault(name, {})[arm] = {
                    "measured_iter_s": mt, "reference_iter_s": ref_t, "evaluator_iter_s": ev_t,
                    "reference_iter_s_median_p5_p95": [lo_t, hi_t], "reference_iter_s_median_of_draws": med(pool),
                    "queue_latency_s": lat,
                    "reference_error": err(ref_t, mt), "evaluator_error": err(ev_t, mt),
                    "reference_within_10pct": err(ref_t, mt) is not None and abs(err(ref_t, mt)) <= TOL}
    return rows, applied, flow_share, inputs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--measured", default=os.path.join(HERE, "..", "results", "testbed.json"))
    ap.add_argument("--scenario", default="default")
    ap.add_argument("--seeds", type=int, default=64)
    ap.add_argument("--phases", type=int, default=4)
    ap.add_argument("--standing-bytes", type=float, default=-1,
                    help="bytes each flow keeps queued at a shared bottleneck (default: measured by the runs "
                         "of --measured when their directories are there, else the stack's measured value; "
                         "0: a pure fluid model)")
    ap.add_argument("--guard-refine", action="store_true",
                    help="the Crux arms' plans with crux-plan --guard-refine (the refinement again after "
                         "the fairness guard; cruxd does not run it)")
    ap.add_argument("--applied-levels", action="store_true",
                    help="the levels the agents applied (the level logs of the runs beside --measured), "
                         "not the planner's")
    ap.add_argument("--per-run-paths", action="store_true",
                    help="model each measured run once, on the spines its connections took (paths.txt in "
                         "its run directory, run.sh writes it), not on --seeds ECMP draws; the prediction "
                         "is the median over those runs")
    ap.add_argument("--path-windows", action="store_true",
                    help="with --per-run-paths: each run on the spines of each of its 5-second windows in turn "
                         "(paths-windows.txt; sockpaths.py writes it), weighed by the bytes sent in them, not on "
                         "one spine per flow for the whole run")
    ap.add_argument("--min-path-share", type=float, default=0.9,
                    help="with --per-run-paths, a flow keeps the plan's path unless one spine carried at least "
                         "this share of its bytes (default 0.9: in a paths run cruxd moves flows between spines as "
                         "it re-plans; one spine per flow describes such a flow worse than the plan does)")
    ap.add_argument("--out", default="")
    ap.add_argument("--verdict", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--predict-only", action="store_true",
                    help="no measured file: print the model's figures per arm and its predicted gains")
    a = ap.parse_args()
    if not 1 <= a.seeds <= 100:
        die(f"--seeds {a.seeds}: expected 1..100")
    if a.path_windows and not a.per_run_paths:
        die("--path-windows: only with --per-run-paths (it models each run on its own windows)")
    if not 0.0 <= a.min_path_share <= 1.0:
        die(f"--min-path-share {a.min_path_share}: expected a share in 0..1")
    if not 0 <= a.phases <= 64:
        die(f"--phases {a.phases}: expected 0..64")
    sc = scenario(a.scenario)
    sc["guard_refine"] = a.guard_refine
    mods = models(a.build)
    standing_src = "given"
    if a.standing_bytes < 0:
        got = None if a.predict_only else measured_standing(a.measured, sc, active_cross_flows(a, sc, mods))
        a.standing_bytes, standing_src = got if got else (STANDING_DEFAULT, "the stack's measured default")
    if a.predict_only:
        return predict_only(a, sc, mods)
    try:
        measured = json.load(open(a.measured))
    except (OSError, ValueError) as e:
        die(f"--measured {a.measured}: {e} (a result file of bench/testbed/run.sh)")
    arms = [x for x in ("none", "crux", "paths") if x in measured.get("arms", {})]
    if not arms:
        die(f"{a.measured} has no arm none/crux/paths")
    try:
        rows, applied, flow_share, inputs = compare(a, sc, mods, measured, arms, a.per_run_paths, a.applied_levels,
                                                    a.path_windows)
    except Missing as e:
        die(str(e))
    # print the table
    def pct(x):
        return "   n/a" if x is None else f"{x * 100:+6.1f}%"
    draws = ("each run on the spines its connections took" +
             (", window by window" if a.path_windows else "")) if a.per_run_paths else f"{a.seeds} ECMP seeds"
    print(f"testbed '{a.scenario}' vs the scheduling model ({draws}, reference model with "
          f"{a.phases} start phases, ring steps queued behind {a.standing_bytes:.0f} bytes per flow: "
          f"{standing_src}; levels: " +
          (", ".join(f"{x} as applied ({len(v)} assignments)" for x, v in applied.items()) or "as planned") +
          f"); measured: {a.measured}")
    print(f"{'':22s} {'measured':>9s} {'reference':>10s} {'err':>8s} {'evaluator':>10s} {'err':>8s}"
          + ("  reference: least-most over the runs" if a.per_run_paths else
             "  reference: 5-95 % of a median over as many runs"))
    for arm, r in rows["arms"].items():
        lo, hi = r["reference_util_median_p5_p95"]
        print(f"util {arm:17s} {r['measured_util'] * 100:8.1f}% {r['reference_util'] * 100:9.1f}% "
              f"{pct(r['reference_error'])} {r['evaluator_util'] * 100:9.1f}% {pct(r['evaluator_error'])}"
              f"  {lo * 100:.1f}-{hi * 100:.1f}%")
    for name, arms_ in rows["jobs"].items():
        for arm, r in arms_.items():
            lo, hi = r["reference_iter_s_median_p5_p95"]
            print(f"iter {name + ' ' + arm:17s} {r['measured_iter_s']:8.3f}s {r['reference_iter_s']:9.3f}s "
                  f"{pct(r['reference_error'])} {r['evaluator_iter_s']:9.3f}s {pct(r['evaluator_error'])}"
                  f"  {lo:.3f}-{hi:.3f}s")
    allr = [r["reference_within_10pct"] for r in rows["arms"].values()] + \
        [r["reference_within_10pct"] for j in rows["jobs"].values() for r in j.values()]
    print(f"within +-10 % of the measured median (reference model): {sum(allr)} of {len(allr)}")
    spread = [r["reference_util_median_p5_p95"] + [r["measured_util"]] for r in rows["arms"].values()] + \
        [r["reference_iter_s_median_p5_p95"] + [r["measured_iter_s"]] for j in rows["jobs"].values() for r in j.values()]
    inside = sum(1 for lo, hi, m in spread if None not in (lo, hi, m) and lo <= m <= hi)
    print(f"measured median inside the model's 5-95 % range of a median over as many runs: {inside} of {len(spread)}")
    per_run = per_run_errors(rows) if a.per_run_paths else None
    if per_run:
        print(f"run by run (each run against the model on its own spines): mean |log(model / measured)| "
              f"{per_run['mean_abs_log_error']:.3f}, {per_run['within_tolerance']} of {per_run['of']} "
              f"figures within +-10 %; least share of a flow's bytes on its spine: " +
              ", ".join(f"{x} {v * 100:.0f}%" for x, v in flow_share.items()))
    pa = per_assignment(applied)
    if pa:
        print(f"per level assignment (jobs with >= {pa['min_iterations']} iterations wholly under one): mean "
              f"|log(model / measured)| weighted by iterations {pa['weighted_mean_abs_log_error']:.3f}, "
              f"{pa['within_tolerance']} of {pa['of']} within +-10 %")
    for arm, cfgs in applied.items():
        print(f"{arm}: per level assignment (top level; share of the window): iteration measured (median of the "
              "iterations run wholly under it, count) / reference model")
        for c in cfgs:
            if c["share"] < 0.02:
                continue
            top = " ".join(n for n, lv in c["levels"].items() if lv == sc["levels"] - 1)
            print(f"  {top:36s} {c['share'] * 100:4.1f}%: " + "  ".join(
                f"{n} " + (f"{r['measured_iter_s']:.3f}s ({r['measured_iterations']})"
                           if r["measured_iter_s"] else "-") + f" / {r['reference_iter_s']:.3f}s"
                for n, r in c["jobs"].items()))
    # The verdict judges the model on the stack's own decisions where the runs recorded
    # them (each run on its spines and the agents' levels): the ECMP draw and the
    # planner's noise apart; the a-priori prediction is reported beside it.
    as_run, as_run_missing = None, None
    if a.verdict:
        if a.per_run_paths and a.applied_levels:
            as_run = rows
        else:
            # one spine per flow and run (--path-windows was no closer on the mix set of
            # 2026-11-27 15:02: 63 of 90 run figures within +-10 % against 66)
            try:
                as_run = compare(a, sc, mods, measured, arms, True, True)[0]
            except Missing as e:
                as_run_missing = str(e)
        if as_run is not None and as_run is not rows:
            print("as run (each run on its own spines, the agents' levels): util " + "  ".join(
                f"{x} {r['reference_util'] * 100:.1f}% ({r['reference_error'] * 100:+.1f}%)"
                for x, r in as_run["arms"].items()))
    if a.out:
        res = {"benchmark": "testbed-calibration",
               "what": "the testbed scenario described to crux-plan (reference model and evaluator) against the "
                       "testbed's measured medians, per arm (cluster GPU utilisation) and per job (iteration time)",
               "scenario": sc, "models": mods, "seeds": a.seeds, "ref_phases": a.phases,
               "standing_bytes_per_flow": a.standing_bytes, "standing_bytes_source": standing_src,
               "measured_file": os.path.relpath(a.measured, os.path.join(HERE, "..", "..")),
               "measured_scenario": measured.get("scenario"), "tolerance": TOL,
               "command": f"python3 bench/testbed/predict.py --build BUILD --scenario {a.scenario} --measured "
                          f"{os.path.relpath(a.measured, os.path.join(HERE, '..', '..'))} --seeds {a.seeds}" +
                          (" --guard-refine" if a.guard_refine else "") +
                          (" --applied-levels" if a.applied_levels else "") +
                          (" --per-run-paths" if a.per_run_paths else "") +
                          (" --path-windows" if a.path_windows else "") +
                          (f" --min-path-share {a.min_path_share:g}"
                           if a.per_run_paths and a.min_path_share != 0.9 else ""),
               "min_path_share": a.min_path_share if a.per_run_paths else None,
               "per_run_paths": a.per_run_paths, "per_run": per_run,
               "inputs": inputs, "within_tolerance": {"count": sum(allr), "of": len(allr)},
               "inside_model_p5_p95": {"count": inside, "of": len(spread)},
               "per_assignment": per_assignment(applied), **rows}
        if as_run is not None:
            res["as_run"] = {x: {k: r[k] for k in ("measured_util", "reference_util", "reference_error",
                                                  "reference_within_10pct")}
                             for x, r in as_run["arms"].items()}
        with open(a.out, "w") as f:
            json.dump(res, f, indent=2)
        print(f"json: {a.out}")
    if a.verdict:
        line, missed = verdict(measured, rows, as_run, as_run_missing)
        line = line.replace("verdict:", f"verdict ({a.scenario}):", 1)
        print(line)
        if a.check and missed:
            return 1
    return 0


def predict_only(a, sc, mods):
    """The model's figures for a scenario before it runs (choosing a scenario)."""
    util, it = {}, {}
    with tempfile.TemporaryDirectory() as d:
        ids = write_inputs(sc, mods, d)[2]
        for arm in ("none", "crux", "paths"):
            runs = [plan_arm(a.build, sc, mods, d, arm, s, a.phases, a.standing_bytes)
                    for s in range(1, a.seeds + 1)]
            util[arm] = med([r["ref_model"]["gpu_util"] for r in runs])
            for j in runs[0]["jobs"]:
                it.setdefault(ids[j["id"]], {})[arm] = med(
                    [jj["ref_iter_time"] for r in runs for jj in r["jobs"] if jj["id"] == j["id"]])
    print(f"testbed '{a.scenario}': the reference model's prediction ({a.seeds} ECMP seeds)")
    print("util " + "  ".join(f"{x} {util[x] * 100:.1f}%" for x in util) + "  gain " +
          " / ".join(f"{x} {(util[x] / util['none'] - 1) * 100:+.1f}%" for x in ("crux", "paths")))
    for job in sc["jobs"]:
        t = it[job["name"]]
        print(f"iter {job['name']:8s} ({job['role']:4s}) " + "  ".join(f"{x} {t[x]:.3f}s" for x in t) +
              "  change " + " / ".join(f"{x} {(t[x] / t['none'] - 1) * 100:+.1f}%" for x in ("crux", "paths")))
    return 0


def per_run_errors(rows):
    """Each run against the model on its own spines: mean |log(model / measured)| over
    every run's utilisation and job iteration times, and how many are within the tolerance."""
    tot = n = within = 0
    for r in rows["arms"].values():
        for pr in r.get("per_run", []):
            pairs = [(pr["reference_util"], pr["measured_util"])] + \
                [(j["reference_iter_s"], j["measured_iter_s"]) for j in pr["jobs"].values()]
            for mo, me in pairs:
                if not mo or not me:
                    continue
                tot += abs(math.log(mo / me))
                n += 1
                within += abs(mo / me - 1.0) <= TOL
    return {"mean_abs_log_error": tot / n, "within_tolerance": within, "of": n} if n else None


def per_assignment(applied, min_iters=10):
    """The model against the iterations run wholly under one level assignment: the mean of
    |log(reference / measured)| over every (arm, assignment, job) with at least `min_iters`
    such iterations, weighted by their count, and how many of them are within the tolerance.
    None without applied levels."""
    tot = w = within = n = 0
    for cfgs in applied.values():
        for c in cfgs:
            for r in c["jobs"].values():
                m, k = r.get("measured_iter_s"), r.get("measured_iterations") or 0
                if not m or k < min_iters or not r.get("reference_iter_s"):
                    continue
                tot += abs(math.log(r["reference_iter_s"] / m)) * k
                w += k
                n += 1
                within += abs(r["reference_iter_s"] / m - 1.0) <= TOL
    if not w:
        return None
    return {"weighted_mean_abs_log_error": tot / w, "within_tolerance": within, "of": n,
            "min_iterations": min_iters}


def verdict(measured, rows, as_run=None, as_run_missing=None):
    """One line: each goal met or not, with the model's figure beside the measured one.
    `as_run`: the comparison with each run on its own spines and levels; when given it
    judges the model's accuracy, the a-priori figures (rows) stand beside it."""
    vs = measured.get("vs_baseline", {})
    arms = [x for x in ("crux", "paths") if x in vs and x in rows["arms"]]
    if not arms or "none" not in rows["arms"]:
        return "verdict: no Crux arm against none in the result file", True
    ref = {k: v["reference_util"] for k, v in rows["arms"].items()}
    parts, missed = [], False

    def gain(x):
        return (ref[x] / ref["none"] - 1) * 100

    ug = {x: vs[x]["utilization_gain_pct"] for x in arms}
    best = max(arms, key=lambda x: ug[x])
    ok = ug[best] >= 10
    missed |= not ok
    run_gain = ""
    if as_run and "none" in as_run["arms"] and all(x in as_run["arms"] for x in arms):
        ra = {k: v["reference_util"] for k, v in as_run["arms"].items()}
        run_gain = "; as run " + " / ".join(f"{(ra[x] / ra['none'] - 1) * 100:+.1f}%" for x in arms)
    parts.append("utilisation " + " / ".join(f"{x} {ug[x]:+.1f}%" for x in arms) +
                 f" (>= +10%: {'met' if ok else 'NOT met'}; model " +
                 " / ".join(f"{gain(x):+.1f}%" for x in arms) + ", off by " +
                 " / ".join(f"{ug[x] - gain(x):+.1f}" for x in arms) + f" points{run_gain})")
    jct = {x: vs[x]["best_high_intensity_jct_change_pct"] for x in arms}
    bj = min(arms, key=lambda x: jct[x])
    ok = jct[bj] <= -20
    missed |= not ok
    model_iter = []
    for name, ja in rows["jobs"].items():
        if measured["arms"]["none"]["jobs"].get(name, {}).get("role") == "high":
            for x in arms:
                if x in ja and "none" in ja:
                    model_iter.append(f"{(ja[x]['reference_iter_s'] / ja['none']['reference_iter_s'] - 1) * 100:+.1f}%")
    parts.append("high-intensity JCT " + " / ".join(f"{x} {jct[x]:+.1f}%" for x in arms) +
                 f" (<= -20%: {'met' if ok else 'NOT met'}" +
                 (f"; model iteration {' / '.join(model_iter)}" if model_iter else "") + ")")
    if "paths" in arms and "crux" in arms:
        matters = ref["paths"] > ref["crux"] * 1.02
        if matters:
            ok = ug["paths"] >= ug["crux"]
            missed |= not ok
            parts.append(f"paths >= priorities: {'met' if ok else 'NOT met'} ({ug['paths']:+.1f}% vs {ug['crux']:+.1f}%; "
                         f"model {gain('paths'):+.1f}% vs {gain('crux'):+.1f}%)")
        else:
            parts.append(f"paths >= priorities: not judged (the model predicts no gain from paths: "
                         f"{gain('paths'):+.1f}% vs {gain('crux'):+.1f}%)")
    def errs(rs):
        return ", ".join(f"{x} {r['reference_error'] * 100:+.0f}%" for x, r in rs["arms"].items())
    judge = as_run or rows
    inside = [x for x, r in judge["arms"].items() if r["reference_within_10pct"]]
    ok = len(inside) == len(judge["arms"])
    missed |= not ok
    if as_run:
        how = ("as run, each run on its own spines" + (" window by window" if as_run.get("path_windows") else "") +
               f" and levels: {errs(as_run)}; a priori: {errs(rows)}")
    else:
        how = f"a priori: {errs(rows)}" + (f"; as run: not judged, {as_run_missing}" if as_run_missing else "")
    parts.append(f"model within +-10% of the utilisation: {'met' if ok else 'NOT met'} ({len(inside)} of "
                 f"{len(judge['arms'])} arms {how})")
    return "verdict: " + "; ".join(parts), missed


if __name__ == "__main__":
    sys.exit(main())
