#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/gpu/jobs.sh BUILD OUTDIR: real PyTorch DDP jobs sharing an emulated
# fabric, no scheduling vs Crux (run by tests/gpu/run.sh's 'jobs' phase, as
# root, on a machine with one GPU).
#
# The testbed's fabric (bench/testbed/fabric.sh): 2 leaves x 2 hosts, one
# spine, HTB strict priority by DSCP on every egress. Two 2-rank jobs of the
# same model size (so the same bytes per iteration) and different batch (so
# different compute per iteration, i.e. GPU intensity); each job has one rank
# on each leaf, so both jobs' all-reduces cross the one spine link:
#   hi  examples/pytorch/ddp_train.py, large batch  (high GPU intensity)
#   lo  the same model, small batch                  (low GPU intensity)
# Every rank runs in its host's namespace (host name = its fabric address, as
# in the testbed), with its own NCCL_HOSTID, the Crux net plugin as NCCL's
# network, the preload and the Crux NCCL profiler plugin (whichever claims
# first publishes; CUPTI timing) in both arms, so both arms are measured the
# same way. The arms differ only in the agent:
#   none  no cruxd: no decision table, every job on the default class
#   crux  one cruxd schedules all four emulated hosts (as the testbed's
#         'agent' decider): GPU intensity -> priority level -> DSCP
# plus solo runs (each job alone on the fabric) for the isolated iteration
# and compute times. Every rank logs each iteration's start and end; cruxctl
# snapshots hold the CUPTI profile of every rank.
#
# Knobs: CRUX_GPU_JOBS_REPS (3), CRUX_GPU_JOBS_SECONDS (40),
# CRUX_GPU_JOBS_HOST_MBIT (2000), CRUX_GPU_JOBS_SPINE_MBIT (1000),
# CRUX_GPU_JOBS_WIDTH (2048), CRUX_GPU_JOBS_DEPTH (4),
# CRUX_GPU_JOBS_HI_BATCH (65536), CRUX_GPU_JOBS_LO_BATCH (1024),
# CRUX_GPU_JOBS_SOLO (1: run the solo arms).
set -uo pipefail

PROG=jobs.sh
B="${1:?usage: jobs.sh BUILD OUTDIR}"
OUT="${2:?usage: jobs.sh BUILD OUTDIR}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
B="$(cd "$B" && pwd)" || exit 1
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
REPS="${CRUX_GPU_JOBS_REPS:-3}"
SECS="${CRUX_GPU_JOBS_SECONDS:-40}"
HOST_MBIT="${CRUX_GPU_JOBS_HOST_MBIT:-2000}"
SPINE_MBIT="${CRUX_GPU_JOBS_SPINE_MBIT:-1000}"
WIDTH="${CRUX_GPU_JOBS_WIDTH:-2048}"
DEPTH="${CRUX_GPU_JOBS_DEPTH:-4}"
HI_BATCH="${CRUX_GPU_JOBS_HI_BATCH:-65536}"
LO_BATCH="${CRUX_GPU_JOBS_LO_BATCH:-1024}"
TAG=gj
FABRIC="$ROOT/bench/testbed/fabric.sh"
STATE="/run/crux-testbed$TAG"
PLUGIN_DIR="$B/plugin"
PROFILER_DIR="$B/profiler"
PRELOAD="$B/preload/libcrux-preload.so"
CRUXD="$B/agent/cruxd/cruxd"
CTL="$B/agent/cruxctl/cruxctl"
TRAIN="$ROOT/examples/pytorch/ddp_train.py"

die() { echo "$PROG: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, tc)"
for f in "$PLUGIN_DIR/libnccl-net-crux.so" "$PROFILER_DIR/libnccl-profiler-crux.so" "$PRELOAD" "$CRUXD" "$CTL"; do
	[ -e "$f" ] || die "$f missing: run the build phase first"
done
command -v tc >/dev/null || die "'tc' not found: the fabric needs iproute2's tc"
command -v unshare >/dev/null || die "'unshare' not found (util-linux)"

PIDS=()
AGENT=""
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	[ -n "$AGENT" ] && kill -TERM "$AGENT" 2>/dev/null
	sleep 1
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	"$FABRIC" down --tag "$TAG" >/dev/null 2>&1
}
trap cleanup EXIT

"$FABRIC" up --tag "$TAG" --owner $$ --leaves 2 --hosts-per-leaf 2 --spines 1 \
	--host-rate "$HOST_MBIT" --spine-rate "$SPINE_MBIT" --weights "1 3" >"$OUT/fabric-up.log" 2>&1 ||
	{ cat "$OUT/fabric-up.log"; die "could not build the fabric"; }
host_ns() { awk -v h="$1" '$1 == h {print $2}' "$STATE/hosts"; }
host_addr() { awk -v h="$1" '$1 == h {print $3}' "$STATE/hosts"; }

# The scheduler's view: hosts by fabric address, rates in Gbit/s.
TOPO="$OUT/topology.txt"
{
	echo "# tests/gpu/jobs.sh: 2 leaves x 2 hosts, 1 spine, hosts $HOST_MBIT Mbit/s, spine links $SPINE_MBIT Mbit/s"
	echo "switch s0"
	echo "switch l0"
	echo "switch l1"
	for h in 0 1 2 3; do
		l=$((h / 2))
		echo "host $(host_addr "h$h")"
		echo "link $(host_addr "h$h") l$l $(awk -v m="$HOST_MBIT" 'BEGIN{printf "%g", m/1000}')"
	done
	echo "link l0 s0 $(awk -v m="$SPINE_MBIT" 'BEGIN{printf "%g", m/1000}')"
	echo "link l1 s0 $(awk -v m="$SPINE_MBIT" 'BEGIN{printf "%g", m/1000}')"
} >"$TOPO"

# job NAME BATCH HOST0 HOST1 PORT: one rank on each host
JOBS=("hi $HI_BATCH h0 h2 29610" "lo $LO_BATCH h1 h3 29620")

cat >"$OUT/setup.json" <<EOF
{"fabric": "2 leaves x 2 hosts, 1 spine, hosts $HOST_MBIT Mbit/s, spine links $SPINE_MBIT Mbit/s, HTB strict priority by DSCP (2 levels, guaranteed shares 1:3)",
 "model": "ddp_train.py --width $WIDTH --depth $DEPTH (fp32 gradients of $((DEPTH * (WIDTH * WIDTH + WIDTH) * 4)) bytes per iteration)",
 "jobs": {"hi": {"batch": $HI_BATCH, "hosts": ["h0", "h2"]}, "lo": {"batch": $LO_BATCH, "hosts": ["h1", "h3"]}},
 "seconds": $SECS, "reps": $REPS, "mps": ${CRUX_GPU_MPS:-0}}
EOF

# start_job DIR ARM NAME BATCH H0 H1 PORT
start_job() {
	local dir="$1" arm="$2" name="$3" batch="$4" h0="$5" h1="$6" port="$7" r h ns addr
	local master
	master="$(host_addr "$h0")"
	for r in 0 1; do
		h="$h0"
		[ $r = 1 ] && h="$h1"
		ns="$(host_ns "$h")"
		addr="$(host_addr "$h")"
		ip netns exec "$ns" unshare --uts sh -c 'hostname "$0"; exec "$@"' "$addr" \
			env LD_LIBRARY_PATH="$PLUGIN_DIR:$PROFILER_DIR:${LD_LIBRARY_PATH:-}" LD_PRELOAD="$PRELOAD" \
			NCCL_NET_PLUGIN=crux NCCL_NET=Crux NCCL_PROFILER_PLUGIN=crux CRUX_TRANSPORT=socket \
			NCCL_SOCKET_IFNAME==eth0 NCCL_HOSTID="gj-$h" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
			CRUX_SHM_DIR="$dir/shm" CRUX_JOB_ID="$name" CRUX_TIMING=cupti CRUX_PROFILE_WINDOW=2s \
			RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR="$master" MASTER_PORT="$port" \
			PYTHONUNBUFFERED=1 timeout $((SECS + 120)) python3 "$TRAIN" --width "$WIDTH" --depth "$DEPTH" \
			--batch "$batch" --seconds "$SECS" --mark --log "$dir/$name-r$r.iters" \
			>"$dir/$name-r$r.out" 2>"$dir/$name-r$r.err" &
		PIDS+=($!)
	done
}

# run_one ARM REP [JOB...]: one run; an empty job list runs every job
run_one() {
	local arm="$1" rep="$2"
	shift 2
	local want=" $* " name
	local dir="$OUT/$arm.r$rep" t0=$SECONDS j s=0 fail=0 p
	mkdir -p "$dir/shm"
	chmod 0755 "$dir" "$dir/shm"
	echo "$arm" >"$dir/arm"
	if [ "$arm" = crux ]; then
		env CRUX_SHM_DIR="$dir/shm" CRUX_TOPOLOGY="$TOPO" CRUX_PROFILE_WINDOW=5s CRUX_LEVELS=2 \
			CRUX_AGENT_INTERVAL=250ms CRUX_AGENT_HOLD=2s CRUX_PROBE=0 CRUX_LEVEL_WEIGHTS=1,3 \
			CRUX_LOG_LEVEL=info "$CRUXD" >"$dir/cruxd.log" 2>&1 &
		AGENT=$!
		sleep 0.5
		kill -0 "$AGENT" 2>/dev/null || { tail -5 "$dir/cruxd.log"; AGENT=""; return 1; }
	fi
	: >"$dir/jobs"
	for j in "${JOBS[@]}"; do
		name="${j%% *}"
		if [ "$want" = "  " ] || [[ "$want" == *" $name "* ]]; then
			# shellcheck disable=SC2086
			start_job "$dir" "$arm" $j
			echo "$j" >>"$dir/jobs"
		fi
	done
	while :; do
		local alive=0
		for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
		[ "$alive" -eq 0 ] && break
		sleep 2
		s=$((s + 1))
		"$CTL" --shm-dir "$dir/shm" --json status >"$dir/status.$(printf %03d $s).json" 2>/dev/null
	done
	for p in "${PIDS[@]}"; do wait "$p" || fail=1; done
	PIDS=()
	if [ -n "$AGENT" ]; then
		kill -TERM "$AGENT" 2>/dev/null
		wait "$AGENT" 2>/dev/null
		AGENT=""
	fi
	"$FABRIC" status --tag "$TAG" >"$dir/fabric-counters.txt" 2>&1
	grep -h "Using network\|PROFILER/Crux\|Crux: " "$dir"/*-r0.err 2>/dev/null | sort | uniq -c | head -6
	echo "jobs: $arm r$rep: $(for f in "$dir"/*-r0.iters; do [ -f "$f" ] && echo "$(basename "$f" .iters) $(wc -l <"$f") iterations"; done | tr '\n' ' ')($((SECONDS - t0)) s)"
	[ "$fail" -eq 0 ] || { echo "jobs: $arm r$rep: a rank failed"; tail -3 "$dir"/*.err; return 1; }
}

rc=0
if [ "${CRUX_GPU_JOBS_SOLO:-1}" = 1 ]; then
	run_one solo-hi 1 hi || rc=1
	run_one solo-lo 1 lo || rc=1
fi
for rep in $(seq 1 "$REPS"); do
	run_one none "$rep" || rc=1
	run_one crux "$rep" || rc=1
done
exit $rc
