# Emulated leaf-spine fabric in network namespaces for the agent tests
# (sourced). h1 (198.19.1.2) - leaf l1 - spines s1..sN - leaf l2 - h2
# (198.19.2.2); the leaves spread flows over the spines by ECMP on the source
# port (hash policy 3, fields 0x17). Spine i answers probes from 198.19.(10+i).2.
# Namespace names start with cxag; all are removed by teardown.
P=cxag$$
fail() { echo "FAIL: $*" >&2; exit 1; }
NSS=""
mkns() { ip netns add "$1"; NSS="$NSS $1"; ip -n "$1" link set lo up; }
router() {
	for s in net.ipv4.ip_forward=1 net.ipv4.fib_multipath_hash_policy=3 \
		net.ipv4.fib_multipath_hash_fields=0x17 net.ipv4.icmp_ratelimit=0 \
		net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0; do
		ip netns exec "$1" sysctl -qw "$s"
	done
}
# link NS1 IF1 ADDR1 NS2 IF2 ADDR2 (/24 each side)
link() {
	ip link add "$2" netns "$1" type veth peer name "$5" netns "$4"
	ip -n "$1" addr add "$3/24" dev "$2"
	ip -n "$4" addr add "$6/24" dev "$5"
	ip -n "$1" link set "$2" up
	ip -n "$4" link set "$5" up
}

build() {
	n=$1
	NSS=""
	mkns ${P}h1; mkns ${P}h2; mkns ${P}l1; mkns ${P}l2
	router ${P}l1; router ${P}l2
	link ${P}h1 eth0 198.19.1.2 ${P}l1 down0 198.19.1.1
	link ${P}h2 eth0 198.19.2.2 ${P}l2 down0 198.19.2.1
	ip -n ${P}h1 route add default via 198.19.1.1
	ip -n ${P}h2 route add default via 198.19.2.1
	nh1=""; nh2=""
	i=1
	while [ $i -le "$n" ]; do
		mkns ${P}s$i; router ${P}s$i
		link ${P}l1 up$i 198.19.$((10 + i)).1 ${P}s$i sl1 198.19.$((10 + i)).2
		link ${P}l2 up$i 198.19.$((20 + i)).1 ${P}s$i sl2 198.19.$((20 + i)).2
		ip -n ${P}s$i route add 198.19.1.0/24 via 198.19.$((10 + i)).1
		ip -n ${P}s$i route add 198.19.2.0/24 via 198.19.$((20 + i)).1
		nh1="$nh1 nexthop via 198.19.$((10 + i)).2"
		nh2="$nh2 nexthop via 198.19.$((20 + i)).2"
		i=$((i + 1))
	done
	# shellcheck disable=SC2086
	ip -n ${P}l1 route add 198.19.2.0/24 $nh1
	# shellcheck disable=SC2086
	ip -n ${P}l2 route add 198.19.1.0/24 $nh2
}

teardown() {
	for x in $NSS; do ip netns del "$x" 2>/dev/null || true; done
	NSS=""
}

rx() { ip netns exec ${P}s$1 cat /sys/class/net/sl1/statistics/rx_packets; }

# spine_of PROTO DPORT PORTS N: the one spine that carried 5 packets from each
# of PORTS (comma-separated); fails if they split.
spine_of() {
	proto=$1; dport=$2; ports=$3; n=$4
	i=1; before=""
	while [ $i -le "$n" ]; do before="$before $(rx $i)"; i=$((i + 1)); done
	cnt=0
	for port in $(echo "$ports" | tr ',' ' '); do
		ip netns exec ${P}h1 "$SEND" "$proto" 198.19.2.2 "$dport" "$port" 5 ||
			fail "send from $port"
		cnt=$((cnt + 5))
	done
	i=1; found=0
	for b in $before; do
		d=$(( $(rx $i) - b ))
		if [ $d -ge $cnt ]; then
			[ $found -eq 0 ] || fail "ports $ports reached spines $found and $i"
			found=$i
		elif [ $d -ge 5 ]; then
			fail "$proto: spine $i saw $d packets from ports $ports: they split"
		fi
		i=$((i + 1))
	done
	[ $found -gt 0 ] || fail "no spine carried the packets from ports $ports"
	echo $found
}
