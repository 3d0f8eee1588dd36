#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The namespace fabric: built as asked (routes, ECMP hash policy, HTB classes
# per level), strict priority by DSCP on a shaped link, refusal to build over
# a live run, clean-up of a dead run's leftovers, nothing left after 'down' or
# after a build that failed half way.
#   fabric_lifecycle.sh SOURCE_ROOT   (root; exit 77 otherwise)
set -uo pipefail
. "$(dirname "$0")/../lib/harness.sh"
cxt_need_root "network namespaces, veth, tc"
F="$1/bench/testbed/fabric.sh"
TAG="f$((RANDOM % 1000))"
PFX="cxtb$TAG"
cxt_at_exit '"$F" down --tag "$TAG"'
fail() { cxt_fail "$@"; }
count_ns() { ip netns list | awk '{print $1}' | grep -c "^$PFX-" || true; }

# An owner that stays alive while we test the refusal.
sleep 300 &
OWNER_PID=$!
cxt_kill_at_exit "$OWNER_PID"
"$F" up --tag "$TAG" --owner "$OWNER_PID" --leaves 2 --hosts-per-leaf 2 --spines 2 \
	--host-rate 20 --spine-rate 40 --dscp "0 8 16 24" || fail "up"
[ "$(count_ns)" -eq 8 ] || fail "expected 8 namespaces (4 hosts, 2 leaves, 2 spines), got $(count_ns)"
[ "$(ip netns exec "$PFX-l0" sysctl -n net.ipv4.fib_multipath_hash_policy)" = 3 ] || fail "hash policy"
[ "$(ip netns exec "$PFX-l0" sysctl -n net.ipv4.fib_multipath_hash_fields)" = 0x00000017 ] ||
	[ "$(ip netns exec "$PFX-l0" sysctl -n net.ipv4.fib_multipath_hash_fields)" = 23 ] || fail "hash fields"
ip -n "$PFX-l0" route show 198.18.1.0/24 | grep -q nexthop || fail "no ECMP route to leaf 1"
[ "$(tc -n "$PFX-l0" class show dev s0 | grep -c 'class htb 1:1[0-3] ')" -eq 4 ] || fail "4 level classes on l0/s0"
tc -n "$PFX-s1" filter show dev l0 | grep -q 'match 00600000/00fc0000' || fail "no DSCP 24 filter on s1/l0"

# Strict priority: DSCP 24 (from h1) vs DSCP 0 (from h0), both to h2 on the
# other leaf. Each sender's own link is uncontended and the spines are faster
# than the hosts, so whatever paths ECMP picks, the flows meet only at leaf 1's
# 20 Mbit/s egress to h2: a router egress, where the classes apply to
# forwarded packets (a sender's own egress is dominated by TCP small queues).
# The high class must get clearly more.
ip netns exec "$PFX-h2" iperf3 -s -p 5301 -D -1 >/dev/null 2>&1
ip netns exec "$PFX-h2" iperf3 -s -p 5302 -D -1 >/dev/null 2>&1
# iperf3 -D returns before it listens: wait for both ports (a slow machine).
i=0
until [ "$(ip netns exec "$PFX-h2" ss -Hltn 2>/dev/null | grep -c ':530[12] ')" -ge 2 ] || [ $i -ge 50 ]; do
	sleep 0.1; i=$((i + 1))
done
if command -v iperf3 >/dev/null 2>&1; then
	ip netns exec "$PFX-h0" iperf3 -c 198.18.1.2 -p 5301 -t 4 -S 0 -J >/tmp/$PFX-lo.json 2>/dev/null &
	lo=$!
	ip netns exec "$PFX-h1" iperf3 -c 198.18.1.2 -p 5302 -t 4 -S 96 -J >/tmp/$PFX-hi.json 2>/dev/null
	wait $lo
	bps() { grep -A8 '"sum_received"' "$1" | grep '"bits_per_second"' | head -n1 | tr -dc '0-9.' ; }
	hi="$(bps /tmp/$PFX-hi.json)"; lo="$(bps /tmp/$PFX-lo.json)"
	rm -f /tmp/$PFX-hi.json /tmp/$PFX-lo.json
	awk -v h="$hi" -v l="$lo" 'BEGIN { exit !(h > 3 * l && h > 5e6) }' ||
		fail "strict priority not honoured: DSCP 24 got $hi bit/s, DSCP 0 got $lo bit/s"
	echo "priority: DSCP 24 $hi bit/s vs DSCP 0 $lo bit/s"
fi

# A second 'up' while the owner lives is refused and leaves the fabric alone.
if "$F" up --tag "$TAG" 2>/dev/null; then fail "built over a live run"; fi
[ "$(count_ns)" -eq 8 ] || fail "the refused 'up' touched the fabric"

# The owner dies: the next 'up' cleans the leftovers and builds anew.
kill "$OWNER_PID"; wait "$OWNER_PID" 2>/dev/null
out="$("$F" up --tag "$TAG" --leaves 1 --hosts-per-leaf 2 --spines 1 2>&1)" || fail "up after a dead run: $out"
grep -q "cleaning up the leftovers" <<<"$out" || fail "no clean-up message: $out"
[ "$(count_ns)" -eq 4 ] || fail "expected 4 namespaces after the rebuild, got $(count_ns)"

"$F" down --tag "$TAG" || fail "down"
[ "$(count_ns)" -eq 0 ] || fail "namespaces left after down"
[ ! -e "/run/crux-testbed$TAG" ] || fail "state left after down"

# A build that fails half way (here a tc that refuses every command, after the
# namespaces and links exist) tears down what it built.
cxt_workdir cxtb-tc
printf '#!/bin/sh\nexit 1\n' >"$CXT_W/tc"
chmod +x "$CXT_W/tc"
if out="$(PATH="$CXT_W:$PATH" "$F" up --tag "$TAG" --leaves 1 --hosts-per-leaf 2 --spines 1 2>&1)"; then
	fail "up succeeded with a failing tc"
fi
grep -q "tearing it down" <<<"$out" || fail "no tear-down message: $out"
[ "$(count_ns)" -eq 0 ] || fail "the failed build left $(count_ns) namespaces"
[ ! -e "/run/crux-testbed$TAG" ] || fail "the failed build left its state"
echo "PASS"
