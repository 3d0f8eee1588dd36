#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bench/testbed/predict.py: the testbed scenario as data (run.sh
# --print-scenario), described to crux-plan and compared with a result file
# whose medians are known: the errors must be prediction / measurement - 1,
# every arm and job present; bad input exits 2 with a reason.
#   predict_check.sh SOURCE_ROOT BUILD_ROOT
set -uo pipefail
S="$1"
B="$2"
. "$(dirname "$0")/../lib/harness.sh"
cxt_need_cmd python3 # predict.py is Python
cxt_workdir crux-tb-pred
T=$CXT_W
fail() { cxt_fail "$@"; }

out="$(bash "$S/bench/testbed/run.sh" --print-scenario)" || fail "run.sh --print-scenario exited $?"
for k in "scenario default" "levels 2" "fabric --leaves" "job gpt gpt high" "cwnd 10" "profile_window 5"; do
	grep -q "^$k" <<<"$out" || fail "--print-scenario lacks '$k': $out"
done
bash "$S/bench/testbed/run.sh" --print-scenario --scenario nosuch >/dev/null 2>&1 && fail "an unknown scenario printed"
mix="$(bash "$S/bench/testbed/run.sh" --print-scenario --scenario mix)" || fail "--scenario mix: exited $?"
[ "$(grep -c '^job ' <<<"$mix")" -eq 5 ] || fail "the mix scenario is not 5 jobs: $mix"
one="$(bash "$S/bench/testbed/run.sh" --print-scenario --only "resnet gpt")" || fail "--only: exited $?"
[ "$(grep '^job ' <<<"$one" | cut -d' ' -f2 | tr '\n' ' ')" = "resnet gpt " ] || fail "--only 'resnet gpt': $one"
bad="$(bash "$S/bench/testbed/run.sh" --print-scenario --only nosuch 2>&1)" && fail "--only nosuch exited 0"
grep -q "has no job 'nosuch'" <<<"$bad" || fail "--only with an unknown job not named: $bad"

# a measured file with round numbers: medians 0.30 / 0.36 / 0.40 and 1.0 s everywhere
python3 - "$T/measured.json" <<'PY'
import json, sys
jobs = {n: {"iter_time_s": {"runs": [0.9, 1.0, 1.1]}, "role": "high" if n == "gpt" else "low"}
        for n in ("gpt", "bert-a", "bert-b", "resnet")}
arms = {a: {"cluster_gpu_utilization": {"runs": [u - 0.01, u, u + 0.02]}, "jobs": jobs}
        for a, u in (("none", 0.30), ("crux", 0.36), ("paths", 0.40))}
vs = {"crux": {"utilization_gain_pct": 20.0, "best_high_intensity_jct_change_pct": -25.0},
      "paths": {"utilization_gain_pct": 33.3, "best_high_intensity_jct_change_pct": -30.0}}
json.dump({"scenario": "fixture", "arms": arms, "vs_baseline": vs}, open(sys.argv[1], "w"))
vs["paths"]["utilization_gain_pct"] = 5.0
vs["crux"]["utilization_gain_pct"] = 4.0
json.dump({"scenario": "fixture", "arms": arms, "vs_baseline": vs}, open(sys.argv[1] + ".low", "w"))
PY
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/measured.json" --seeds 2 --phases 2 \
	--out "$T/cal.json" >"$T/log" 2>&1 || { cat "$T/log"; fail "predict.py exited non-zero"; }
python3 - "$T/cal.json" <<'PY' || fail "result file wrong"
import json, sys
d = json.load(open(sys.argv[1]))
want = {"none": 0.30, "crux": 0.36, "paths": 0.40}
assert set(d["arms"]) == set(want), d["arms"].keys()
for a, u in want.items():
    r = d["arms"][a]
    assert abs(r["measured_util"] - u) < 1e-9, (a, r)
    assert 0 < r["reference_util"] < 1 and 0 < r["evaluator_util"] < 1, r
    assert abs(r["reference_error"] - (r["reference_util"] / u - 1)) < 1e-9, r
    assert r["reference_within_10pct"] == (abs(r["reference_error"]) <= 0.10), r
assert set(d["jobs"]) == {"gpt", "bert-a", "bert-b", "resnet"}, d["jobs"].keys()
# the model runs each all-reduce as its dependent ring steps: buckets x 2 (n - 1)
for k, v in (("1", 42), ("2", 48), ("3", 48), ("4", 8)):
    line = next(l for l in d["inputs"]["jobs"].splitlines() if l.startswith(f"job {k} "))
    assert f" steps={v}" in line, line
# the prediction of a median over the 3 runs, inside its own 5-95 % range; every figure counted
for r in d["arms"].values():
    lo, hi = r["reference_util_median_p5_p95"]
    assert lo <= r["reference_util"] <= hi, r
assert d["inside_model_p5_p95"]["of"] == 3 + 4 * 3, d["inside_model_p5_p95"]
for n, arms in d["jobs"].items():
    for a, r in arms.items():
        assert r["measured_iter_s"] == 1.0 and r["reference_iter_s"] > 0, (n, a, r)
        assert abs(r["reference_error"] - (r["reference_iter_s"] - 1.0)) < 1e-9, (n, a, r)
# the Crux arms start with every job profiled on the top level for cruxd's 5 s window, some
# of the analysis window (which opens after every job's first iteration); the none arm has none
for a in ("crux", "paths"):
    assert 0.02 < d["arms"][a]["profiling_share"] < 0.5, (a, d["arms"][a]["profiling_share"])
assert d["arms"]["none"]["profiling_share"] is None, d["arms"]["none"]
# the none arm is one level; the crux arms put the GPT-like job above the rest
assert d["arms"]["none"]["levels"]["gpt"] == [0], d["arms"]["none"]["levels"]
assert max(d["arms"]["crux"]["levels"]["gpt"]) >= max(d["arms"]["crux"]["levels"]["resnet"]), d["arms"]["crux"]
assert "job 1 hosts=h0,h1,h2,h3,h4,h5,h6,h7 gpus=8" in d["inputs"]["jobs"], d["inputs"]["jobs"]
# ring steps wait behind the window clamp of every other flow of their class: all
# jobs share one class in the none arm; the crux arm's top level holds the GPT-like
# job alone once decided, its lower level the rest
assert 0 < d["standing_bytes_per_flow"] < 65536 and "default" in d["standing_bytes_source"], d
lat = {n: {a: r["queue_latency_s"] for a, r in arms.items()} for n, arms in d["jobs"].items()}
assert all(lat[n]["none"] > 0 for n in lat), lat
# (once decided: the GPT-like job waits only in the profiling stretch, all jobs on one level)
assert lat["gpt"]["crux"] < 0.2 * lat["gpt"]["none"] and lat["bert-a"]["crux"] > 0 and lat["resnet"]["crux"] > 0, lat
# more steps of fewer bytes wait more: the BERT-like job (8 buckets, 4 ranks) above the ResNet-like (4, 2)
assert lat["bert-a"]["none"] > lat["resnet"]["none"], lat
PY
# a two-humped pool (half the draws collide): one run's median is either hump, the mean of the
# medians between them (over 101 runs too: each median is one hump or the other); a pool with one
# draw in 20 colliding keeps a 5-run median on the lower hump
python3 - "$S/bench/testbed" <<'PY' || fail "median_of_runs"
import sys
sys.path.insert(0, sys.argv[1])
from predict import median_of_runs
m, lo, hi = median_of_runs([1.0] * 10 + [2.0] * 10, 1)
assert (lo, hi) == (1.0, 2.0) and abs(m - 1.5) < 0.05, (m, lo, hi)
m, lo, hi = median_of_runs([1.0] * 10 + [2.0] * 10, 101)
assert abs(m - 1.5) < 0.05 and lo == 1.0 and hi == 2.0, (m, lo, hi)
m, lo, hi = median_of_runs([1.0] * 19 + [2.0], 5)
assert m < 1.01 and hi == 1.0, (m, lo, hi)
PY
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/measured.json" --seeds 2 --phases 2 \
	--standing-bytes 0 --out "$T/cal0.json" >"$T/log0" 2>&1 || { cat "$T/log0"; fail "--standing-bytes 0 exited non-zero"; }
python3 - "$T/cal0.json" "$T/cal.json" <<'PY' || fail "--standing-bytes 0 is not the pure fluid model"
import json, sys
d0, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert all(r["queue_latency_s"] == 0 for arms in d0["jobs"].values() for r in arms.values()), d0["jobs"]
# the wait slows the low level in the crux arm
assert d["jobs"]["bert-a"]["crux"]["reference_iter_s"] > d0["jobs"]["bert-a"]["crux"]["reference_iter_s"]
PY
# the standing queue measured by the runs beside the result file (run.sh's sampler):
# the none arm's uplink backlog (median over runs) over the 12 flows crossing the spines
mkdir -p "$T/runs/run-none-1" "$T/runs/run-none-2" "$T/runs/run-crux-1"
cp "$T/measured.json" "$T/runs/testbed.json"
echo "mean bytes queued at the leaves' uplinks: 120000 (80 samples)" >"$T/runs/run-none-1/queues-mean.txt"
echo "mean bytes queued at the leaves' uplinks: 120000 (75 samples)" >"$T/runs/run-none-2/queues-mean.txt"
echo "mean bytes queued at the leaves' uplinks: 999999 (75 samples)" >"$T/runs/run-crux-1/queues-mean.txt"
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/runs/testbed.json" --seeds 1 --phases 1 \
	--out "$T/calq.json" >"$T/logq" 2>&1 || { cat "$T/logq"; fail "predict.py on a run directory exited non-zero"; }
# (over the flows sending at a time: each job's crossing flows times the share of its
# iteration spent communicating, fewer than the 12 crossing flows; the backlog is a time mean)
python3 - "$T/calq.json" <<'PY' || fail "the standing queue was not taken from the none arm's samples"
import json, re, sys
d = json.load(open(sys.argv[1]))
src = d["standing_bytes_source"]
m = re.search(r"over ([0-9.]+) of 12 flows sending at a time", src)
assert "2 none-arm runs" in src and m, src
active = float(m.group(1))
assert 2 < active < 12, active
assert abs(d["standing_bytes_per_flow"] * active - 120000) < 120000 * 0.01, (d["standing_bytes_per_flow"], active)
PY
python3 "$S/bench/testbed/predict.py" --build "$B" --scenario mix --predict-only --seeds 2 --phases 2 >"$T/p" 2>&1 ||
	fail "--predict-only exited $?: $(cat "$T/p")"
grep -q "^util none .* gain crux [-+][0-9.]*% / paths [-+][0-9.]*%" "$T/p" || fail "--predict-only: $(cat "$T/p")"
[ "$(grep -c '^iter ' "$T/p")" -eq 5 ] || fail "--predict-only: not one line per job of mix: $(cat "$T/p")"
grep -q "within +-10 % of the measured median" "$T/log" || fail "no summary line: $(cat "$T/log")"

# the verdict line (make demo's last line) and --check's exit status
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/measured.json" --seeds 2 --phases 2 \
	--verdict >"$T/v" 2>&1 || fail "--verdict exited $?: $(cat "$T/v")"
last="$(tail -n 1 "$T/v")"
for k in "verdict (default): utilisation crux +20.0% / paths +33.3% (>= +10%: met; model" \
	"high-intensity JCT crux -25.0% / paths -30.0% (<= -20%: met; model iteration" \
	"model within +-10% of the utilisation:"; do
	grep -qF "$k" <<<"$last" || fail "verdict lacks '$k': $last"
done
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/measured.json.low" --seeds 2 --phases 2 \
	--verdict --check >"$T/v" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "--check with a 5 % gain exited $rc: $(tail -n 1 "$T/v")"
tail -n 1 "$T/v" | grep -qF "(>= +10%: NOT met" || fail "missed goal not named: $(tail -n 1 "$T/v")"

# --per-run-paths: each run on the spines its connections took (paths.txt, sockpaths.py's
# format: job rank src dst sport dport spine bytes, hosts by fabric address). Per arm run 1
# puts every cross-leaf flow on spine s0, run 2 alternates s0 / s1, run 3 alternates the
# other way; a flow split over two spines counts where most of its bytes went.
python3 - "$S/bench/testbed" "$T/pr" "$T/measured.json" <<'PY' || fail "per-run paths fixture"
import os, shutil, sys
sys.path.insert(0, sys.argv[1])
from predict import scenario
root, measured = sys.argv[2], sys.argv[3]
sc = scenario("default")
hpl = sc["fabric"]["hosts-per-leaf"]
def addr(h):
    i = int(h[1:])
    return f"198.18.{i // hpl}.{4 * (i % hpl) + 2}"
os.makedirs(root)
shutil.copy(measured, os.path.join(root, "testbed.json"))
for arm in ("none", "crux", "paths"):
    for run in (1, 2, 3):
        d = os.path.join(root, f"run-{arm}-{run}")
        os.makedirs(d)
        k = 0
        with open(os.path.join(d, "paths.txt"), "w") as f:
            f.write("# job rank src dst sport dport spine bytes (sockpaths.py)\n")
            for job in sc["jobs"]:
                hs = job["hosts"]
                for r in range(len(hs)):
                    a, b = hs[r], hs[(r + 1) % len(hs)]
                    if int(a[1:]) // hpl == int(b[1:]) // hpl:
                        continue
                    sp = 0 if run == 1 else (k + run) % 2
                    k += 1
                    f.write(f"{job['name']} {r} {addr(a)} {addr(b)} {40000 + k} 5000 s{sp} 9500000\n")
                    f.write(f"{job['name']} {r} {addr(a)} {addr(b)} {50000 + k} 5001 s{1 - sp} 500000\n")
                    # window by window: the first socket's bytes in window 0; in window 1 the
                    # GPT-like job's flows on s1, every other flow on s0
                    with open(os.path.join(d, "paths-windows.txt"), "a") as g:
                        g.write(f"0 {job['name']} {r} {addr(a)} {addr(b)} {40000 + k} 5000 s{sp} 9500000\n")
                        w1 = "s1" if job["name"] == "gpt" else "s0"
                        g.write(f"1 {job['name']} {r} {addr(a)} {addr(b)} {50000 + k} 5001 {w1} 500000\n")
PY
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/pr/testbed.json" --phases 1 --standing-bytes 0 \
	--per-run-paths --out "$T/calpr.json" >"$T/logpr" 2>&1 || { cat "$T/logpr"; fail "--per-run-paths exited non-zero"; }
python3 - "$T/calpr.json" <<'PY' || fail "--per-run-paths: each run not modelled on its own spines"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["per_run_paths"] and d["per_run"]["of"] == 3 * 3 * (1 + 4), d["per_run"]
for a, r in d["arms"].items():
    pr = r["per_run"]
    assert len(pr) == 3, (a, pr)
    assert set(pr[0]["spines"].values()) == {"s0"}, pr[0]["spines"]
    assert set(pr[1]["spines"].values()) == {"s0", "s1"}, pr[1]["spines"]
    assert abs(r["least_flow_share_on_its_spine"] - 0.95) < 1e-9, r
    # the model ran each flow on the spine the run's connections took
    for x in pr:
        assert x["model_spines"] == x["spines"] and len(x["spines"]) == 12, (a, x)
    assert sorted([x["reference_util"] for x in pr])[1] == r["reference_util"], (a, r)
assert "--per-run-paths" in d["command"], d["command"]
PY
# --path-windows: each run on the spines of each window in turn, weighed by their bytes
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/pr/testbed.json" --phases 1 --standing-bytes 0 \
	--per-run-paths --path-windows --out "$T/calpw.json" >"$T/logpw" 2>&1 ||
	{ cat "$T/logpw"; fail "--path-windows exited non-zero"; }
python3 - "$T/calpw.json" "$T/calpr.json" <<'PY' || fail "--path-windows: the windows not modelled"
import json, sys
d, whole = (json.load(open(f)) for f in sys.argv[1:])
assert d["path_windows"] and "--path-windows" in d["command"], d["command"]
for a, r in d["arms"].items():
    pr, wr = r["per_run"], whole["arms"][a]["per_run"]
    for k in (0, 1, 2):
        pw = pr[k]["path_windows"]
        assert [round(w["share"], 6) for w in pw] == [0.95, 0.05], (a, pw)
        assert pw[0]["spines"] == pr[k]["spines"], (a, pw[0], pr[k]["spines"])
        assert {f: v for f, v in pw[1]["spines"].items() if f.startswith("gpt ")} == \
            {"gpt h3>h4": "s1", "gpt h7>h0": "s1"}, (a, pw[1])
    # run 1 (every flow on s0, then the GPT-like job alone on s1 for 5 % of the bytes): a mix
    # of the two sets, above the first alone
    assert pr[0]["reference_util"] > wr[0]["reference_util"], (a, pr[0], wr[0])
PY
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/pr/testbed.json" --path-windows >"$T/bad" 2>&1
[ $? -eq 2 ] && grep -q "only with --per-run-paths" "$T/bad" || fail "--path-windows alone: $(cat "$T/bad")"
# sockpaths.py: each socket's bytes per snapshot (two hosts, two snapshots) as windows
python3 - "$S/bench/testbed" "$T/sockets.txt" <<'PY' || fail "sockpaths.py windows"
import sys
sys.path.insert(0, sys.argv[1])
from sockpaths import read_sockets, windows
sock = "0 0 {} users:((\"crux-tb-trainer\",pid={},fd=5))\n\t cubic bytes_acked:{} segs_out:9\n"
with open(sys.argv[2], "w") as f:
    for snap, (x, y) in enumerate(((100, 0), (300, 50))):
        f.write("## 198.18.0.2\n" + sock.format("198.18.0.2:4000 198.18.1.2:5000", 11, x))
        f.write("## 198.18.1.2\n" + (sock.format("198.18.1.2:4001 198.18.0.2:5001", 12, y) if y else ""))
best, seen = read_sockets(sys.argv[2])
a = ("198.18.0.2", 11, "198.18.0.2", 4000, "198.18.1.2", 5000)
b = ("198.18.1.2", 12, "198.18.1.2", 4001, "198.18.0.2", 5001)
assert best == {a: 300, b: 50}, best
assert windows(seen[a]) == [(0, 100), (1, 200)], seen[a]
assert windows(seen[b]) == [(1, 50)], seen[b]
PY
# a flow with under --min-path-share of its bytes on one spine keeps the plan's path
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/pr/testbed.json" --phases 1 --standing-bytes 0 \
	--per-run-paths --min-path-share 0.99 --out "$T/calpr2.json" >"$T/logpr2" 2>&1 ||
	{ cat "$T/logpr2"; fail "--min-path-share exited non-zero"; }
python3 - "$T/calpr2.json" <<'PY' || fail "--min-path-share 0.99 still gave the 95 % spines"
import json, sys
d = json.load(open(sys.argv[1]))
for a, r in d["arms"].items():
    assert all(x["spines"] == {} for x in r["per_run"]), (a, r["per_run"][0]["spines"])
PY
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/pr/testbed.json" --per-run-paths \
	--min-path-share 1.5 >"$T/bad" 2>&1
[ $? -eq 2 ] && grep -q "expected a share in 0..1" "$T/bad" || fail "--min-path-share 1.5: $(cat "$T/bad")"
# --verdict beside runs with paths but no level logs: the accuracy goal judged a priori, and why
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/pr/testbed.json" --seeds 2 --phases 1 \
	--standing-bytes 0 --verdict >"$T/vpr" 2>&1 || fail "--verdict beside runs without level logs: $(cat "$T/vpr")"
tail -n 1 "$T/vpr" | grep -qF "arms a priori: none " || fail "verdict not judged a priori: $(tail -n 1 "$T/vpr")"
tail -n 1 "$T/vpr" | grep -qF "as run: not judged, --applied-levels: no level log for every run-crux-*" ||
	fail "verdict does not say why the runs were not modelled as run: $(tail -n 1 "$T/vpr")"
rm "$T/pr/run-crux-2/paths.txt"
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/pr/testbed.json" --phases 1 --per-run-paths \
	>"$T/bad" 2>&1
[ $? -eq 2 ] && grep -q "run-crux-2 has no paths.txt" "$T/bad" || fail "a run without paths.txt: $(cat "$T/bad")"
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/none.json" >"$T/bad" 2>&1
[ $? -eq 2 ] && grep -q "a result file of bench/testbed/run.sh" "$T/bad" || fail "a missing file: $(cat "$T/bad")"
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/measured.json" --seeds 0 >"$T/bad" 2>&1
[ $? -eq 2 ] && grep -q "expected 1..100" "$T/bad" || fail "--seeds 0: $(cat "$T/bad")"
# steps.py: the wait per ring step and the rate, fitted from a trainer log with known ones
# (4 ranks, 4 buckets of 1, 2, 3, 4 tenths of 1 MB: 6 steps x 5 ms + bytes x 2(n-1)/n at 20 Mbit/s)
mkdir -p "$T/run-x-1/logs"
python3 - "$T/run-x-1/logs/j-r0.log" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("# crux-tb-trainer job=j model=m rank=0 nranks=4 host=h0 compute_ms=100 grad_bytes=1000000 buckets=4\n")
    t = 10**9
    for it in range(8):
        start, ce = t, t + 10**8
        ends, e = [], ce
        for b in range(4):
            e += int((6 * 0.005 + 1e6 * (b + 1) / 10 * 1.5 * 8 / 20e6) * 1e9)
            ends.append(e)
        f.write(f"{it} {start} {ce} {e} " + " ".join(map(str, ends)) + "\n")
        t = e + 1000
    f.write("# done iters=8\n")
PY
python3 "$S/bench/testbed/steps.py" --json "$T/steps.json" "$T/run-x-1" >"$T/steps" 2>&1 || fail "steps.py exited $?: $(cat "$T/steps")"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["fits"][0]; assert abs(r["alpha_ms_per_step"] - 5) < 0.01 and abs(r["rate_mbit_s"] - 20) < 0.01, r' \
	"$T/steps.json" || fail "steps.py did not recover 5 ms per step and 20 Mbit/s: $(cat "$T/steps")"
python3 "$S/bench/testbed/steps.py" "$T/nosuch" >/dev/null 2>&1
[ $? -eq 2 ] || fail "steps.py on a directory without logs did not exit 2"

# levels.py and predict.py on the levels the agent applied (its level log): 4 jobs of
# 10 one-second iterations from T; every job profiled (top level) for the first second,
# then the GPT-like job alone on level 1 (run A), or joined there by bert-a from
# T + 5.5 s on (run B)
python3 - "$T/lv" "$T/measured.json" <<'PY'
import os, shutil, sys, time
root, measured = sys.argv[1], sys.argv[2]
T = 1.7e9
def stamp(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(round((t % 1) * 1000)):03d}Z"
for name, join in (("a", None), ("b", 5.5)):
    run = os.path.join(root, name, "run-crux-1")
    os.makedirs(os.path.join(run, "logs"))
    shutil.copy(measured, os.path.join(root, name, "testbed.json"))
    jobs = (("gpt", "gpt", 8, "high"), ("bert-a", "bert", 4, "low"), ("bert-b", "bert", 4, "low"),
            ("resnet", "resnet", 2, "low"))
    with open(os.path.join(run, "jobs.txt"), "w") as f:
        for j in jobs:
            f.write(" ".join(map(str, j)) + "\n")
    for j in jobs:
        with open(os.path.join(run, "logs", f"{j[0]}-r0.log"), "w") as f:
            f.write(f"# crux-tb-trainer job={j[0]} model={j[1]} rank=0 nranks={j[2]} host=h0 compute_ms=100 "
                    "grad_bytes=1000 buckets=1 realtime_offset_ns=0\n")
            for i in range(10):
                s = int((T + i) * 1e9)
                f.write(f"{i} {s} {s + 10**8} {s + 10**9} {s + 10**9}\n")
    with open(os.path.join(run, "cruxd.log"), "w") as f:
        f.write(f"{stamp(T)} cruxd[1] INFO: cruxd 0.1.0 started (pid 1) on x: 2 levels\n")
        for j in jobs:
            f.write(f"{stamp(T)} cruxd[1] INFO: job env:{j[0]}: level 1, profiling (table generation 2)\n")
        for j in jobs:
            f.write(f"{stamp(T + 1)} cruxd[1] INFO: job env:{j[0]}: level 1 -> {1 if j[0] == 'gpt' else 0} "
                    "(table generation 3)\n")
        if join:
            f.write(f"{stamp(T + join)} cruxd[1] INFO: job env:bert-a: level 0 -> 1 (table generation 4)\n")
    shutil.copytree(run, os.path.join(root, name, "run-paths-1"))
PY
python3 "$S/bench/testbed/levels.py" --json "$T/lv.json" "$T/lv/b/run-crux-1" >"$T/lvout" 2>&1 ||
	fail "levels.py exited $?: $(cat "$T/lvout")"
python3 - "$T/lv.json" <<'PY' || fail "levels.py: wrong states: $(cat "$T/lvout")"
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["job"] == "gpt" and r["iterations"] == 10 and r["first_decided_iteration"] == 1, r
assert (r["profiling"]["count"], r["alone"]["count"], r["shared"]["count"]) == (1, 4, 5), r
assert abs(r["shared_time_fraction"] - 0.5) < 0.02, r["shared_time_fraction"]
assert abs(r["rows"][5]["shared_fraction"] - 0.5) < 0.06, r["rows"][5]
assert abs(r["wake_late_ms"]) < 1e-6, r["wake_late_ms"]  # every compute ended on time
PY
for v in a b; do
	python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/lv/$v/testbed.json" --seeds 2 --phases 2 \
		--applied-levels --out "$T/lv-$v.json" >"$T/lvp" 2>&1 || fail "predict.py on run $v's level log exited $?: $(cat "$T/lvp")"
done
grep -q "levels: crux as applied (2 assignments)" "$T/lvp" || fail "predict.py does not say the levels were applied: $(cat "$T/lvp")"
grep -q "^  gpt bert-a .*bert-a 1.000s (4) / " "$T/lvp" || fail "no per-assignment line for gpt + bert-a on top: $(cat "$T/lvp")"
python3 - "$T/lv-a.json" "$T/lv-b.json" <<'PY' || fail "predict.py: the applied levels not used"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
la, lb = a["arms"]["crux"]["levels_applied"], b["arms"]["crux"]["levels_applied"]
assert a["arms"]["crux"]["levels_source"] == "applied", a["arms"]
assert len(la) == 1 and la[0]["levels"] == {"gpt": 1, "bert-a": 0, "bert-b": 0, "resnet": 0}, la
assert abs(la[0]["share"] - 1) < 1e-9, la
shares = {c["levels"]["bert-a"]: c["share"] for c in lb}
assert len(lb) == 2 and abs(shares[0] - 0.5) < 0.02 and abs(shares[1] - 0.5) < 0.02, lb
assert b["arms"]["crux"]["levels"]["bert-a"] == [0, 1], b["arms"]["crux"]["levels"]
# per assignment, the iterations run wholly under it (1 s each): 4 before bert-a joins the top
# level at T + 5.5 s (iterations 1-4), 4 after (6-9); iteration 5 straddles the change
for c in lb:
    for n, r in c["jobs"].items():
        assert r["measured_iterations"] == 4 and r["measured_iter_s"] == 1.0, (c["levels"], n, r)
        assert r["reference_iter_s"] > 0, (c["levels"], n, r)
# sharing the top level for half the window slows the GPT-like job and speeds bert-a
ga, gb = (x["jobs"]["gpt"]["crux"]["reference_iter_s"] for x in (a, b))
ba, bb = (x["jobs"]["bert-a"]["crux"]["reference_iter_s"] for x in (a, b))
assert gb > ga * 1.02 and bb < ba, (ga, gb, ba, bb)
PY
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/lv/b/testbed.json" --seeds 1 --phases 1 \
	--out "$T/lv-p.json" >"$T/lvp" 2>&1 || fail "predict.py beside level logs exited $?"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["arms"]["crux"]["levels_source"] == "planned", d["arms"]["crux"]' \
	"$T/lv-p.json" || fail "without --applied-levels the level log was used"
# --verdict beside runs that recorded their spines and levels (run A's level logs, run 1's
# paths): the accuracy goal judged on each run modelled as it ran, the a-priori errors beside
mkdir -p "$T/vr"
cp "$T/measured.json" "$T/vr/testbed.json"
for arm in none crux paths; do
	if [ $arm = none ]; then mkdir -p "$T/vr/run-none-1"; else cp -r "$T/lv/a/run-$arm-1" "$T/vr/"; fi
	cp "$T/pr/run-$arm-1/paths.txt" "$T/vr/run-$arm-1/" || fail "fixture: no paths.txt in run-$arm-1"
done
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/vr/testbed.json" --seeds 2 --phases 1 \
	--standing-bytes 0 --verdict --out "$T/vr.json" >"$T/vvr" 2>&1 || fail "--verdict as run exited $?: $(cat "$T/vvr")"
last="$(tail -n 1 "$T/vvr")"
for k in "arms as run, each run on its own spines and levels: none " "; a priori: none " "points; as run +"; do
	grep -qF "$k" <<<"$last" || fail "verdict lacks '$k': $last"
done
python3 - "$T/vr.json" <<'PY' || fail "the as-run comparison is not in the result file"
import json, sys
d = json.load(open(sys.argv[1]))
r = d["as_run"]
assert set(r) == {"none", "crux", "paths"}, r
for a, x in r.items():
    # one run per arm: its model against the arm's measured median
    assert abs(x["reference_error"] - (x["reference_util"] / x["measured_util"] - 1)) < 1e-9, (a, x)
    assert x["reference_within_10pct"] == (abs(x["reference_error"]) <= 0.10), (a, x)
# the a-priori rows (ECMP draws, planned levels) stay the result file's main figures
assert d["arms"]["crux"]["levels_source"] == "planned" and not d["per_run_paths"], d["arms"]["crux"]
PY
# a run without its agent's log: --applied-levels refuses, naming what is missing
rm "$T/lv/b/run-paths-1/cruxd.log"
python3 "$S/bench/testbed/predict.py" --build "$B" --measured "$T/lv/b/testbed.json" --seeds 1 --phases 1 \
	--applied-levels >"$T/lvp" 2>&1
[ $? -eq 2 ] && grep -q "no level log for every run-paths-" "$T/lvp" || fail "--applied-levels without logs: $(cat "$T/lvp")"
sed -i 's/ realtime_offset_ns=0//' "$T/lv/b/run-crux-1/logs/gpt-r0.log"
python3 "$S/bench/testbed/levels.py" "$T/lv/b/run-crux-1" >"$T/lvout" 2>&1
[ $? -eq 2 ] && grep -q "no realtime_offset_ns" "$T/lvout" || fail "levels.py on an old trainer log: $(cat "$T/lvout")"

echo "ok: scenario as data, predictions against known medians, bad input refused"
