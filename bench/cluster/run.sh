#!/bin/sh
# bench/cluster/run.sh [BUILD_DIR]: for N = 100 and N = 1000 (Lingjun
# topology), RUNS times each, start a fresh 3-member etcd on loopback, run
# cluster-bench, and write bench/results/cluster.json: every run, and per N
# the median over runs with the spread (min..max). Bounded: each run has its
# own time limit.
#   CLUSTER_BENCH_RUNS      runs per N (3)
#   CLUSTER_BENCH_ARRIVALS  job arrivals per run (100)
#   CLUSTER_BENCH_THREADS   threads stepping the agents (16; 1: one loop)
#   CLUSTER_BENCH_SWEEP_MS  each agent's step period (1000: cruxd's pass)
#   CLUSTER_BENCH_SIZES     "N TTL STEADY_S" specs, ';'-separated
#                           ("100 10 30;1000 10 60": a lease of 10 s at both sizes)
#   CLUSTER_BENCH_OUT       result file (bench/results/cluster.json)
#   CLUSTER_BENCH_NICE      niceness of the emulated agents (10; 0: none)
# etcd runs with its default raft timing (heartbeat 100 ms, election 1 s),
# not the tests' 50 ms / 500 ms: three members sharing two cores with 1,000
# agents otherwise hold elections that production members on their own
# machines would not. Each run records etcd's elections and slow requests.
# The N emulated agents (N watcher threads) run niced: on real hosts their
# CPU is not the etcd members' CPU, here it is, and a schedule's fan-out to
# 1,000 watchers otherwise starves etcd into elections.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
bin=$build/bench/cluster/cluster-bench
runs=${CLUSTER_BENCH_RUNS:-3}
arrivals=${CLUSTER_BENCH_ARRIVALS:-100}
threads=${CLUSTER_BENCH_THREADS:-16}
sizes=${CLUSTER_BENCH_SIZES:-100 10 30;1000 10 60}
out=${CLUSTER_BENCH_OUT:-$root/bench/results/cluster.json}
. "$root/tests/cluster/etcd-lib.sh"
etcd_need
[ -x "$bin" ] || { echo "build first: meson compile -C $build" >&2; exit 1; }
# dash and bash both have ulimit -n; a shell without it just keeps its limit.
# shellcheck disable=SC3045
ulimit -n 65536 2>/dev/null || true
ETCD_TIMING=${ETCD_TIMING:---heartbeat-interval 100 --election-timeout 1000}
tmp=$(mktemp -d /tmp/crux-cluster-bench.XXXXXX)
trap 'etcd_stop; rm -rf "$tmp"' EXIT INT TERM

# the result file: bench/cluster/summary.py (median and spread over the runs, goals)
summary() { python3 "$here/summary.py" "$@"; }

sizefiles=""
IFS_OLD=$IFS
IFS=';'
for spec in $sizes; do
	IFS=$IFS_OLD
	set -- $spec
	hosts=$1 ttl=$2 steady=$3
	r=1
	files=""
	while [ "$r" -le "$runs" ]; do
		etcd_stop
		rm -rf "$tmp"/m*
		etcd_start "$tmp" 3
		echo "== N=$hosts run $r/$runs (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
		timeout 900 nice -n "${CLUSTER_BENCH_NICE:-10}" "$bin" "$ETCD_ENDPOINTS" "$hosts" "$ttl" "$steady" \
			"$root/bench/data/lingjun-topo.csv" "$tmp/n$hosts-$r.json" "$arrivals" "$threads" |
			tee "$tmp/log" | grep -v '^arrival ' || true
		echo "slowest arrivals:"
		grep '^arrival ' "$tmp/log" | sed 's/.* last \([0-9.]*\);.*/\1 &/' | sort -gr | head -n 3 |
			cut -d' ' -f2-
		[ -s "$tmp/n$hosts-$r.json" ] || { echo "cluster-bench N=$hosts run $r failed" >&2; exit 1; }
		# etcd's own complaints about slow requests during the run
		slow=$(cat "$tmp"/m*.log | grep -c 'took too long' || true)
		# raft terms after the first: elections while the benchmark ran
		terms=$(cat "$tmp"/m*.log | sed -n 's/.*elected leader [0-9a-f]* at term \([0-9]*\).*/\1/p' |
			sort -n | tail -n 1)
		el=$(( ${terms:-2} > 2 ? ${terms:-2} - 2 : 0 ))
		summary run "$tmp/n$hosts-$r.json" "$slow" "$el" "$tmp/r$hosts-$r.json"
		files="$files $tmp/r$hosts-$r.json"
		r=$((r + 1))
	done
	# shellcheck disable=SC2086 # files is a list of paths without spaces
	summary size "$hosts" "$ttl" "$tmp/size$hosts.json" $files
	sizefiles="$sizefiles $tmp/size$hosts.json"
	IFS=';'
done
IFS=$IFS_OLD
# shellcheck disable=SC2086 # sizefiles is a list of paths without spaces
summary all "$out" "$arrivals" "$threads" "${CLUSTER_BENCH_NICE:-10}" "$ETCD_TIMING" $sizefiles
echo "wrote $out"
