#!/bin/sh
# Decision change -> first message on the new lane, verbs transport over the
# software RDMA device with its firmware-latency mode on (QP create/modify/
# destroy 0.1-1 ms each, one at a time per device, as mlx5), lanes built
# ahead (CRUX_IB_LANES_AHEAD=3) against none (0: a change to a level no warm
# lane carries builds one), RUNS interleaved runs of CHANGES changes each
# (cruxn-bench-laneswitch: the decision cycles through levels 0-3). Per run:
# p50/p99/max of the change's first message and of an unchanged message.
# Figures: medians over the runs, with their range.
# usage: laneswitch.sh CRUXN_BENCH_LANESWITCH SOFTRDMA_LIB OUT_JSON
set -u
BIN=$1 SRLIB=$2 OUT=$3
RUNS=${CRUX_BENCH_ROUNDS:-3}
CHANGES=${CRUX_BENCH_CHANGES:-100}
FW=${CRUX_BENCH_FW_LATENCY_US:-100-1000}
W=$(mktemp -d /tmp/cxls-bench-XXXXXX)
trap 'rm -rf "$W"' EXIT
[ -f "$SRLIB" ] || { echo "no software RDMA device at $SRLIB (build tests/softrdma)"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "the software RDMA device needs CAP_NET_RAW (root)"; exit 1; }
export CRUX_TRANSPORT=verbs CRUX_IBVERBS_LIB="$SRLIB" CRUX_MLX5_LIB="$SRLIB" \
	CRUX_SOFTRDMA_IFNAMES=lo CRUX_SOCKET_IFNAME="=lo" CRUX_SHM_DIR="$W/none" CRUX_LOG_LEVEL=error \
	CRUX_SOFTRDMA_FW_LATENCY_US="$FW"
for _ in $(seq "$RUNS"); do
	for a in 3 0; do
		CRUX_IB_LANES_AHEAD=$a "$BIN" "$CHANGES" 20 > "$W/out" || { cat "$W/out"; exit 1; }
		sed "s/^/$a /" "$W/out" >> "$W/all"
	done
done
# med ARM KIND COLUMN -> "median min max" over the runs
med() {
	awk -v a="$1" -v k="$2" -v c="$3" '$1 == a && $2 == k { print $c }' "$W/all" | sort -g |
		awk '{ v[NR] = $1 } END { printf "%s %s %s", v[int((NR + 1) / 2)], v[1], v[NR] }'
}
json() { # ARM KIND
	# Word splitting wanted: med prints "median min max".
	# shellcheck disable=SC2046
	set -- "$1" "$2" $(med "$1" "$2" 3) $(med "$1" "$2" 4) $(med "$1" "$2" 5)
	printf '{"p50_us": {"median": %s, "min": %s, "max": %s}, "p99_us": {"median": %s, "min": %s, "max": %s}, "max_us": {"median": %s, "min": %s, "max": %s}}' \
		"$3" "$4" "$5" "$6" "$7" "$8" "$9" "${10}" "${11}"
}
# Word splitting wanted below: med prints "median min max".
# shellcheck disable=SC2046
for a in 3 0; do
	set -- $(med $a switch_us 4) ; P99=$1
	set -- $(med $a switch_us 3) ; P50=$1
	set -- $(med $a steady_us 4) ; S99=$1
	set -- $(med $a switch_us 6) ; Q=$1
	echo "lanes ahead $a: change -> first message p50 $P50 us, p99 $P99 us (median of $RUNS runs); unchanged message p99 $S99 us; QPs created per change $Q"
done
cat > "$OUT.tmp" <<JSON
{
  "benchmark": "plugin-verbs-laneswitch",
  "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "machine": "$(uname -srm), $(nproc) cores, shared with other jobs (load average $(cut -d' ' -f1-3 /proc/loadavg))",
  "what": "decision change -> first message on the new lane completed at both ends (8 B), verbs transport over the software RDMA device on loopback with firmware latency $FW us per QP create/modify/destroy; the decision cycles through the classes of levels 0-3, one change every 20 ms; 'steady' is the last unchanged message before each change",
  "runs": $RUNS, "changes_per_run": $CHANGES, "statistic": "median over runs of each run's percentile",
  "goal": "p99 <= 1000 us with firmware latency on",
  "lanes_ahead_3": {"switch": $(json 3 switch_us), "steady": $(json 3 steady_us), "qps_created_per_change": $(med 3 switch_us 6 | cut -d' ' -f1)},
  "lanes_ahead_0": {"switch": $(json 0 switch_us), "steady": $(json 0 steady_us), "qps_created_per_change": $(med 0 switch_us 6 | cut -d' ' -f1)}
}
JSON
mv "$OUT.tmp" "$OUT"
echo "wrote $OUT"
