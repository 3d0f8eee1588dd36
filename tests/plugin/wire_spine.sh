#!/bin/sh
# Paths on a two-spine fabric: ECMP hashes on the source port, so the route
# in the decision table (path id + source ports found by probing) decides the
# spine. The traffic must cross the chosen spine, move to the other one when
# the route changes mid-run, and arrive intact.
# usage: wire_spine.sh CONFORMANCE DTSET PLUGIN_DIR [SOFTRDMA_LIB CRUXCTL]
# With SOFTRDMA_LIB the plugin runs its verbs transport on the software RDMA
# device (tests/softrdma): a route's port becomes the QP's flow label, whose
# RoCEv2 UDP source port the device's packets (UDP to 4791) leave from. The
# fabric hashes the protocol and both ports, so the paths are learnt the way
# RoCE travels: the agent's prober (cruxctl probe) with CRUX_PROBE_PROTO=roce,
# UDP to 4791 from ports a flow label can reach (49152 and up).
set -u
CONF=$1 DTSET=$2 PLUGDIR=$3 SRLIB=${4:-} CRUXCTL=${5:-}
. "$(dirname "$0")/../lib/harness.sh"
cxt_need_root "network namespaces"
P=cxpl$$
A=${P}a B=${P}b R1=${P}r S1=${P}s S2=${P}t R2=${P}u
cxt_workdir cxpl-spine
W=$CXT_W
fail() { CXT_LOG_LINES=200 cxt_fail "$@"; }
mkdir -m 755 "$W/shm"

set -e
for n in "$A" "$B" "$R1" "$S1" "$S2" "$R2"; do cxt_ns "$n"; done
cxt_veth "$A" "${P}a0" 198.18.10.2 "$R1" "${P}r0" 198.18.10.1
cxt_veth "$R1" "${P}r1" 198.18.11.1 "$S1" "${P}s0" 198.18.11.2
cxt_veth "$R1" "${P}r2" 198.18.12.1 "$S2" "${P}t0" 198.18.12.2
cxt_veth "$S1" "${P}s1" 198.18.13.1 "$R2" "${P}u1" 198.18.13.2
cxt_veth "$S2" "${P}t1" 198.18.14.1 "$R2" "${P}u2" 198.18.14.2
cxt_veth "$R2" "${P}u0" 198.18.20.1 "$B" "${P}b0" 198.18.20.2
for n in "$R1" "$S1" "$S2" "$R2"; do cxt_router "$n"; done
ip -n "$A" route add default via 198.18.10.1
ip -n "$B" route add default via 198.18.20.1
ip -n "$R1" route add 198.18.20.0/24 nexthop via 198.18.11.2 nexthop via 198.18.12.2
ip -n "$R2" route add 198.18.10.0/24 nexthop via 198.18.13.1 nexthop via 198.18.14.1
ip -n "$S1" route add 198.18.10.0/24 via 198.18.11.1
ip -n "$S1" route add 198.18.20.0/24 via 198.18.13.2
ip -n "$S2" route add 198.18.10.0/24 via 198.18.12.1
ip -n "$S2" route add 198.18.20.0/24 via 198.18.14.2
set +e

# Which source ports take which spine: TTL 2 expires at the spine.
if [ -n "$SRLIB" ]; then
	ip netns exec "$A" env CRUX_PROBE_PROTO=roce "$CRUXCTL" --shm-dir "$W/shm" probe 198.18.20.2 \
		--hops 2 --ports 50000-50063 --per-path 2 --expect 2 > "$W/cruxctl-probe.txt" 2>&1
	cat "$W/cruxctl-probe.txt"
	# "  path I via HOP ports P,Q" -> "P HOP" lines, as the driver's probe prints them
	awk '$1 == "path" { n = split($6, p, ","); for (i = 1; i <= n; i++) print p[i], $4 }' \
		"$W/cruxctl-probe.txt" > "$W/probe.txt"
else
	ip netns exec "$A" "$CONF" probe 198.18.10.2 198.18.20.2 9 47000 48 2 > "$W/probe.txt"
fi
S1P=$(awk '$2 == "198.18.11.2" { print $1 }' "$W/probe.txt" | head -n 2 | tr '\n' ' ')
S2P=$(awk '$2 == "198.18.12.2" { print $1 }' "$W/probe.txt" | head -n 2 | tr '\n' ' ')
echo "spine 1 ports: $S1P; spine 2 ports: $S2P"
[ "$(echo $S1P | wc -w)" = 2 ] && [ "$(echo $S2P | wc -w)" = 2 ] ||
	{ cat "$W/probe.txt"; fail "probing found no two ports per spine"; }
export CRUX_SHM_DIR="$W/shm" CRUX_JOB_ID="$P" NCCL_NET_PLUGIN=crux LD_LIBRARY_PATH="$PLUGDIR" \
	CRUX_SOCKET_IFNAME="$P" CRUX_TIMEOUT=10s CRUX_SOCKET_NTHREADS=2 CRUX_NSOCKS_PERTHREAD=1
if [ -n "$SRLIB" ]; then
	# one device per namespace: the host's fabric interface
	export CRUX_TRANSPORT=verbs CRUX_IBVERBS_LIB="$SRLIB" CRUX_MLX5_LIB="$SRLIB"
	echo "transport: verbs on the software RDMA device"
fi
# shellcheck disable=SC2086
"$DTSET" "$W/shm" "$P" 2 198.18.20.2 1 $S1P || fail "dtset: route via spine 1"

c1() { ip netns exec "$S1" cat "/sys/class/net/${P}s0/statistics/rx_bytes"; }
c2() { ip netns exec "$S2" cat "/sys/class/net/${P}t0/statistics/rx_bytes"; }
a1=$(c1); a2=$(c2)
ip netns exec "$B" "$CONF" xfer-recv "$W" > "$W/recv.log" 2>&1 &
RP=$!
cxt_kill_at_exit "$RP"
ip netns exec "$A" "$CONF" xfer-send "$W" 1048576 24 24 > "$W/send.log" 2>&1 &
SP=$!
cxt_kill_at_exit "$SP"
i=0
while [ ! -e "$W/phase1.done" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$W/phase1.done" ] || fail "phase 1 did not finish"
b1=$(c1); b2=$(c2)
# shellcheck disable=SC2086
"$DTSET" "$W/shm" "$P" 2 198.18.20.2 2 $S2P || fail "dtset: route via spine 2"
# Without an agent the ranks re-read their copy of the table every 100 ms.
sleep 0.3
touch "$W/phase2.go"
wait $SP; S=$?
wait $RP; R=$?
e1=$(c1); e2=$(c2)
cat "$W/send.log" "$W/recv.log"
[ $S = 0 ] && [ $R = 0 ] || fail "transfer failed (send $S, recv $R)"
p1s1=$((b1 - a1)); p1s2=$((b2 - a2)); p2s1=$((e1 - b1)); p2s2=$((e2 - b2))
echo "phase 1 (route via spine 1): spine1 $p1s1 B, spine2 $p1s2 B"
echo "phase 2 (route via spine 2): spine1 $p2s1 B, spine2 $p2s2 B"
# 24 MiB per phase; control traffic (headers, ECMP-placed) is a few KiB.
# Phase 2's first messages may still leave on spine 1 while the new sockets connect.
[ $p1s1 -ge 25000000 ] && [ $p1s2 -lt 1000000 ] ||
	fail "phase 1 traffic did not take spine 1"
[ $p2s2 -ge 20000000 ] && [ $p2s1 -lt 6000000 ] ||
	fail "phase 2 traffic did not move to spine 2"
echo "PASS: traffic follows the route's spine and moves with it, data intact"
