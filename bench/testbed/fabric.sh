#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# fabric.sh: an emulated two-layer leaf-spine fabric in network namespaces.
#
#   fabric.sh up [options]     build it (cleans the leftovers of an unfinished run first)
#   fabric.sh down [--tag T]   tear it down (idempotent)
#   fabric.sh status [--tag T] show namespaces, addresses and per-class counters
#
# Every host sits in namespace cxtb<T>-h<i> with one NIC "eth0" to its leaf
# cxtb<T>-l<j>; every leaf has one link to every spine cxtb<T>-s<k>. Each
# egress of the fabric (host NIC, leaf and spine ports) is shaped with HTB:
# a parent class at the link rate and one child per priority level (tiny
# guaranteed rate, ceil = link rate, HTB prio by level) selected by the IP
# DSCP, so the fabric honours strict priority the way a switch does. Leaves
# spread traffic to other leaves over all spines with ECMP hashing source IP,
# destination IP, protocol and source port (fib_multipath_hash_policy=3,
# fields 0x17): the source port alone picks the spine for a host pair.
#
# Addresses (198.18.0.0/15 only): host j of leaf l is 198.18.l.(4j+2)/30 with
# the leaf at .(4j+1); the link between spine s and leaf l is
# 198.19.s.(4l)/30 (spine .4l+1, leaf .4l+2).
#
# State (parameters, host list, owner) is kept in /run/crux-testbed<T>; a run
# that finds state or namespaces of an earlier run whose owner is gone cleans
# them first; one whose owner is alive refuses to start.
#
# Built with the tests' shell harness (tests/lib/harness.sh: namespaces, veth
# pairs, router settings, the one exit trap); the namespaces outlive 'up'.
set -euo pipefail
# shellcheck source=../../tests/lib/harness.sh
. "$(cd "$(dirname "$0")" && pwd)/../../tests/lib/harness.sh"

PROG=fabric.sh
TAG=""
LEAVES=2
HPL=4
SPINES=2
HOST_RATE=100
SPINE_RATE=50
# DSCP per priority level, lowest first; matches the decision table's default
# level map (level l -> DSCP 8*l).
DSCPS="0 8 16 24 32 40 48 56"
QUEUE=200000
# Guaranteed share per level, lowest first (CRUX_LEVEL_WEIGHTS of the agent):
# level l's HTB class gets rate = link x w_l / sum(w); levels past the list
# keep 1%. Empty: every class keeps 10% (the lowest is slowed, never starved).
WEIGHTS=""
# Datacenter TCP stacks lower the minimum retransmission timeout (RoCE has
# none): a drop behind a burst of higher-priority traffic then costs tens of
# milliseconds, not 200 ms doubling into seconds.
RTO_MIN=20
# Queue per class: a tail-drop FIFO of --queue bytes (or --queue-us of the
# link's rate, at least 3 packets of --gso bytes). Hosts send TSO/GSO packets
# of at most --gso bytes and clamp every connection's congestion window to
# --cwnd segments (a route's locked cwnd): TCP (BBR here) otherwise keeps
# 100 kB and more queued at a 50 Mbit/s uplink (16 ms and more), paid by
# every ring step of every job crossing it, where a datacenter fabric's
# queues hold microseconds at its line rate (RoCE bounds what a queue pair
# has in flight). This kernel has no AQM qdisc for ECN marking.
QUEUE_US=0
GSO_MAX=8192
CWND=10
OWNER=""
STATE=""

die() {
	echo "$PROG: $*" >&2
	exit 1
}

usage() {
	cat <<EOF
usage: $PROG up [--tag T] [--leaves N] [--hosts-per-leaf N] [--spines N]
                [--host-rate MBIT] [--spine-rate MBIT] [--dscp "D0 D1 ..."]
                [--queue BYTES] [--queue-us US] [--gso BYTES] [--cwnd SEGMENTS]
                [--rto-min MS] [--weights "W0 W1 ..."] [--owner PID]
       $PROG down [--tag T]
       $PROG status [--tag T]
Namespaces are named cxtb<T>-h<i>, cxtb<T>-l<j>, cxtb<T>-s<k> (T: letters/digits, <= 4).
Defaults: 2 leaves x 4 hosts, 2 spines, hosts at 100 Mbit/s, spine links at 50 Mbit/s,
DSCP by level "0 8 16 24 32 40 48 56" (level 0 lowest), a 200000-byte tail-drop queue
per class (--queue; --queue-us sizes it by the link's rate instead), hosts sending GSO
packets of at most 8192 bytes (--gso) with TCP windows clamped to 10 segments (--cwnd;
0: no clamp),
TCP minimum RTO 20 ms on the hosts' routes, 10% guaranteed rate per class
(--weights: link x w_l / sum of the weights for level l, as CRUX_LEVEL_WEIGHTS).
EOF
}

is_uint() {
	case "$1" in
	'' | *[!0-9]*) return 1 ;;
	*) return 0 ;;
	esac
}

# check_range NAME VALUE MIN MAX
check_range() {
	is_uint "$2" || die "$1 '$2' is not valid: expected an integer in [$3, $4]"
	[ "$2" -ge "$3" ] && [ "$2" -le "$4" ] ||
		die "$1 '$2' is not valid: expected an integer in [$3, $4]"
}

parse_args() {
	while [ $# -gt 0 ]; do
		case "$1" in
		--tag) TAG="${2-}"; shift 2 ;;
		--leaves) LEAVES="${2-}"; shift 2 ;;
		--hosts-per-leaf) HPL="${2-}"; shift 2 ;;
		--spines) SPINES="${2-}"; shift 2 ;;
		--host-rate) HOST_RATE="${2-}"; shift 2 ;;
		--spine-rate) SPINE_RATE="${2-}"; shift 2 ;;
		--dscp) DSCPS="${2-}"; shift 2 ;;
		--queue) QUEUE="${2-}"; shift 2 ;;
		--rto-min) RTO_MIN="${2-}"; shift 2 ;;
		--queue-us) QUEUE_US="${2-}"; shift 2 ;;
		--cwnd) CWND="${2-}"; shift 2 ;;
		--gso) GSO_MAX="${2-}"; shift 2 ;;
		--weights) WEIGHTS="${2-}"; shift 2 ;;
		--owner) OWNER="${2-}"; shift 2 ;;
		-h | --help) usage; exit 0 ;;
		*) usage >&2; die "unknown option '$1'" ;;
		esac
	done
	case "$TAG" in
	*[!a-z0-9]*) die "--tag '$TAG' is not valid: expected up to 4 lower-case letters or digits" ;;
	esac
	[ ${#TAG} -le 4 ] || die "--tag '$TAG' is not valid: expected up to 4 lower-case letters or digits"
	check_range --leaves "$LEAVES" 1 16
	check_range --hosts-per-leaf "$HPL" 1 32
	check_range --spines "$SPINES" 1 16
	check_range --host-rate "$HOST_RATE" 1 10000
	check_range --spine-rate "$SPINE_RATE" 1 10000
	check_range --queue "$QUEUE" 3000 100000000
	check_range --rto-min "$RTO_MIN" 1 1000
	check_range --queue-us "$QUEUE_US" 0 1000000
	check_range --cwnd "$CWND" 0 100000
	check_range --gso "$GSO_MAX" 1500 65536
	local n=0 d
	for d in $DSCPS; do
		check_range "--dscp entry" "$d" 0 63
		n=$((n + 1))
	done
	[ "$n" -ge 1 ] && [ "$n" -le 8 ] || die "--dscp '$DSCPS' is not valid: expected 1 to 8 values"
	local nw=0 w
	for w in $WEIGHTS; do
		check_range "--weights entry" "$w" 1 65535
		nw=$((nw + 1))
	done
	[ "$nw" -le "$n" ] || die "--weights '$WEIGHTS' is not valid: at most one weight per level ($n)"
	if [ -n "$OWNER" ]; then
		check_range --owner "$OWNER" 1 4194304
	fi
	PFX="cxtb${TAG}"
	STATE="/run/crux-testbed${TAG}"
}

need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		die "needs root (network namespaces, veth links, tc): run it as root, e.g. sudo $0 $*"
	fi
	command -v ip >/dev/null 2>&1 || die "'ip' not found: install iproute2 (apt-get install iproute2)"
	command -v tc >/dev/null 2>&1 || die "'tc' not found: install iproute2 (apt-get install iproute2)"
}

our_namespaces() {
	ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PFX}-[hls][0-9]+$" || true
}

# Start time of a process (field 22 of /proc/PID/stat), empty if gone.
proc_start() {
	[ -r "/proc/$1/stat" ] || return 0
	sed -e 's/^.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $20}'
}

owner_alive() {
	[ -f "$STATE/owner" ] || return 1
	local pid start now
	read -r pid start <"$STATE/owner" || return 1
	is_uint "$pid" || return 1
	now="$(proc_start "$pid")"
	[ -n "$now" ] && [ "$now" = "$start" ]
}

do_down() {
	local ns pids p
	for ns in $(our_namespaces); do
		# Stop whatever a failed run left inside (trainers); our own
		# namespaces only, by pid.
		pids="$(ip netns pids "$ns" 2>/dev/null || true)"
		for p in $pids; do
			kill -TERM "$p" 2>/dev/null || true
		done
	done
	for ns in $(our_namespaces); do
		pids="$(ip netns pids "$ns" 2>/dev/null || true)"
		if [ -n "$pids" ]; then
			sleep 0.5
			for p in $(ip netns pids "$ns" 2>/dev/null || true); do
				kill -KILL "$p" 2>/dev/null || true
			done
		fi
		ip netns del "$ns" 2>/dev/null || true
	done
	rm -rf "$STATE"
}

# Guaranteed rate (kbit) of level I's class on a KBIT link: 10% without
# weights, else its weighted share (1% past the list), at least 8 kbit.
class_rate() {
	local i="$1" kbit="$2" w sum=0 k=0 mine=""
	if [ -z "$WEIGHTS" ]; then
		w=$((kbit / 10))
	else
		for w in $WEIGHTS; do
			sum=$((sum + w))
			[ "$k" -eq "$i" ] && mine="$w"
			k=$((k + 1))
		done
		if [ -n "$mine" ]; then
			w=$((kbit * mine / sum))
		else
			w=$((kbit / 100))
		fi
	fi
	[ "$w" -ge 8 ] || w=8
	echo "$w"
}

# queue_bytes MBIT: the FIFO limit of a class on a link of MBIT.
queue_bytes() {
	local b
	[ "$QUEUE_US" -gt 0 ] || { echo "$QUEUE"; return; }
	b=$(($1 * QUEUE_US / 8))
	[ "$b" -ge $((3 * GSO_MAX)) ] || b=$((3 * GSO_MAX))
	echo "$b"
}

# shape NS DEV MBIT: HTB root, parent class at the link rate, one child per
# level selected by DSCP. HTB prio 0 is served first, so level i gets
# prio (nlevels-1-i). Children keep a guaranteed rate (class_rate) so that a
# low level slows down but is never starved outright.
shape() {
	local ns="$1" dev="$2" mbit="$3"
	local kbit=$((mbit * 1000))
	local child
	local nlev=0 d i=0 cid prio
	for d in $DSCPS; do nlev=$((nlev + 1)); done
	tc -n "$ns" qdisc replace dev "$dev" root handle 1: htb default 10
	tc -n "$ns" class add dev "$dev" parent 1: classid 1:1 htb \
		rate "${kbit}kbit" ceil "${kbit}kbit" burst 64k cburst 64k quantum 9000
	# Pure TCP ACKs (IP header of 5 words, total length < 64, only the ACK
	# flag) go to the top level whatever their DSCP, as switches usually
	# treat control traffic: a low level's ACK clock must not wait behind a
	# high level's data in the other direction, or its flow stalls on
	# retransmission timeouts instead of just running slower.
	tc -n "$ns" filter add dev "$dev" parent 1: protocol ip prio 1 u32 \
		match ip protocol 6 0xff match u8 0x05 0x0f at 0 \
		match u16 0x0000 0xffc0 at 2 match u8 0x10 0xff at 33 \
		flowid "1:1$((nlev - 1))"
	for d in $DSCPS; do
		cid="1$i"
		prio=$((nlev - 1 - i))
		child="$(class_rate "$i" "$kbit")"
		tc -n "$ns" class add dev "$dev" parent 1:1 classid "1:$cid" htb \
			rate "${child}kbit" ceil "${kbit}kbit" prio "$prio" burst 64k cburst 64k quantum 9000
		tc -n "$ns" qdisc add dev "$dev" parent "1:$cid" handle "$cid:" bfifo limit "$(queue_bytes "$mbit")"
		tc -n "$ns" filter add dev "$dev" parent 1: protocol ip prio 2 u32 \
			match ip dsfield $((d << 2)) 0xfc flowid "1:$cid"
		i=$((i + 1))
	done
}

do_up() {
	local l h s ns hns lns sns i
	mkdir -p "$STATE"
	# The owner (the runner's pid) decides whether a later 'up' may clean.
	local owner="${OWNER:-$PPID}"
	echo "$owner $(proc_start "$owner")" >"$STATE/owner"
	cat >"$STATE/fabric.env" <<EOF
TAG=$TAG
LEAVES=$LEAVES
HOSTS_PER_LEAF=$HPL
SPINES=$SPINES
HOST_RATE_MBIT=$HOST_RATE
SPINE_RATE_MBIT=$SPINE_RATE
DSCPS="$DSCPS"
QUEUE_BYTES=$QUEUE
QUEUE_US=$QUEUE_US
GSO_MAX=$GSO_MAX
CWND=$CWND
RTO_MIN_MS=$RTO_MIN
EOF
	: >"$STATE/hosts"
	for ((s = 0; s < SPINES; s++)); do
		sns="$PFX-s$s"
		cxt_ns_lasting "$sns"
		cxt_router "$sns"
	done
	i=0
	for ((l = 0; l < LEAVES; l++)); do
		lns="$PFX-l$l"
		cxt_ns_lasting "$lns"
		cxt_router "$lns"
		for ((h = 0; h < HPL; h++)); do
			hns="$PFX-h$i"
			cxt_ns_lasting "$hns"
			cxt_veth "$lns" "h$h" "198.18.$l.$((4 * h + 1))" "$hns" eth0 "198.18.$l.$((4 * h + 2))" 30
			if [ "$CWND" -gt 0 ]; then
				ip -n "$hns" route add default via "198.18.$l.$((4 * h + 1))" rto_min "${RTO_MIN}ms" \
					cwnd lock "$CWND"
			else
				ip -n "$hns" route add default via "198.18.$l.$((4 * h + 1))" rto_min "${RTO_MIN}ms"
			fi
			ip -n "$hns" link set eth0 gso_max_size "$GSO_MAX"
			shape "$hns" eth0 "$HOST_RATE"
			shape "$lns" "h$h" "$HOST_RATE"
			echo "h$i $hns 198.18.$l.$((4 * h + 2)) $l" >>"$STATE/hosts"
			i=$((i + 1))
		done
		for ((s = 0; s < SPINES; s++)); do
			sns="$PFX-s$s"
			cxt_veth "$sns" "l$l" "198.19.$s.$((4 * l + 1))" "$lns" "s$s" "198.19.$s.$((4 * l + 2))" 30
			shape "$sns" "l$l" "$SPINE_RATE"
			shape "$lns" "s$s" "$SPINE_RATE"
			ip -n "$sns" route add "198.18.$l.0/24" via "198.19.$s.$((4 * l + 2))"
		done
	done
	# Leaves reach every other leaf's hosts over all spines (ECMP).
	local m hops
	for ((l = 0; l < LEAVES; l++)); do
		[ "$SPINES" -ge 1 ] || break
		hops=""
		for ((s = 0; s < SPINES; s++)); do
			hops="$hops nexthop via 198.19.$s.$((4 * l + 1)) dev s$s"
		done
		for ((m = 0; m < LEAVES; m++)); do
			[ "$m" -ne "$l" ] || continue
			# shellcheck disable=SC2086
			ip -n "$PFX-l$l" route add "198.18.$m.0/24" $hops
		done
	done
	write_topology
	echo ok >"$STATE/ready"
}

# The scheduler's view of this fabric (agent/sched text format).
write_topology() {
	local topo="$STATE/topology.txt" l h s i=0
	{
		echo "# crux testbed fabric: $LEAVES leaves x $HPL hosts, $SPINES spines"
		echo "# host links ${HOST_RATE} Mbit/s, spine links ${SPINE_RATE} Mbit/s"
		for ((s = 0; s < SPINES; s++)); do
			echo "switch s$s"
		done
		for ((l = 0; l < LEAVES; l++)); do
			echo "switch l$l"
		done
		for ((l = 0; l < LEAVES; l++)); do
			for ((h = 0; h < HPL; h++)); do
				echo "host h$i 198.18.$l.$((4 * h + 2))"
				echo "link h$i l$l ${HOST_RATE}mbit"
				i=$((i + 1))
			done
			for ((s = 0; s < SPINES; s++)); do
				echo "link l$l s$s ${SPINE_RATE}mbit"
			done
		done
	} >"$topo"
}

do_status() {
	local ns dev
	if [ ! -f "$STATE/fabric.env" ] && [ -z "$(our_namespaces)" ]; then
		echo "no fabric (tag '$TAG')"
		return 0
	fi
	[ -f "$STATE/fabric.env" ] && cat "$STATE/fabric.env"
	[ -f "$STATE/hosts" ] && cat "$STATE/hosts"
	for ns in $(our_namespaces); do
		case "$ns" in
		*-l* | *-s*)
			echo "== $ns"
			for dev in $(ip -n "$ns" -o link show | awk -F': ' '$2 != "lo" {sub(/@.*/, "", $2); print $2}'); do
				tc -n "$ns" -s class show dev "$dev" 2>/dev/null |
					awk -v d="$dev" '/^class htb 1:1[0-7]/{c=$3} /Sent/{if(c!=""){dr=$7; sub(/,/, "", dr); printf "  %s class %s: %s bytes, %s dropped\n", d, c, $2, dr; c=""}}'
			done
			;;
		esac
	done
}

cmd="${1-}"
[ $# -gt 0 ] && shift
case "$cmd" in
up)
	parse_args "$@"
	need_root "up"
	if [ -e "$STATE" ] || [ -n "$(our_namespaces)" ]; then
		if owner_alive; then
			die "a testbed run (pid $(cut -d' ' -f1 "$STATE/owner")) still uses tag '$TAG'; stop it first or pick another --tag"
		fi
		echo "$PROG: cleaning up the leftovers of an unfinished run (tag '$TAG')" >&2
		do_down
	fi
	# Any failure while building tears everything down again (the harness's exit
	# trap, which silences its actions: the message goes to stderr kept on fd 7).
	exec 7>&2
	cxt_at_failure 'echo "$PROG: building the fabric failed; tearing it down" >&7; do_down'
	do_up
	;;
down)
	parse_args "$@"
	need_root "down"
	do_down
	;;
status)
	parse_args "$@"
	need_root "status"
	do_status
	;;
-h | --help | help)
	usage
	;;
*)
	usage >&2
	exit 2
	;;
esac
