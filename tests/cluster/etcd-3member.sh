#!/bin/sh
# Integration: a 3-member etcd loses one member (SIGKILL; the client lists it
# first): the client's calls, leases and elections go on through the other
# two. Then a second member is frozen (SIGSTOP): without quorum the client
# must fail with an error (hasleader), not write and not hang.
# Usage: etcd-3member.sh CLIENT_TEST ELECTION_TEST
set -eu
. "$(dirname "$0")/etcd-lib.sh"
etcd_need
. "$(dirname "$0")/../lib/harness.sh"
command -v curl >/dev/null || cxt_fail "curl is needed for the health check (Debian package curl)"
cxt_workdir crux-etcd-3m
tmp=$CXT_W
cxt_at_exit etcd_stop
etcd_start "$tmp" 3
set -- "$1" "$2" $ETCD_PIDS
client=$1
elect=$2
p1=$3
p2=$4
# Round 1: member 1 killed; the client lists it first.
kill -KILL "$p1"
"$client" "$ETCD_ENDPOINTS"
"$elect" "$ETCD_ENDPOINTS"
# Round 2: member 2 frozen as well; member 3 alone has no quorum.
ep3=$(echo "$ETCD_ENDPOINTS" | cut -d, -f3)
echo "round 2: member 2 frozen, asking $ep3 alone"
kill -STOP "$p2"
if "$client" "$ep3" >"$tmp/noquorum.log" 2>&1; then
	echo "FAIL: writes succeeded without quorum" >&2
	exit 1
fi
grep -q "FAIL" "$tmp/noquorum.log" || { cat "$tmp/noquorum.log" >&2; exit 1; }
kill -CONT "$p2"
echo "3-member: passed"
