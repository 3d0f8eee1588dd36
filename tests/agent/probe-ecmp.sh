#!/bin/sh
# ECMP path probing on emulated leaf-spine fabrics (network namespaces, root):
# for 2 and 4 spines, TCP (socket transport) and UDP to 4791 (RoCEv2), every
# path must be found, and every port recorded for a path must really take
# that spine (checked on the spine's interface counters with ordinary traffic).
# Usage: probe-ecmp.sh CRUXCTL PROBE_SEND
set -eu
CTL=$1
# shellcheck disable=SC2034 # read by spine_of in fabric.sh
SEND=$2
. "$(dirname "$0")/fabric.sh"
cxt_need_root "network namespaces"
cxt_need_cmd ip iproute2
cxt_workdir cxag-probe
tmp=$CXT_W

check() {
	n=$1
	proto=$2
	if [ "$proto" = udp ]; then dport=4791; else dport=9; fi
	ip netns exec ${P}h1 "$CTL" probe 198.19.2.2 --proto "$proto" --hops 2 --expect "$n" \
		--per-path 4 --ports 41000-48999 >"$tmp/probe.txt" || fail "probe ($n spines, $proto)"
	cat "$tmp/probe.txt"
	found=$(grep -c '^  path ' "$tmp/probe.txt" || true)
	[ "$found" -eq "$n" ] || fail "$proto: found $found paths of $n"
	grep '^  path ' "$tmp/probe.txt" | while read -r _ _ _ hop _ ports; do
		spine=$(echo "$hop" | awk -F. '{print $3 - 10}')
		[ "$spine" -ge 1 ] && [ "$spine" -le "$n" ] || fail "unexpected hop $hop"
		got=$(spine_of "$proto" $dport "$ports" "$n")
		[ "$got" = "$spine" ] || fail "$proto: ports $ports recorded for spine $spine took spine $got"
		echo "  verified: ports $ports -> spine $spine ($proto)"
	done
}

for spines in 2 4; do
	build $spines
	check $spines tcp
	check $spines udp
	teardown
	echo "probe-ecmp: $spines spines ok"
done
