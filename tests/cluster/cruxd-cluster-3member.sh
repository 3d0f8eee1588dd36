#!/bin/sh
# Cluster mode against a 3-member etcd: two cruxd processes (own CRUX_SHM_DIR,
# fake ranks of one job on both hosts) list all three members; the member they
# list first is SIGKILLed: neither agent ever reports stale, and an override
# set afterwards on one host still reaches both.
# Usage: cruxd-cluster-3member.sh CRUXD CRUXCTL FAKE_RANK
set -eu
CRUXD=$1
CTL=$2
FAKE=$3
. "$(dirname "$0")/cruxd-lib.sh"
etcd_start "$T/etcd" 3 || exit 1
export CRUX_ETCD="$ETCD_ENDPOINTS"
start_hosts 2

wait_agree "1 2" JA scheduled 15 "the two agents did not agree on a schedule with JA scheduled"
echo "agreed: revision $REV, JA level $LEVEL, leader $LEADER"
first=$(echo $ETCD_PIDS | cut -d' ' -f1)
kill -KILL "$first"
wait "$first" 2>/dev/null || true
for i in $(seq 1 25); do
	for h in 1 2; do
		[ "$(stale $h)" = false ] || fail "h$h reports stale after one etcd member of three died"
	done
	sleep 0.2
done
CRUX_SHM_DIR=$T/h2 "$CTL" set --job JA --level 0 >/dev/null || fail "cruxctl set with a member down"
MINREV=$REV
wait_agree "1 2" JA overridden 10 "the override did not reach both hosts with a member down"
echo "etcd member 1 of 3 killed: never stale; override applied on both hosts (revision $REV)"
echo "cruxd-cluster-3member: ok"
