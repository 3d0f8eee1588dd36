#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A job's iterations against the levels the agent gave it and its neighbours.

levels.py [--job NAME] [--json FILE] RUN_DIR...

A run directory of run.sh (run-ARM-REP) holds the trainers' logs
(logs/JOB-r0.log: per iteration its start and end, CLOCK_MONOTONIC ns; the
header's realtime_offset_ns turns them into wall-clock time) and the agent's
log (cruxd.log, or cruxd-h0.log with one agent per host: every host applies
the same cluster schedule), whose lines "job ID: level A -> B" say when each
job's level changed in the decision table (cruxd logs every change).

For every iteration of the job (default: the scenario's high-intensity job,
jobs.txt role "high") it finds the job's level state over the iteration:
  profiling  the job had no decided level yet (every job on the top level)
  alone      decided, and no other job on its level during the iteration
  shared     decided, and another job on its level for some of the iteration
and prints per run the count and mean iteration time of each state, the
first iteration that started after the job's first decision (decision latency
from its first iteration), and what fraction of the decided time the job
shared its level. A model that gives the job a level of its own predicts its
'alone' time; the run's mean mixes all three.

It also prints how late the machine woke the ranks: the mean, over every
rank's iterations after the third, of the time its compute (a sleep of
compute_ms) took beyond compute_ms. On an idle machine that is ~0.1 ms; on a
loaded one, processes wait for a core, and a ring step waits for the slowest
of its ranks to wake: a cost of the 2-core host, not of the fabric.
"""
import argparse
import datetime
import glob
import json
import os
import re
import statistics
import sys

LEVEL_RE = re.compile(r"^(\S+Z) cruxd\[\d+\] INFO: job (\S+): level (\d+)(?: -> (\d+))?(, profiling)?")


def die(msg):
    print(f"levels.py: {msg}", file=sys.stderr)
    sys.exit(2)


def wall(ts):
    return datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def short(job_id):
    """The table's job id is the preload's ("env:NAME" from CRUX_JOB_ID)."""
    return job_id.split(":", 1)[1] if ":" in job_id else job_id


def timeline(log):
    """Per job: [(wall time, level, profiling)] in log order."""
    tl = {}
    with open(log) as f:
        for line in f:
            m = LEVEL_RE.match(line)
            if m:
                lvl = int(m.group(4) if m.group(4) is not None else m.group(3))
                tl.setdefault(short(m.group(2)), []).append((wall(m.group(1)), lvl, bool(m.group(5))))
    return tl


def level_at(events, t):
    """(level, profiling) in force at wall time t, None before the job's first entry."""
    cur = None
    for when, lvl, prof in events:
        if when > t:
            break
        cur = (lvl, prof)
    return cur


def iterations(path, strict=False):
    """[(start, end)] of a rank's iterations in wall-clock seconds. A log without
    realtime_offset_ns raises ValueError (strict) or ends the program."""
    with open(path) as f:
        head = f.readline().split()
        rows = [ln.split() for ln in f if ln[:1].isdigit()]
    kv = dict(x.split("=", 1) for x in head[2:] if "=" in x)
    if "realtime_offset_ns" not in kv:
        msg = (f"{path}: no realtime_offset_ns in its header (a trainer older than levels.py): "
               "rerun with the current crux-tb-trainer")
        if strict:
            raise ValueError(msg)
        die(msg)
    off = int(kv["realtime_offset_ns"])
    return [((int(r[1]) + off) / 1e9, (int(r[3]) + off) / 1e9) for r in rows]


def shared_fraction(tl, job, a, b, step=0.05):
    """Fraction of [a, b] during which another job sat on `job`'s level, and
    whether `job` was still profiling at a."""
    mine = tl.get(job, [])
    st = level_at(mine, a)
    if st is None or st[1]:
        return None, True
    n = shared = 0
    t = a
    while t < b:
        me = level_at(mine, t)
        n += 1
        if me is not None and any(o != job and (lv := level_at(ev, t)) is not None and lv[0] == me[0]
                                  and not lv[1] for o, ev in tl.items()):
            shared += 1
        t += step
    return (shared / n if n else 0.0), False


def analyse(run, job):
    jobs = {}
    with open(os.path.join(run, "jobs.txt")) as f:
        for line in f:
            p = line.split()
            if len(p) >= 4:
                jobs[p[0]] = p[3]
    if job is None:
        job = next((n for n, r in jobs.items() if r == "high"), None)
        if job is None:
            die(f"{run}: no high-intensity job in jobs.txt: name one with --job")
    log = next((p for p in (os.path.join(run, "cruxd.log"), os.path.join(run, "cruxd-h0.log"))
                if os.path.exists(p)), None)
    if log is None:
        die(f"{run}: no agent log (cruxd.log or cruxd-h0.log): the none arm has no levels")
    tl = timeline(log)
    if job not in tl:
        die(f"{log}: no level line for job {job} (a cruxd older than its level log?)")
    its = iterations(os.path.join(run, "logs", f"{job}-r0.log"))
    rows, first_decided = [], None
    for i, (a, b) in enumerate(its):
        frac, prof = shared_fraction(tl, job, a, b)
        state = "profiling" if prof else ("shared" if frac > 0 else "alone")
        if state != "profiling" and first_decided is None:
            first_decided = i
        rows.append({"iter": i, "start_s": a - its[0][0], "time_s": b - a, "state": state,
                     "shared_fraction": frac})
    out = {"run": run, "job": job, "iterations": len(rows), "first_decided_iteration": first_decided}
    for state in ("profiling", "alone", "shared"):
        ts = [r["time_s"] for r in rows if r["state"] == state]
        out[state] = {"count": len(ts), "mean_s": statistics.fmean(ts) if ts else None}
    dec = [r for r in rows if r["state"] != "profiling"]
    out["shared_time_fraction"] = (sum(r["shared_fraction"] * r["time_s"] for r in dec) /
                                   sum(r["time_s"] for r in dec)) if dec else None
    out["wake_late_ms"] = wake_late(run)
    out["rows"] = rows
    return out


def wake_late(run, skip=3):
    """Mean lateness (ms) of the ranks' compute sleeps over all jobs' ranks."""
    late = []
    for path in glob.glob(os.path.join(run, "logs", "*-r*.log")):
        with open(path) as f:
            head = f.readline().split()
            rows = [ln.split() for ln in f if ln[:1].isdigit()]
        kv = dict(x.split("=", 1) for x in head[2:] if "=" in x)
        if "compute_ms" not in kv:
            continue
        c = float(kv["compute_ms"]) / 1e3
        late += [(int(r[2]) - int(r[1])) / 1e9 - c for r in rows[skip:]]
    return statistics.fmean(late) * 1e3 if late else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--job", default=None)
    ap.add_argument("--json", default="")
    ap.add_argument("--rows", action="store_true", help="print every iteration")
    ap.add_argument("runs", nargs="+")
    a = ap.parse_args()
    res = []
    for pat in a.runs:
        for run in sorted(glob.glob(pat)) or [pat]:
            if not os.path.isdir(run):
                die(f"{run}: not a run directory")
            r = analyse(run, a.job)
            res.append(r)

            def fmt(s):
                d = r[s]
                return f"{s} {d['count']:2d} x {d['mean_s']:.3f} s" if d["mean_s"] is not None else f"{s}  0"
            sf = r["shared_time_fraction"]
            wl = "n/a" if r["wake_late_ms"] is None else f"{r['wake_late_ms']:.1f} ms"
            print(f"{os.path.basename(os.path.normpath(run))} {r['job']}: " + ", ".join(fmt(s) for s in
                  ("profiling", "alone", "shared")) +
                  f"; first decided iteration {r['first_decided_iteration']}; level shared "
                  f"{'n/a' if sf is None else f'{sf * 100:.0f} %'} of the decided time; ranks woken {wl} late")
            if a.rows:
                for x in r["rows"]:
                    print(f"  {x['iter']:3d} {x['start_s']:7.2f} s {x['time_s']:.3f} s {x['state']}"
                          + (f" ({x['shared_fraction'] * 100:.0f} %)" if x["state"] == "shared" else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
