#!/bin/sh
# Cluster mode against a 3-member etcd: two cruxd processes (own CRUX_SHM_DIR,
# fake ranks of one job on both hosts) list all three members; the member they
# list first is SIGKILLed: neither agent ever reports stale, and an override
# set afterwards on one host still reaches both. Then a third agent given
# h1's name is refused (it says so) and does not overwrite h1's view.
# Usage: cruxd-cluster-3member.sh CRUXD CRUXCTL FAKE_RANK
# Variables set here are read by the sourced cruxd-lib.sh / etcd-lib.sh.
# shellcheck disable=SC2034
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

# ---- a second agent with h1's name ----
mkdir -m 755 "$T/dup"
CRUX_SHM_DIR=$T/dup "$FAKE" "$T/dup" JD 10.77.0.9 10.77.0.1 100 0.1 0.09 0.01 &
RANKS="$RANKS $!"
cxt_kill_at_exit $!
CRUX_SHM_DIR=$T/dup "$CRUXD" --host h1 --log-level info >"$T/dup.log" 2>&1 &
A3=$!
cxt_kill_at_exit $!
i=0
until grep -q "host name h1 is held by another agent's lease" "$T/dup.log"; do
	i=$((i + 1))
	[ $i -le 50 ] || fail "a second agent named h1 did not say its name is taken: $(tail -n 3 "$T/dup.log")"
	sleep 0.1
done
sleep 1
for h in 1 2; do
	st "$h" | grep -q '"id":"JD"' && fail "h$h schedules JD: the duplicate h1 overwrote h1's view"
done
MINREV=0
wait_agree "1 2" JA overridden 5 "h1 and h2 disagree after a duplicate h1 appeared"
echo "a second agent named h1: refused, h1's view kept"

echo "cruxd-cluster-3member: ok"
