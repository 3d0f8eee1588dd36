#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run.sh: the testbed experiment. Builds the namespace fabric once, then runs
# a scenario's jobs under both arms, each repeated:
#   none  no scheduling: the net plugin as transport, no agent, no preload
#         (no decision table: default class, ECMP paths)
#   crux  cruxd + LD_PRELOAD=libcrux-preload.so + the same plugin
# and reports per-job iteration time and JCT, cluster GPU utilization, their
# ratios and spread (crux-tb-analyze), writes JSON and a PNG plot.
#
#   run.sh [--build DIR] [--scenario default|mix|short] [--reps N] [--arms "none crux"]
#          [--out DIR] [--json FILE] [--plot FILE] [--tag T] [--check] [--keep]
#          [--decider agent|cluster|static] [--max-slowdown X] [--weights "W0 W1"]
#          [--transport socket|verbs] [--only "JOB ..."] [--cwnd SEGMENTS] [--print-scenario]
# --decider static replaces cruxd by crux-tb-decide, a fixed table giving the
# jobs the levels of their models' intensity order (gpt > bert > resnet).
# --decider cluster runs the testbed as a cluster: one cruxd per emulated host
# in its namespace with its own CRUX_SHM_DIR, coordinated through an etcd on a
# management network of its own (10.254.0.0/24, not the data fabric); the
# default (agent) is one cruxd reading every host's records.
# Arm paths (--arms "none crux paths"): Crux priorities + paths: the cluster
# decider with probing: every host's cruxd probes its peers' ECMP paths
# through the fabric, the leader chooses paths, the plugins bind their ports.
# --max-slowdown: cruxd's fairness guard (CRUX_MAX_SLOWDOWN, default 4; 0 off);
# --weights: guaranteed share per level, lowest first, given to cruxd
# (CRUX_LEVEL_WEIGHTS) and to the fabric's HTB classes alike (default "1 3").
# --transport verbs: the plugin's RDMA transport on the software RDMA device
# (BUILD/tests/softrdma/libsoftrdma.so, a test double carrying RC over TCP,
# each QP marked with its traffic class) instead of its socket transport.
# --only: run only these jobs of the scenario (e.g. one alone: its isolated speed).
# --cwnd: the hosts' TCP window clamp in segments (fabric.sh --cwnd; default 10, 0 = none).
# --print-scenario: print the scenario (fabric, levels, jobs) as data and exit.
set -uo pipefail

PROG=run.sh
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD="$ROOT/build"
SCENARIO=default
REPS=3
ARMS="none crux"
OUT=""
JSON=""
PLOT=""
TAG=""
DECIDER=agent
CHECK=0
PRINT_SCENARIO=0
KEEP=0
RUN_TIMEOUT=240
LEVELS=2
MAX_SLOWDOWN=4
WEIGHTS="1 3"
TRANSPORT=socket
ONLY=""
# TCP window clamp on the hosts (fabric.sh --cwnd, segments): bounds what each
# flow keeps queued; predict.py's queueing latency is derived from it.
TCP_CWND=10
# The ranks' plugin: one data socket per connection (one TCP flow per ring hop,
# as the model has it) and messages above 4 KiB on it, not on the control
# socket. The plugin's default (65536) equals the emulator's 64 KiB chunks, so
# every byte rode the control socket, whose port is ephemeral: the paths arm's
# data sockets, bound to the probed ports of the planned path, carried nothing.
INLINE_BYTES=4096

die() {
	echo "$PROG: $*" >&2
	exit 1
}

usage() {
	awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"
}

while [ $# -gt 0 ]; do
	case "$1" in
	--build) BUILD="$(cd "${2-}" 2>/dev/null && pwd)" || die "--build '${2-}': no such directory"; shift 2 ;;
	--scenario) SCENARIO="${2-}"; shift 2 ;;
	--reps) REPS="${2-}"; shift 2 ;;
	--arms) ARMS="${2-}"; shift 2 ;;
	--out) OUT="${2-}"; shift 2 ;;
	--json) JSON="${2-}"; shift 2 ;;
	--plot) PLOT="${2-}"; shift 2 ;;
	--tag) TAG="${2-}"; shift 2 ;;
	--decider) DECIDER="${2-}"; shift 2 ;;
	--levels) LEVELS="${2-}"; shift 2 ;;
	--max-slowdown) MAX_SLOWDOWN="${2-}"; shift 2 ;;
	--weights) WEIGHTS="${2-}"; shift 2 ;;
	--transport) TRANSPORT="${2-}"; shift 2 ;;
	--only) ONLY="${2-}"; shift 2 ;;
	--cwnd) TCP_CWND="${2-}"; shift 2 ;;
	--check) CHECK=1; shift ;;
	--print-scenario) PRINT_SCENARIO=1; shift ;;
	--keep) KEEP=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown option '$1'" ;;
	esac
done
case "$TCP_CWND" in '' | *[!0-9]*) die "--cwnd '$TCP_CWND' is not valid: expected a number of segments, 0 for no clamp" ;; esac
case "$REPS" in '' | *[!0-9]*) die "--reps '$REPS' is not valid: expected an integer in [1, 20]" ;; esac
[ "$REPS" -ge 1 ] && [ "$REPS" -le 20 ] || die "--reps '$REPS' is not valid: expected an integer in [1, 20]"
case "$DECIDER" in agent | cluster | static) ;; *) die "--decider '$DECIDER' is not valid: expected agent, cluster or static" ;; esac
case "$MAX_SLOWDOWN" in
'' | *[!0-9.]* | *.*.*) die "--max-slowdown '$MAX_SLOWDOWN' is not valid: expected a number >= 1, or 0 (off)" ;;
esac
[ "$(echo $WEIGHTS | wc -w)" -eq "$LEVELS" ] || [ -z "$WEIGHTS" ] ||
	die "--weights '$WEIGHTS' is not valid: expected $LEVELS weights (one per level, lowest first), or \"\""
WEIGHTS_CSV="$(echo $WEIGHTS | tr ' ' ',')"
for a in $ARMS; do
	case "$a" in none | crux | paths) ;; *) die "--arms: unknown arm '$a' (none, crux, paths)" ;; esac
done


# ---- Scenarios --------------------------------------------------------------
# A job line: NAME MODEL ROLE ITERS HOSTS (comma list, one rank per entry, in
# ring order). Hosts h0..h3 sit on leaf 0, h4..h7 on leaf 1: a ring that
# alternates leaves crosses the spines on every hop.
scenario_default() {
	AGENT_WINDOW=5s
	FABRIC_ARGS="--leaves 2 --hosts-per-leaf 4 --spines 2 --host-rate 100 --spine-rate 50"
	SCEN_DESC="GPT-like job on 8 GPUs (all hosts, both leaves) + 2 BERT-like jobs on 4 GPUs + 1 ResNet-like job on 2 GPUs, rings crossing the spines; 2 leaves x 4 hosts, 2 spines, hosts 100 Mbit/s, spine links 50 Mbit/s"
	JOBS=(
		"gpt gpt high 24 h0,h1,h2,h3,h4,h5,h6,h7"
		"bert-a bert low 30 h0,h4,h1,h5"
		"bert-b bert low 30 h2,h6,h3,h7"
		"resnet resnet low 110 h1,h6"
	)
}

scenario_short() {
	# The default fabric and jobs with fewer iterations (CI: direction only).
	scenario_default
	AGENT_WINDOW=4s
	SCEN_DESC="short CI version of the default scenario (fewer iterations): $SCEN_DESC"
	JOBS=(
		"gpt gpt high 16 h0,h1,h2,h3,h4,h5,h6,h7"
		"bert-a bert low 20 h0,h4,h1,h5"
		"bert-b bert low 20 h2,h6,h3,h7"
		"resnet resnet low 75 h1,h6"
	)
}

# mix: the paper's second testbed experiment scaled to this fabric (a GPT job on
# every GPU of the cluster + two BERT + two ResNet jobs, as its 48-GPU GPT + two
# 16-GPU BERT + two 8-GPU ResNet), chosen with predict.py --predict-only: the
# model predicts Crux's gain well clear of the goals here (README, "Scenarios").
scenario_mix() {
	scenario_default
	SCEN_DESC="GPT-like job on 8 GPUs (all hosts, both leaves) + 2 BERT-like jobs on 4 GPUs + 2 ResNet-like jobs on 2 GPUs, rings crossing the spines; 2 leaves x 4 hosts, 2 spines, hosts 100 Mbit/s, spine links 50 Mbit/s"
	JOBS=(
		"gpt gpt high 24 h0,h1,h2,h3,h4,h5,h6,h7"
		"bert-a bert low 30 h0,h4,h1,h5"
		"bert-b bert low 30 h2,h6,h3,h7"
		"resnet-a resnet low 110 h1,h4"
		"resnet-b resnet low 110 h2,h7"
	)
}

case "$SCENARIO" in
default) scenario_default ;;
short) scenario_short ;;
mix) scenario_mix ;;
*) die "--scenario '$SCENARIO' is not valid: expected default, mix or short" ;;
esac
# --only: a subset of the scenario's jobs (e.g. one job alone: its isolated speed).
if [ -n "$ONLY" ]; then
	kept=()
	for o in $ONLY; do
		found=0
		for jl in "${JOBS[@]}"; do
			[ "${jl%% *}" = "$o" ] && { kept+=("$jl"); found=1; }
		done
		[ "$found" -eq 1 ] || die "--only: scenario '$SCENARIO' has no job '$o' (its jobs: $(for jl in "${JOBS[@]}"; do printf '%s ' "${jl%% *}"; done))"
	done
	JOBS=("${kept[@]}")
	SCEN_DESC="$SCEN_DESC; only $ONLY"
fi

# --print-scenario: the scenario as data (for bench/testbed/predict.py, which
# describes it to the scheduling model); no root needed, nothing is built.
if [ "$PRINT_SCENARIO" -eq 1 ]; then
	echo "scenario $SCENARIO"
	echo "fabric $FABRIC_ARGS"
	echo "levels $LEVELS"
	echo "weights $WEIGHTS"
	echo "max_slowdown $MAX_SLOWDOWN"
	echo "cwnd $TCP_CWND"
	echo "profile_window ${AGENT_WINDOW%s}"
	for jl in "${JOBS[@]}"; do echo "job $jl"; done
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	die "needs root: it builds network namespaces, veth links and tc shaping (run it with sudo)"
fi

# ---- Binaries -----------------------------------------------------------------
[ -d "$BUILD" ] || die "build directory '$BUILD' not found: run 'meson setup $BUILD && meson compile -C $BUILD' first"
TRAINER="$BUILD/bench/testbed/crux-tb-trainer"
ANALYZE="$BUILD/bench/testbed/crux-tb-analyze"
EMU_DIR="$BUILD/bench/testbed/emu"
find_one() { find "$BUILD" -name "$1" -type f 2>/dev/null | head -n 1; }
PLUGIN="$(find_one libnccl-net-crux.so)"
PRELOAD="$(find_one libcrux-preload.so)"
CRUXD="$(find_one cruxd)"
DECIDE="$BUILD/bench/testbed/crux-tb-decide"
CRUXCTL="$(find_one cruxctl)"
[ -x "$TRAINER" ] || die "$TRAINER is missing: build first (meson compile -C $BUILD)"
[ -x "$ANALYZE" ] || die "$ANALYZE is missing: build first (meson compile -C $BUILD)"
[ -e "$EMU_DIR/libnccl.so.2" ] || die "$EMU_DIR/libnccl.so.2 is missing: build first"
[ -n "$PLUGIN" ] || die "libnccl-net-crux.so not found under $BUILD: build the plugin first"
# Where cruxd runs once per host (in cluster mode): the paths arm, and the crux arm with --decider cluster.
per_host() { [ "$1" = paths ] || { [ "$1" = crux ] && [ "$DECIDER" = cluster ]; }; }
PER_HOST=0
for a in $ARMS; do per_host "$a" && PER_HOST=1; done
case " $ARMS " in
*" crux "* | *" paths "*)
	[ -n "$PRELOAD" ] || die "libcrux-preload.so not found under $BUILD: build the preload first"
	if [ "$DECIDER" != static ] || [ "$PER_HOST" -eq 1 ]; then
		[ -n "$CRUXD" ] || die "cruxd not found under $BUILD: build the agent first (or use --decider static)"
		if [ "$PER_HOST" -eq 1 ]; then
			ETCD_BIN="$(command -v etcd || true)"
			[ -n "$ETCD_BIN" ] || die "--decider cluster and the paths arm need etcd: install Debian etcd-server (make deps)"
		fi
	else
		[ -x "$DECIDE" ] || die "$DECIDE is missing: build first"
	fi
	;;
esac
PLUGIN_DIR="$(dirname "$PLUGIN")"
# The transport the ranks' plugin uses: extra environment for every rank.
TRANSPORT_ENV=(CRUX_TRANSPORT=socket)
# how the agents probe paths: the way the transport's bytes travel (ECMP hashes the protocol)
PROBE_PROTO=tcp
case "$TRANSPORT" in
socket) ;;
verbs)
	SOFTRDMA="$BUILD/tests/softrdma/libsoftrdma.so"
	[ -f "$SOFTRDMA" ] || die "--transport verbs needs the software RDMA device $SOFTRDMA: build the tests (meson compile -C $BUILD)"
	# one device per host: its fabric NIC, the only non-loopback interface with an address;
	# NCCL_DEBUG=INFO: the plugin names its transport and each lane move in the ranks' logs
	TRANSPORT_ENV=(CRUX_TRANSPORT=verbs CRUX_IBVERBS_LIB="$SOFTRDMA" CRUX_MLX5_LIB="$SOFTRDMA"
		NCCL_DEBUG=INFO)
	# the device's packets are RoCEv2's (UDP to 4791 from the QP's source port)
	PROBE_PROTO=roce
	;;
*) die "--transport '$TRANSPORT' is not valid: expected socket or verbs" ;;
esac

[ -n "$OUT" ] || OUT="$(mktemp -d /tmp/crux-testbed.XXXXXX)"
mkdir -p "$OUT" || die "cannot create $OUT"
OUT="$(cd "$OUT" && pwd)"
[ -n "$JSON" ] || JSON="$OUT/testbed.json"
[ -n "$PLOT" ] || PLOT="$OUT/testbed.png"

FABRIC="$HERE/fabric.sh"
PFX="cxtb${TAG}"
STATE="/run/crux-testbed${TAG}"
PIDS=()
AGENT_PID=""
AGENT_PIDS=()
QPID=""
MGMT_NS="${PFX}-mgmt"
ETCD_PID=""
ETCD_URL="http://10.254.0.1:2379"

stop_agents() {
	local p
	for p in "${AGENT_PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${AGENT_PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	AGENT_PIDS=()
}

# The management network of --decider cluster: a bridge in its own namespace,
# one veth (mgmt0, 10.254.0.N/24) into every host's namespace, etcd on the bridge.
mgmt_up() {
	local h ns n=$((LEAVES * HOSTS_PER_LEAF)) t
	ip netns add "$MGMT_NS" || return 1
	ip -n "$MGMT_NS" link set lo up
	ip -n "$MGMT_NS" link add br0 type bridge || return 1
	ip -n "$MGMT_NS" addr add 10.254.0.1/24 dev br0
	ip -n "$MGMT_NS" link set br0 up
	for ((h = 0; h < n; h++)); do
		ns="$(host_ns "h$h")"
		ip -n "$ns" link add mgmt0 type veth peer name "m$h" netns "$MGMT_NS" || return 1
		ip -n "$MGMT_NS" link set "m$h" master br0 up
		ip -n "$ns" addr add "10.254.0.$((h + 2))/24" dev mgmt0
		ip -n "$ns" link set mgmt0 up
	done
	mkdir -p "$OUT/etcd"
	ip netns exec "$MGMT_NS" "$ETCD_BIN" --name tb --data-dir "$OUT/etcd/data" \
		--listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster tb=http://127.0.0.1:2380 >"$OUT/etcd/etcd.log" 2>&1 &
	ETCD_PID=$!
	for ((t = 0; t < 100; t++)); do
		ip netns exec "$MGMT_NS" curl -fsS -m 1 "$ETCD_URL/health" 2>/dev/null | grep -q '"health":"true"' &&
			return 0
		kill -0 "$ETCD_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "$PROG: etcd did not start on the management network:" >&2
	tail -n 5 "$OUT/etcd/etcd.log" >&2
	return 1
}
mgmt_down() {
	if [ -n "$ETCD_PID" ]; then
		kill -TERM "$ETCD_PID" 2>/dev/null || true
		wait "$ETCD_PID" 2>/dev/null || true
		ETCD_PID=""
	fi
	ip netns del "$MGMT_NS" 2>/dev/null || true
}

stop_sampler() {
	[ -n "$QPID" ] || return 0
	kill "$QPID" 2>/dev/null
	wait "$QPID" 2>/dev/null
	QPID=""
}

cleanup() {
	local p
	stop_sampler
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	if [ -n "$AGENT_PID" ]; then
		kill -TERM "$AGENT_PID" 2>/dev/null || true
		wait "$AGENT_PID" 2>/dev/null || true
		AGENT_PID=""
	fi
	stop_agents
	for p in "${PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	PIDS=()
	mgmt_down
	"$FABRIC" down --tag "$TAG" >/dev/null 2>&1 || true
}
on_exit() {
	local rc=$?
	cleanup
	# etcd's data (its WAL preallocates ~64 MB) is of no use after the run: its
	# log stays. Kept with --keep or when the run failed.
	[ "$KEEP" -eq 1 ] || [ $rc -ne 0 ] || rm -rf "$OUT"/run-*/shm "$OUT/etcd/data"
	exit $rc
}
trap on_exit EXIT
trap 'echo; echo "$PROG: interrupted; tearing the fabric down" >&2; exit 130' INT TERM

"$FABRIC" up --tag "$TAG" --owner $$ $FABRIC_ARGS --cwnd "$TCP_CWND" ${WEIGHTS:+--weights "$WEIGHTS"} ||
	die "could not build the fabric"
# shellcheck disable=SC1090
. "$STATE/fabric.env"
FABRIC_TEXT="$LEAVES leaves x $HOSTS_PER_LEAF hosts, $SPINES spines, hosts ${HOST_RATE_MBIT} Mbit/s, spine links ${SPINE_RATE_MBIT} Mbit/s, HTB strict priority by DSCP, ECMP on (src IP, dst IP, proto, src port)"

host_ns() { awk -v h="$1" '$1 == h {print $2}' "$STATE/hosts"; }
host_addr() { awk -v h="$1" '$1 == h {print $3}' "$STATE/hosts"; }

# The scheduler's view of the fabric: hosts named by their fabric address
# (how cruxd recognises a host), link rates in Gbit/s.
write_topology() {
	local f="$1" l h s i=0 addr
	{
		echo "# crux testbed: $FABRIC_TEXT"
		for ((s = 0; s < SPINES; s++)); do echo "switch s$s"; done
		for ((l = 0; l < LEAVES; l++)); do echo "switch l$l"; done
		for ((l = 0; l < LEAVES; l++)); do
			for ((h = 0; h < HOSTS_PER_LEAF; h++)); do
				addr="$(host_addr "h$i")"
				echo "host $addr"
				echo "link $addr l$l $(awk -v m="$HOST_RATE_MBIT" 'BEGIN{printf "%g", m/1000}')"
				i=$((i + 1))
			done
			for ((s = 0; s < SPINES; s++)); do
				echo "link l$l s$s $(awk -v m="$SPINE_RATE_MBIT" 'BEGIN{printf "%g", m/1000}')"
			done
		done
	} >"$f"
}
TOPO="$OUT/topology.txt"
write_topology "$TOPO"
if [ "$PER_HOST" -eq 1 ]; then
	mgmt_up || die "could not build the management network for the per-host agents"
fi

# TCP retransmitted segments and retransmission timeouts summed over the
# hosts' namespaces (per-namespace MIBs): a starved class that loses packets
# and backs off on timeouts shows here.
tcp_counters() {
	local h ns rs=0 to=0 v
	for ((h = 0; h < LEAVES * HOSTS_PER_LEAF; h++)); do
		ns="$(host_ns "h$h")"
		[ -n "$ns" ] || continue
		v="$(ip netns exec "$ns" awk '/^Tcp: [0-9]/{print $13}' /proc/net/snmp 2>/dev/null)"
		rs=$((rs + ${v:-0}))
		v="$(ip netns exec "$ns" awk '/^TcpExt: [A-Z]/{for(i=2;i<=NF;i++) if($i=="TCPTimeouts") c=i} /^TcpExt: [0-9]/{print $c}' /proc/net/netstat 2>/dev/null)"
		to=$((to + ${v:-0}))
	done
	echo "$rs $to"
}

# Every host's established TCP sockets with their trainer's pid and the bytes
# each has sent (ss -tniHp), appended to the run's sockets.txt: sockpaths.py
# turns the last sight of each into the spine its leaf hashed it onto.
socket_snapshot() {
	local dir="$1" h ns
	for ((h = 0; h < LEAVES * HOSTS_PER_LEAF; h++)); do
		ns="$(host_ns "h$h")"
		[ -n "$ns" ] || continue
		echo "## $(host_addr "h$h")"
		ip netns exec "$ns" ss -tniHp state established 2>/dev/null
	done >>"$dir/sockets.txt"
}

# Bytes each spine forwarded (every port's transmit counter, summed per spine namespace).
spine_bytes() {
	local s v out=""
	for ((s = 0; s < SPINES; s++)); do
		v="$(ip netns exec "${PFX}-s$s" sh -c 'cat /sys/class/net/*/statistics/tx_bytes' 2>/dev/null |
			awk '{ t += $1 } END { printf "%.0f\n", t }')"
		out="$out ${v:-0}"
	done
	echo "$out"
}

# The leaves' uplink queues (leaf -> spine egress, every class) sampled every
# 0.25 s while a run lasts: one line per sample, the bytes queued summed over
# the uplinks. Their mean over the flows that cross the spines is the standing
# queue each flow keeps (predict.py --standing-bytes; README "Calibration").
sample_queues() {
	local f="$1" l s sum v
	while :; do
		sum=0
		for ((l = 0; l < LEAVES; l++)); do
			for ((s = 0; s < SPINES; s++)); do
				v="$(tc -n "$PFX-l$l" -s qdisc show dev "s$s" 2>/dev/null |
					awk '/^qdisc bfifo/ {q = 1} q && /backlog/ {sub(/b$/, "", $2); t += $2; q = 0} END {print t + 0}')"
				sum=$((sum + ${v:-0}))
			done
		done
		echo "$(date +%s.%N) $sum" >>"$f"
		sleep 0.25
	done
}

# Per-host agents: h0's view of the cluster table (every job), then one line
# per host: leader, applied schedule revision, stale, and its routes with
# probed source ports (the paths this host's traffic is put on).
cluster_status() {
	local shm="$1" h nr
	"$CRUXCTL" --shm-dir "$shm/h0" status 2>&1 || true
	for ((h = 0; h < LEAVES * HOSTS_PER_LEAF; h++)); do
		nr="$("$CRUXCTL" --shm-dir "$shm/h$h" --json status 2>/dev/null |
			grep -o '"path":[0-9]*,"ports":\[[0-9]' | wc -l)"
		echo "h$h: $("$CRUXCTL" --shm-dir "$shm/h$h" status 2>/dev/null | grep '^cluster' || echo 'no agent') | routes with ports: $nr"
	done
}
# Did every host apply the same schedule revision (the last one)? This runs
# right after the ranks were stopped: their jobs depart, the leader writes new
# schedules and each host applies them at its next pass, while the hosts are
# read one after the other. Reading once then caught the cluster mid-way (6 of
# 18 runs "not all equal"): read until every host shows one revision, for up
# to three leases (a leader change included), and say how long it took.
cluster_summary() {
	local dir="$1" shm="$2" h revs r lead l js n=$((LEAVES * HOSTS_PER_LEAF)) t0 waited=0
	t0=$(date +%s%N)
	while :; do
		revs="" lead=""
		for ((h = 0; h < n; h++)); do
			js="$("$CRUXCTL" --shm-dir "$shm/h$h" --json status 2>/dev/null)"
			r="$(echo "$js" | grep -o '"schedule_revision":[0-9]*' | head -n 1 | cut -d: -f2)"
			l="$(echo "$js" | grep -o '"leader":"[^"]*"' | head -n 1 | cut -d'"' -f4)"
			revs="$revs ${r:-none}"
			[ -n "$l" ] && lead="$l"
		done
		waited=$((($(date +%s%N) - t0) / 1000000))
		[ "$(echo $revs | tr ' ' '\n' | sort -u | wc -l)" -eq 1 ] && break
		[ "$waited" -lt 15000 ] || break
		sleep 0.5
	done
	# the most routes with ports the hosts held at once (summed over hosts, per snapshot)
	local routes
	routes="$(for f in "$dir"/status-*.txt; do
		[ -f "$f" ] && sed -n 's/.*routes with ports: \([0-9]*\)$/\1/p' "$f" | awk '{s += $1} END {print s + 0}'
	done | sort -n | tail -n 1)"
	if [ "$(echo $revs | tr ' ' '\n' | sort -u | wc -l)" -eq 1 ]; then
		echo "  cluster: $n cruxd on etcd, leader $lead, every host applied schedule revision $(echo $revs | cut -d' ' -f1) ($waited ms after the ranks stopped), $(cat "$dir"/cruxd-h*.log | grep -c rescheduled) reschedule(s), at most ${routes:-0} route(s) with probed ports"
	else
		echo "  cluster: $n cruxd on etcd, leader $lead, hosts' schedule revisions:$revs (not all equal $waited ms after the ranks stopped)"
	fi
}

# ---- One run --------------------------------------------------------------------
NJOBS=${#JOBS[@]}
run_one() {
	local arm="$1" rep="$2" label="$3"
	local dir="$OUT/run-$arm-$rep"
	local shm="$dir/shm"
	local j name model role iters hosts r h ns addr n
	rm -rf "$dir"
	mkdir -p "$dir/logs" "$shm"
	chmod 0755 "$dir" "$shm"
	: >"$dir/jobs.txt"
	: >"$dir/pids.txt"
	local tcp0 sp0
	tcp0="$(tcp_counters)"
	sp0="$(spine_bytes)"
	# the machine's load (others' work shares its cores): 1-minute load average at the start and the end
	cut -d' ' -f1 /proc/loadavg >"$dir/load.txt"
	sample_queues "$dir/queues.txt" &
	QPID=$!
	if [ "$arm" = crux ] && [ "$DECIDER" = agent ]; then
		# One agent schedules every emulated host: all profiles land in one directory.
		# The fairness guard acts within seconds here: jobs run for a minute.
		env CRUX_SHM_DIR="$shm" CRUX_TOPOLOGY="$TOPO" CRUX_PROFILE_WINDOW="$AGENT_WINDOW" CRUX_LEVELS="$LEVELS" \
			CRUX_AGENT_INTERVAL=250ms CRUX_AGENT_HOLD=2s CRUX_PROBE=0 \
			CRUX_MAX_SLOWDOWN="$MAX_SLOWDOWN" CRUX_GUARD_AGE=2s CRUX_GUARD_HOLD=10s \
			${WEIGHTS_CSV:+CRUX_LEVEL_WEIGHTS="$WEIGHTS_CSV"} \
			CRUX_LOG_LEVEL=info "$CRUXD" >"$dir/cruxd.log" 2>&1 &
		AGENT_PID=$!
	elif per_host "$arm"; then
		local probe=0
		[ "$arm" = paths ] && probe=1
		# One agent per emulated host, in its namespace, on its host's records only;
		# a cluster name per run, so no run starts from another's schedule.
		for ((h = 0; h < LEAVES * HOSTS_PER_LEAF; h++)); do
			mkdir -p "$shm/h$h"
			chmod 0755 "$shm/h$h"
			ip netns exec "$(host_ns "h$h")" env CRUX_SHM_DIR="$shm/h$h" CRUX_TOPOLOGY="$TOPO" \
				CRUX_PROFILE_WINDOW="$AGENT_WINDOW" CRUX_LEVELS="$LEVELS" \
				CRUX_AGENT_INTERVAL=250ms CRUX_AGENT_HOLD=2s CRUX_PROBE="$probe" \
				CRUX_PROBE_PROTO="$PROBE_PROTO" CRUX_PROBE_PORTS_PER_PATH=4 \
				CRUX_MAX_SLOWDOWN="$MAX_SLOWDOWN" CRUX_GUARD_AGE=2s CRUX_GUARD_HOLD=10s \
				${WEIGHTS_CSV:+CRUX_LEVEL_WEIGHTS="$WEIGHTS_CSV"} \
				CRUX_ETCD="$ETCD_URL" CRUX_CLUSTER="tb-$arm-$rep-$$" CRUX_HOST="h$h" \
				CRUX_CLUSTER_TTL=5s CRUX_LOG_LEVEL=info "$CRUXD" >"$dir/cruxd-h$h.log" 2>&1 &
			AGENT_PIDS+=($!)
		done
		sleep 0.3
		for p in "${AGENT_PIDS[@]}"; do
			kill -0 "$p" 2>/dev/null || {
				echo "$PROG: a cruxd exited at start:" >&2
				tail -n 5 "$dir"/cruxd-h*.log >&2
				return 1
			}
		done
	elif [ "$arm" = crux ]; then
		local levels=() jl
		for jl in "${JOBS[@]}"; do
			read -r name model role iters hosts <<<"$jl"
			case "$model" in gpt) levels+=("$name=3") ;; bert) levels+=("$name=1") ;; *) levels+=("$name=0") ;; esac
		done
		"$DECIDE" --dir "$shm" --levels 4 "${levels[@]}" >"$dir/decide.log" 2>&1 &
		AGENT_PID=$!
		sleep 0.3
		kill -0 "$AGENT_PID" 2>/dev/null || {
			echo "$PROG: cruxd exited at start:" >&2
			tail -n 5 "$dir/cruxd.log" >&2
			return 1
		}
	fi
	for ((j = 0; j < NJOBS; j++)); do
		read -r name model role iters hosts <<<"${JOBS[$j]}"
		IFS=, read -r -a hl <<<"$hosts"
		n=${#hl[@]}
		echo "$name $model $n $role" >>"$dir/jobs.txt"
		for ((r = 0; r < n; r++)); do
			h="${hl[$r]}"
			ns="$(host_ns "$h")"
			addr="$(host_addr "$h")"
			[ -n "$ns" ] || die "scenario names host $h, which the fabric does not have"
			local pre="" rshm="$shm"
			[ "$arm" != none ] && pre="$PRELOAD"
			per_host "$arm" && rshm="$shm/$h"
			# Each rank runs inside its host's namespace, with the host's
			# address as host name (the agent maps profiles to hosts by it).
			ip netns exec "$ns" unshare --uts sh -c 'hostname "$0"; exec "$@"' "$addr" \
				env LD_LIBRARY_PATH="$EMU_DIR:$PLUGIN_DIR" LD_PRELOAD="$pre" \
				NCCL_NET_PLUGIN=crux NCCL_SOCKET_IFNAME==eth0 "${TRANSPORT_ENV[@]}" \
				CRUX_SHM_DIR="$rshm" CRUX_JOB_ID="$name" CRUX_TIMING=host \
				CRUX_PROFILE_WINDOW=2s CRUX_PUBLISH_INTERVAL=10ms \
				CRUX_TB_PROGRESS="$dir/logs/$name-r$r.prog" CRUX_TB_CHUNK_BYTES=65536 \
				CRUX_INLINE_BYTES="$INLINE_BYTES" CRUX_SOCKET_NTHREADS=1 CRUX_NSOCKS_PERTHREAD=1 \
				RANK="$r" WORLD_SIZE="$n" LOCAL_RANK=0 \
				"$TRAINER" --job "$name" --model "$model" --rank "$r" --nranks "$n" \
				--iters "$iters" --host "$h" --id-file "$dir/$name.id" \
				--mark-iterations --log "$dir/logs/$name-r$r.log" 2>>"$dir/logs/$name-r$r.err" &
			PIDS+=($!)
			echo "$! $name $r $addr" >>"$dir/pids.txt"
		done
	done
	# Progress: iterations of each job's rank 0, once a second.
	local t0 now el line fail=0 p alive
	t0=$(date +%s)
	while :; do
		alive=0
		for p in "${PIDS[@]}"; do
			kill -0 "$p" 2>/dev/null && alive=$((alive + 1))
		done
		now=$(date +%s)
		el=$((now - t0))
		line=""
		for ((j = 0; j < NJOBS; j++)); do
			read -r name model role iters hosts <<<"${JOBS[$j]}"
			local done_it=0
			[ -f "$dir/logs/$name-r0.log" ] && done_it=$(grep -c '^[0-9]' "$dir/logs/$name-r0.log")
			line="$line $name $done_it/$iters"
		done
		if [ -t 1 ]; then
			printf '\r  %-14s %3ds %s   ' "$label" "$el" "$line"
		elif [ $((el % 10)) -eq 0 ]; then
			printf '  %-14s %3ds %s\n' "$label" "$el" "$line"
		fi
		# Every host's TCP sockets, every 5 s: the spine each connection took (sockpaths.py).
		[ $((el % 5)) -eq 2 ] && socket_snapshot "$dir"
		# The agent's view, every 5 s (jobs, intensities, levels): kept with the run.
		if [ "$arm" != none ] && [ -n "$CRUXCTL" ] && [ $((el % 5)) -eq 4 ]; then
			if per_host "$arm"; then
				cluster_status "$shm" >"$dir/status-$(printf %03d "$el").txt" 2>&1
			else
				"$CRUXCTL" --shm-dir "$shm" status >"$dir/status-$(printf %03d "$el").txt" 2>&1 || true
			fi
		fi
		[ "$alive" -eq 0 ] && break
		if [ "$el" -ge "$RUN_TIMEOUT" ]; then
			echo
			echo "$PROG: $label did not finish within ${RUN_TIMEOUT}s; stopping it" >&2
			fail=1
			break
		fi
		sleep 1
	done
	[ -t 1 ] && echo
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${PIDS[@]}"; do
		wait "$p" || fail=1
	done
	PIDS=()
	if [ -n "$AGENT_PID" ]; then
		kill -TERM "$AGENT_PID" 2>/dev/null || true
		wait "$AGENT_PID" 2>/dev/null || true
		AGENT_PID=""
	fi
	if [ ${#AGENT_PIDS[@]} -gt 0 ]; then
		cluster_summary "$dir" "$shm" | tee "$dir/cluster.txt"
		grep -q "not all equal" "$dir/cluster.txt" &&
			echo "$PROG: $label: the hosts ended on different schedule revisions (see $dir/cluster.txt)" >&2
		stop_agents
	fi
	if [ "$fail" -ne 0 ]; then
		echo "$PROG: $label failed; the ranks' errors:" >&2
		grep -H . "$dir"/logs/*.err 2>/dev/null | tail -n 20 >&2
		return 1
	fi
	if [ "$TRANSPORT" = verbs ]; then
		# every rank must have carried its bytes over the verbs transport
		local e nv=0 nr=0 moves
		for e in "$dir"/logs/*.err; do
			nr=$((nr + 1))
			grep -q 'verbs transport: [1-9]' "$e" && nv=$((nv + 1))
		done
		moves=$(cat "$dir"/logs/*.err | grep -c 'moved to lane')
		echo "  $label: $nv of $nr ranks on the verbs transport, $moves lane moves (class/path changes)" |
			tee "$dir/transport.txt"
		[ "$nv" -eq "$nr" ] || { echo "$PROG: $label: not every rank used the verbs transport" >&2; return 1; }
	fi
	"$FABRIC" status --tag "$TAG" >"$dir/fabric-counters.txt" 2>&1 || true
	python3 "$HERE/sockpaths.py" --state "$STATE" --prefix "$PFX" "$dir" ||
		echo "$PROG: $label: could not say which spine each connection took" >&2
	local spl="" s
	local -a spa spb
	read -r -a spa <<<"$sp0"
	read -r -a spb <<<"$(spine_bytes)"
	for ((s = 0; s < SPINES; s++)); do
		spl="$spl${spl:+, }spine $s $(((${spb[s]:-0} - ${spa[s]:-0}) / 1000000)) MB"
	done
	echo "  $label: bytes through the spines: $spl" | tee "$dir/spines.txt"
	stop_sampler
	cut -d' ' -f1 /proc/loadavg >>"$dir/load.txt"
	awk '{s += $2; n++} END {if (n) printf "mean bytes queued at the leaves'"'"' uplinks: %.0f (%d samples)\n", s / n, n}' \
		"$dir/queues.txt" >"$dir/queues-mean.txt" 2>/dev/null
	local tcp1
	tcp1="$(tcp_counters)"
	set -- $tcp0 $tcp1
	echo "  $label: TCP retransmitted segments $(($3 - $1)), retransmission timeouts $(($4 - $2))" |
		tee "$dir/tcp.txt"
	return 0
}

echo "crux testbed: scenario '$SCENARIO': $SCEN_DESC"
echo "  transport: $TRANSPORT$([ "$TRANSPORT" = verbs ] && echo " (plugin's verbs transport on the software RDMA device, a test double whose packets are RoCEv2's: UDP to 4791)")"
echo "  arms: $ARMS, $REPS repetitions each; results in $OUT"
RUNS=()
total=$((REPS * $(echo $ARMS | wc -w)))
k=0
# Interleave the arms so that slow drift of the machine hits both alike.
for ((rep = 1; rep <= REPS; rep++)); do
	for arm in $ARMS; do
		k=$((k + 1))
		run_one "$arm" "$rep" "[$k/$total] $arm" || exit 1
		RUNS+=("$arm:$OUT/run-$arm-$rep")
	done
done

mkdir -p "$OUT/plot"
check_arg=()
[ "$CHECK" -eq 1 ] && check_arg=(--check)
SCEN_TEXT="$SCEN_DESC"
[ "$TRANSPORT" = verbs ] && SCEN_TEXT="$SCEN_DESC; transport: the plugin's verbs transport on the software RDMA device (test double, RC over TCP)"
"$ANALYZE" --json "$JSON" --plot-dir "$OUT/plot" --scenario "$SCEN_TEXT" \
	--fabric "$FABRIC_TEXT" "${check_arg[@]}" "${RUNS[@]}"
arc=$?
# the runs' load averages into the result file (the figures move with the machine's load)
if [ -s "$JSON" ]; then
	python3 - "$JSON" "${RUNS[@]}" <<'PY' || echo "$PROG: could not add the load averages to $JSON" >&2
import json, os, sys
path, runs = sys.argv[1], sys.argv[2:]
d = json.load(open(path))
per = {}
for r in runs:
    run = r.split(":", 1)[1]
    try:
        per[os.path.basename(run)] = [float(x) for x in open(os.path.join(run, "load.txt")).read().split()]
    except (OSError, ValueError):
        pass
vals = [v for x in per.values() for v in x]
if vals:
    d["load_average"] = {"what": "1-minute load average of the 2-core host at each run's start and end",
                         "min": min(vals), "max": max(vals), "runs": per}
    json.dump(d, open(path, "w"), indent=2)
PY
fi
if command -v gnuplot >/dev/null 2>&1; then
	narms=$(echo $ARMS | wc -w)
	arm1=$(echo $ARMS | cut -d' ' -f1)
	arm2=$(echo $ARMS | cut -d' ' -f2)
	arm3=$(echo $ARMS | cut -d' ' -f3)
	if gnuplot -e "datadir='$OUT/plot'; outfile='$PLOT'; scen='$SCENARIO'; narms=$narms; arm1='$arm1'; arm2='$arm2'; arm3='$arm3'" \
		"$HERE/plot.gp" 2>"$OUT/plot/gnuplot.err"; then
		echo "plot: $PLOT"
	else
		echo "$PROG: gnuplot failed: $(head -n 3 "$OUT/plot/gnuplot.err")" >&2
	fi
else
	echo "$PROG: gnuplot not found: no plot (apt-get install gnuplot-nox)" >&2
fi
echo "json: $JSON"
exit $arc
