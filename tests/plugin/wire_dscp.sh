#!/bin/sh
# DSCP on the wire: the job's level in the decision table marks its data
# packets; a level change between two messages shows on the next message,
# and the receiver's own packets (ACKs) follow the sender's class.
# usage: wire_dscp.sh CONFORMANCE DTSET PLUGIN_DIR [SOFTRDMA_LIB]
# With SOFTRDMA_LIB the plugin runs its verbs transport on the software RDMA
# device (tests/softrdma), whose packets are RoCEv2's (UDP to 4791) marked with
# the QP's traffic class: the capture then shows the QPs' class on those.
set -u
CONF=$1 DTSET=$2 PLUGDIR=$3 SRLIB=${4:-}
. "$(dirname "$0")/../lib/harness.sh"
cxt_need_root "network namespaces"
cxt_need_cmd tcpdump
P=cxpl$$
A=${P}a B=${P}b
cxt_workdir cxpl-dscp
W=$CXT_W
fail() { CXT_LOG_LINES=200 cxt_fail "$@"; }
mkdir -m 755 "$W/shm"
set -e
cxt_ns "$A"
cxt_ns "$B"
cxt_veth "$A" "${P}x" 198.18.1.1 "$B" "${P}y" 198.18.1.2
set +e
export CRUX_SHM_DIR="$W/shm" CRUX_JOB_ID="$P" NCCL_NET_PLUGIN=crux LD_LIBRARY_PATH="$PLUGDIR" \
	CRUX_SOCKET_IFNAME="$P" CRUX_TIMEOUT=10s
# Messages of phase 2 that may still leave at the old class: none. Sockets
# re-mark in place; verbs builds a lane (QPs at the new class) on the change
# and holds the next message until that lane is up and the old one drained.
SLACK=0
CAP=tcp TXF='src host 198.18.1.1 and greater 200' RXF='src host 198.18.1.2'
if [ -n "$SRLIB" ]; then
	# the plugin's bootstrap socket (set-up, lane control) is TCP and unmarked;
	# the RDMA traffic of both ends is UDP to 4791
	CAP='tcp or udp port 4791'
	TXF='src host 198.18.1.1 and udp dst port 4791 and greater 200'
	RXF='src host 198.18.1.2 and udp dst port 4791'
	# one device per namespace: the veth, the only interface with an address there
	export CRUX_TRANSPORT=verbs CRUX_IBVERBS_LIB="$SRLIB" CRUX_MLX5_LIB="$SRLIB"
	SLACK=${CRUX_WIRE_LANE_SLACK:-0}
	echo "transport: verbs on the software RDMA device (up to $SLACK messages on the old lane)"
fi
MIN2=$(((16 - SLACK) * 1048576))

# level 1 -> DSCP 8 (TOS 0x20); level 3 -> DSCP 24 (TOS 0x60) in the default map
"$DTSET" "$W/shm" "$P" 1 || fail "dtset: level 1"
ip netns exec "$B" tcpdump -i "${P}y" -n -s 96 -U --immediate-mode -Z root -w "$W/cap.pcap" "$CAP" 2>"$W/tcpdump.log" &
TD=$!
cxt_kill_at_exit "$TD"
# tcpdump captures once it says "listening on" (a fixed sleep can miss the first packets).
i=0; until grep -q "listening on" "$W/tcpdump.log" 2>/dev/null || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
ip netns exec "$B" "$CONF" xfer-recv "$W" > "$W/recv.log" 2>&1 &
RP=$!
cxt_kill_at_exit "$RP"
ip netns exec "$A" "$CONF" xfer-send "$W" 1048576 16 16 > "$W/send.log" 2>&1 &
SP=$!
cxt_kill_at_exit "$SP"
i=0
while [ ! -e "$W/phase1.done" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$W/phase1.done" ] || fail "phase 1 did not finish"
"$DTSET" "$W/shm" "$P" 3 || fail "dtset: level 3"
# Without an agent the ranks re-read their copy of the table every 100 ms.
sleep 0.3
touch "$W/phase2.go"
wait $SP; S=$?
wait $RP; R=$?
sleep 0.5
kill -INT "$TD"; wait "$TD" 2>/dev/null
cat "$W/send.log" "$W/recv.log"
[ $S = 0 ] && [ $R = 0 ] || fail "transfer failed (send $S, recv $R)"

# tos of data packets (sender -> receiver, > 200 bytes) in capture order
tcpdump -r "$W/cap.pcap" -n -v "$TXF" 2>/dev/null |
	sed -n 's/.*(tos \(0x[0-9a-f]*\),.* length \([0-9]*\)).*/\1 \2/p' > "$W/tx.txt"
tcpdump -r "$W/cap.pcap" -n -v "$RXF" 2>/dev/null |
	sed -n 's/.*(tos \(0x[0-9a-f]*\),.*/\1/p' > "$W/rx.txt"
awk -v min2=$MIN2 '
	$1 == "0x20" { if (seen60) late++; b20 += $2 }
	$1 == "0x60" { seen60 = 1; b60 += $2 }
	$1 != "0x20" && $1 != "0x60" { other++ }
	END {
		printf "data bytes at DSCP 8: %d, at DSCP 24: %d, unmarked/other packets: %d, DSCP 8 after the change: %d\n", b20, b60, other, late
		# each phase moved 16 MiB; headers and framing add a little
		ok = b20 >= 16 * 1048576 && b60 >= min2 && late == 0 && other == 0
		exit ok ? 0 : 1
	}' "$W/tx.txt" || fail "data packets do not carry the expected DSCP"
# The receiver learns the class from the sender (its SYN-ACKs precede that).
n20=$(grep -c '^0x20$' "$W/rx.txt"); last=$(tail -n 1 "$W/rx.txt")
echo "receiver packets: $n20 at DSCP 8, last one tos $last"
[ "$n20" -gt 0 ] && [ "$last" = 0x60 ] || fail "receiver's packets do not follow the class"
# The traffic matrix in the profile records: bytes per peer host and level.
"$DTSET" prof "$W/shm" > "$W/prof.txt"; cat "$W/prof.txt"
awk -v min2=$MIN2 '
	$4 == "198.18.1.2" && $6 == 1 { tx1 += $8 }
	$4 == "198.18.1.2" && $6 == 3 { tx3 += $8 }
	$4 == "198.18.1.1" && $6 == 1 { rx1 += $10 }
	$4 == "198.18.1.1" && $6 == 3 { rx3 += $10 }
	END { exit (tx1 >= 16777216 && tx3 >= min2 && rx1 >= 16777216 && rx3 >= min2) ? 0 : 1 }
' "$W/prof.txt" || fail "profile records lack the per-level byte counters"
echo "PASS: DSCP follows the decision table, changed at a message boundary; bytes counted per level"
