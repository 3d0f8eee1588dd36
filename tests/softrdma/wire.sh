#!/bin/sh
# The software RDMA device on the wire between two network namespaces, as a
# RoCEv2 NIC frames it: a QP's packets are UDP to port 4791, carry its traffic
# class as IP TOS (DSCP << 2 | ECN) and leave from the RoCE v2 source port its
# flow label gives (or the one mlx5dv_modify_qp_udp_sport set); no TCP at all.
# usage: wire.sh SRT_PEER
set -u
PEER=$1
. "$(dirname "$0")/../lib/harness.sh"
cxt_need_root "network namespaces"
cxt_need_cmd tcpdump
P=cxsr$$
A=${P}a B=${P}b
cxt_workdir cxsr-wire
W=$CXT_W
fail() { CXT_LOG_LINES=200 cxt_fail "$@"; }
set -e
cxt_ns "$A"
cxt_ns "$B"
cxt_veth "$A" "${P}x" 198.18.7.1 "$B" "${P}y" 198.18.7.2
set +e

# run NAME TC FL EXPECTED_SPORT [SPORT]: one transfer, captured on B
run() {
	name=$1 tc=$2 fl=$3 want=$4
	mkdir -p "$W/$name"
	ip netns exec "$B" tcpdump -i "${P}y" -n -s 96 -U --immediate-mode -Z root -w "$W/$name.pcap" 2>"$W/$name.td.log" &
	TD=$!
	cxt_kill_at_exit "$TD"
	# tcpdump captures once it says "listening on" (a fixed sleep can miss the first packets).
	i=0; until grep -q "listening on" "$W/$name.td.log" 2>/dev/null || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
	CRUX_SOFTRDMA_IFNAMES="${P}y" ip netns exec "$B" "$PEER" "$W/$name" passive 4194304 > "$W/$name.b.log" 2>&1 &
	BP=$!
	cxt_kill_at_exit "$BP"
	CRUX_SOFTRDMA_IFNAMES="${P}x" ip netns exec "$A" "$PEER" "$W/$name" active 4194304 "$tc" "$fl" ${5:-} > "$W/$name.a.log" 2>&1
	S=$?
	wait $BP; R=$?
	sleep 0.5
	kill -INT "$TD"; wait "$TD" 2>/dev/null
	cat "$W/$name.a.log" "$W/$name.b.log"
	[ $S = 0 ] && [ $R = 0 ] || fail "$name: transfer failed (active $S, passive $R)"
	DATA='src host 198.18.7.1 and udp dst port 4791 and greater 200'
	tcpdump -r "$W/$name.pcap" -n -v "$DATA" 2>/dev/null |
		sed -n 's/.*(tos \(0x[0-9a-f]*\),.* length \([0-9]*\)).*/\1 \2/p' > "$W/$name.tos"
	tcpdump -r "$W/$name.pcap" -n "$DATA" 2>/dev/null |
		sed -n 's/.* 198\.18\.7\.1\.\([0-9]*\) > .*/\1/p' | sort -u > "$W/$name.ports"
	tcp=$(tcpdump -r "$W/$name.pcap" -n tcp 2>/dev/null | wc -l)
	echo "$name: $tcp TCP packets"
	[ "$tcp" = 0 ] || fail "$name: the device sent TCP; RoCEv2 is UDP"
	# the responder's acknowledgements come back to 4791 from its QP's own port
	back=$(tcpdump -r "$W/$name.pcap" -n 'src host 198.18.7.2 and udp dst port 4791' 2>/dev/null | wc -l)
	echo "$name: $back packets back to 4791"
	[ "$back" -gt 0 ] || fail "$name: no acknowledgements to port 4791"
	wtos=$(printf '0x%x' "$tc")
	awk -v w="$wtos" -v name="$name" '
		$1 == w { b += $2 } $1 != w { other++ }
		END { printf "%s: %d data bytes at tos %s, %d packets at another tos\n", name, b, w, other
		      exit (b >= 4194304 && other == 0) ? 0 : 1 }' "$W/$name.tos" ||
		fail "$name: data packets do not carry tos $wtos"
	ports=$(tr '\n' ' ' < "$W/$name.ports")
	echo "$name: data source ports: $ports(expected $want)"
	[ "$ports" = "$want " ] || fail "$name: source port is not $want"
}

# flow label 0x12345 -> 0xC000 | (0x2345 ^ 0x4) = 58177; class 96 (DSCP 24)
FL=0x12345
SP=$(( 0xC000 | ((FL & 0x3fff) ^ ((FL & 0xFC000) >> 14)) ))
run flowlabel 96 $FL $SP
# an explicit port through mlx5dv, class 32 (DSCP 8)
CRUX_SOFTRDMA_UDP_SPORT=1 run sport 32 0x777 50123 50123
echo "PASS"
