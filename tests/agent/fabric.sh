# shellcheck shell=sh
# Emulated leaf-spine fabric in network namespaces for the agent tests
# (sourced). h1 (198.19.1.2) - leaf l1 - spines s1..sN - leaf l2 - h2
# (198.19.2.2); the leaves spread flows over the spines by ECMP on the source
# port (hash policy 3, fields 0x17). Spine i answers probes from 198.19.(10+i).2.
# Namespace names start with cxag; all are removed at exit (tests/lib/harness.sh).
. "$(dirname "$0")/../lib/harness.sh"
P=cxag$$
fail() { cxt_fail "$@"; }
# build N: the leaf-spine fabric with N spines; teardown: remove it now (it is
# removed at exit anyway).
build() { cxt_leaf_spine "$P" "$1"; }
teardown() {
	for x in $(ip netns list | awk '{print $1}' | grep "^${P}[hls][0-9]"); do ip netns del "$x"; done
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
