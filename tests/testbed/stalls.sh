#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Stall breakdown on the testbed (issue 31): a 2-rank job of the emulator, one rank
# per network namespace joined by a veth pair, compute emulated by sleeping
# (--compute-ms), every gradient byte through the real plugin, the real preload
# profiling it. A known network stall is injected by shaping the link (tbf at a
# rate R on both ends): the all-reduce of G gradient bytes then waits at least
# G x 8 / R on the network. While it runs,
# `cruxctl --json placement` and `--json status` read the breakdown from the profile
# records; after it, the trainer's own timestamps give the truth per iteration
# (compute phase, all-reduce phase) over the same window each rank's figures come
# from (window_end_ns, window_s). Checks, per rank and rate: the reported
# network-stall fraction within 5 % of the iteration time of the measured
# all-reduce fraction, the compute fraction within 5 %, the all-reduce at least
# the injected G x 8 / R, and the job's figure the mean of its ranks'.
# Prints the figures as JSON lines (the README's table comes from them).
#   stalls.sh SOURCE_ROOT BUILD_ROOT [OUT_JSON]
# Root only (namespaces, tc): exit 77 otherwise. KEEP=1 keeps the run directory.
set -uo pipefail
# shellcheck disable=SC2034 # SOURCE_ROOT: the testbed tests' common arguments
S="$1"
B="$2"
OUT_JSON="${3:-}"
. "$(dirname "$0")/../lib/harness.sh"
cxt_need_root "network namespaces, tc"
cxt_need_cmd ip iproute2
cxt_need_cmd tc iproute2
cxt_need_cmd unshare util-linux
cxt_need_cmd python3
TRAINER="$B/bench/testbed/crux-tb-trainer"
EMU_DIR="$B/bench/testbed/emu"
PLUGIN_DIR="$B/plugin"
PRELOAD="$B/preload/libcrux-preload.so"
CTL="$B/agent/cruxctl/cruxctl"
for f in "$TRAINER" "$PLUGIN_DIR/libnccl-net-crux.so" "$PRELOAD" "$CTL"; do
	[ -e "$f" ] || { echo "SKIP: $f not built"; exit 77; }
done
tag="st$$"
NA="cx$tag-a"
NB="cx$tag-b"
cxt_workdir crux-stalls
T=$CXT_W
pids=()
# The ranks' stderr (*.err) says why one failed; their *.log end with the last
# iterations they marked.
fail() {
	for f in "$T"/*.err; do [ -s "$f" ] && { echo "== $f"; tail -n 5 "$f"; }; done
	CXT_LOG_LINES=5 cxt_fail "$@"
}

cxt_ns "$NA"
cxt_ns "$NB"
cxt_veth "$NA" cxst0 10.231.0.1 "$NB" cxst0 10.231.0.2

COMPUTE_MS=150
ITERS=60
# run RATE_MBIT (0: unshaped): one job, both ranks; prints one JSON line with the figures
# It runs in $(...), a subshell without the exit trap: its ranks end by timeout 120.
run() {
	local d="$1" job="st-r$1" r ns addr rc=0
	local shm="$T/shm-$d"
	mkdir -m 755 "$shm"
	for n in "$NA" "$NB"; do
		if [ "$d" -gt 0 ]; then
			ip netns exec "$n" tc qdisc replace dev cxst0 root tbf rate "${d}mbit" burst 16kb \
				latency 1s || fail "tbf"
		else
			ip netns exec "$n" tc qdisc del dev cxst0 root 2>/dev/null
		fi
	done
	pids=()
	for r in 0 1; do
		if [ $r = 0 ]; then ns="$NA" addr=10.231.0.1; else ns="$NB" addr=10.231.0.2; fi
		ip netns exec "$ns" unshare --uts sh -c 'hostname "$0"; exec "$@"' "$addr" \
			env LD_LIBRARY_PATH="$EMU_DIR:$PLUGIN_DIR" LD_PRELOAD="$PRELOAD" \
			NCCL_NET_PLUGIN=crux NCCL_SOCKET_IFNAME==cxst0 CRUX_SOCKET_IFNAME==cxst0 \
			CRUX_SHM_DIR="$shm" CRUX_JOB_ID="$job" CRUX_TIMING=host \
			CRUX_PROFILE_WINDOW=2s CRUX_PUBLISH_INTERVAL=100ms CRUX_BUSY_PERIOD=6s \
			CRUX_TB_CHUNK_BYTES=65536 RANK="$r" WORLD_SIZE=2 LOCAL_RANK=0 \
			timeout 120 "$TRAINER" --job "$job" --model tiny --rank "$r" --nranks 2 \
			--compute-ms "$COMPUTE_MS" --grad-mb 0.25 --buckets 2 --iters "$ITERS" \
			--id-file "$T/$job.id" --mark-iterations --log "$T/$job-r$r.log" \
			2>"$T/$job-r$r.err" &
		pids+=($!)
	done
	# Wait for two windows and one busy period of steady state, then read the breakdown
	# a few times while the job runs (the last complete reading counts).
	local t0=$SECONDS got=0
	while [ $((SECONDS - t0)) -lt 100 ]; do
		kill -0 "${pids[0]}" 2>/dev/null || break
		if [ $((SECONDS - t0)) -ge 5 ] &&
			CRUX_SHM_DIR="$shm" "$CTL" --json placement >"$T/$job.try" 2>/dev/null &&
			python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); j=[x for x in d["jobs"] if x["id"]==sys.argv[2]]; sys.exit(0 if j and j[0]["ranks"]==2 and j[0]["network_stall_fraction"] is not None else 1)' \
				"$T/$job.try" "env:$job" 2>/dev/null; then
			cp "$T/$job.try" "$T/$job.placement"
			CRUX_SHM_DIR="$shm" "$CTL" --json status >"$T/$job.status" 2>/dev/null
			got=$((got + 1))
			[ $got -ge 3 ] && break
		fi
		sleep 1
	done
	for p in "${pids[@]}"; do
		wait "$p" || rc=$?
	done
	pids=()
	[ $rc = 0 ] || fail "rate $d Mbit/s: a rank failed (rc $rc)"
	[ -s "$T/$job.placement" ] || fail "rate $d Mbit/s: cruxctl placement never showed the job with its network part"
	python3 - "$T/$job.placement" "$T/$job.status" "env:$job" "$d" "$T/$job-r0.log" "$T/$job-r1.log" <<'PY' || fail "rate $d Mbit/s"
import json, sys
place, status, job, rate = (json.load(open(sys.argv[1])), json.load(open(sys.argv[2])),
                            sys.argv[3], float(sys.argv[4]))
logs = sys.argv[5:]
pj = [x for x in place["jobs"] if x["id"] == job][0]
recs = [r for r in status["records"]["list"] if r["job_id"] == job and r["compute"]]
assert len(recs) == 2, "expected both ranks' records"
ok = True
out = {"rate_mbit": rate or None, "ranks": []}
for r in recs:
    c, st = r["compute"], r["stalls"]
    lines = open(logs[r["rank"]]).read().splitlines()
    grad = int([w for w in lines[0].split() if w.startswith("grad_bytes=")][0].split("=")[1])
    rows = [[int(v) for v in l.split()[:4]] for l in lines if l[:1].isdigit()]
    # the trainer's iterations inside the window the record's figures come from
    lo, hi = c["window_end_ns"] - c["window_s"] * 1e9, c["window_end_ns"]
    sel = [x for x in rows if x[1] >= lo - 1e6 and x[3] <= hi + 1e6]
    assert len(sel) >= 2, f"rank {r['rank']}: {len(sel)} iterations in the window"
    it = sum(x[3] - x[1] for x in sel)
    comm = sum(x[3] - x[2] for x in sel)
    truth_net, truth_comp = comm / it, 1 - comm / it  # every byte crosses hosts
    err_net, err_comp = st["network"] - truth_net, st["compute"] - truth_comp
    out["ranks"].append({"rank": r["rank"], "iterations": len(sel), "iter_s": round(it / len(sel) / 1e9, 4),
                         "measured_allreduce_fraction": round(truth_net, 4),
                         "reported_network_stall_fraction": round(st["network"], 4),
                         "reported_interconnect_stall_fraction": round(st["interconnect"], 4),
                         "reported_compute_fraction": round(st["compute"], 4),
                         "network_error": round(err_net, 4), "compute_error": round(err_comp, 4)})
    if abs(err_net) > 0.05:
        print(f"rank {r['rank']}: network stall {st['network']:.4f} vs measured {truth_net:.4f}: off by more than 5 % of the iteration"); ok = False
    if abs(err_comp) > 0.05:
        print(f"rank {r['rank']}: compute {st['compute']:.4f} vs measured {truth_comp:.4f}: off by more than 5 %"); ok = False
    # the injected stall is there: a 2-rank ring all-reduce sends the whole gradient over the link
    floor_ms = grad * 8 / (rate * 1e6) * 1e3 if rate else 0
    if comm / len(sel) / 1e6 < 0.9 * floor_ms:
        print(f"rank {r['rank']}: all-reduce {comm / len(sel) / 1e6:.1f} ms: less than the link allows ({floor_ms:.1f} ms)"); ok = False
# the job's figure (status, read with the records) is the mean of its ranks'
sj = [x for x in status["jobs"] if x["id"] == job][0]["stalls"]
mean_net = sum(r["stalls"]["network"] for r in recs) / 2
if abs(sj["network"] - mean_net) > 1e-9:
    print(f"job figure {sj['network']} is not the ranks' mean {mean_net}"); ok = False
out["placement_network_stall_fraction"] = round(pj["network_stall_fraction"], 4)
print(json.dumps(out))
sys.exit(0 if ok else 1)
PY
}

lines=()
for d in 0 20 10; do
	line="$(run "$d")" || { echo "$line"; fail "rate $d Mbit/s"; }
	echo "$line"
	lines+=("$line")
done
if [ -n "$OUT_JSON" ]; then
	printf '%s\n' "${lines[@]}" | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin if l.strip()]; e=[abs(x["network_error"]) for r in rows for x in r["ranks"]]; json.dump({"test":"testbed-stalls","compute_ms":int(sys.argv[1]),"runs":rows,"max_abs_network_error":max(e),"mean_abs_network_error":round(sum(e)/len(e),4)}, open(sys.argv[2],"w"), indent=1)' "$COMPUTE_MS" "$OUT_JSON"
fi
echo PASS
