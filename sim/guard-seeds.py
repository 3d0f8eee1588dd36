#!/usr/bin/env python3
"""The result file of sim/guard-seeds.sh, from the crux-sim runs it made.

usage: guard-seeds.py DIR OUT COMMAND FIRST LAST "EXPERIMENTS" "GUARDS"

DIR holds EXPERIMENT-sSEED-GROUP.json (GROUP: base, or a guarded policy such
as crux-full@4). Per seed: the best baseline (highest utilisation), unguarded
Crux-full and each guarded run, with the gain kept =
(util - util(best baseline)) / (util(crux-full) - util(best baseline)) (0 when
Crux-full does not beat the baseline) and whether the worst slowdown is within
the bound; per experiment and guard, the summary over the seeds. Writes OUT
(JSON) and one line per run and per summary to stderr.
"""
import json
import statistics
import sys

BASELINES = ["ecmp", "sincronia", "taccl", "cassini-lite"]


def figures(path):
    """{policy: (util, worst, p99)} of one crux-sim result file."""
    with open(path, encoding="utf-8") as f:
        runs = json.load(f)["runs"]
    return {r["policy"]: (r["mean_gpu_util"], r["slowdown"]["max"], r["slowdown"]["p99"]) for r in runs}


def fig(t):
    return {"util": t[0], "worst": t[1], "p99": t[2]}


def main(argv):
    if len(argv) != 8:
        sys.exit(__doc__)
    d, out, cmd, first, last, exps, guards = argv[1:]
    guards = guards.split()
    runs = "ecmp,sincronia,taccl,cassini-lite,crux-full"
    for i, g in enumerate(guards):
        runs += (" and " if i == len(guards) - 1 else ", ") + g
    doc = {
        "description": f"crux-sim, 5000 jobs over 14 days per seed; per seed {len(guards) + 1} runs: {runs}",
        "command": cmd,
        "gain_kept": "(util - util(best baseline)) / (util(crux-full) - util(best baseline))",
        "experiments": [],
    }
    for e in exps.split():
        seeds, gains, worsts = [], {g: [] for g in guards}, {g: [] for g in guards}
        for s in range(int(first), int(last) + 1):
            fg = {}
            for group in ["base"] + guards:
                fg.update(figures(f"{d}/{e}-s{s}-{group}.json"))
            bb = max((b for b in BASELINES if b in fg), key=lambda b: fg[b][0])
            ub, uf = fg[bb][0], fg["crux-full"][0]
            row = {"seed": s, "best_baseline": bb, bb: fig(fg[bb]), "crux-full": fig(fg["crux-full"])}
            for g in guards:
                bound = float(g[g.index("@") + 1:])
                gk = (fg[g][0] - ub) / (uf - ub) if uf > ub else 0
                within = fg[g][1] <= bound
                row[g] = dict(fig(fg[g]), gain_kept=round(gk, 4), within_bound=within)
                gains[g].append(gk)
                worsts[g].append(fg[g][1])
                print(f"{e:<20s} seed {s:3d}  {g:<12s} gain kept {100 * gk:6.1f} %  worst {fg[g][1]:.2f}x "
                      f"(bound {bound:g}){'' if within else '  ABOVE THE BOUND'}", file=sys.stderr)
            seeds.append(row)
        summary = {}
        for g in guards:
            bound = float(g[g.index("@") + 1:])
            v, n = gains[g], len(gains[g])
            med, mean, wmax = statistics.median(v), sum(v) / n, max([0] + worsts[g])
            ok = sum(x >= 0.9 for x in v)
            summary[g] = {"seeds": n, "gain_kept_median": round(med, 4), "gain_kept_mean": round(mean, 4),
                          "gain_kept_min": round(min(v), 4), "gain_kept_max": round(max(v), 4),
                          "runs_at_least_0.9": ok, "worst": wmax, "within_bound": wmax <= bound}
            print(f"{e:<20s} {g:<12s} seeds {n}: gain kept median {100 * med:.1f} % (mean {100 * mean:.1f}, "
                  f"{100 * min(v):.1f}-{100 * max(v):.1f}), {ok} of {n} runs >= 90 %, worst {wmax:.2f}x",
                  file=sys.stderr)
        doc["experiments"].append({"experiment": e, "seeds": seeds, "summary": summary})
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv)
