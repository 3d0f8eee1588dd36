#!/bin/sh
# Cluster mode with separate cruxd processes: a 1-member etcd and three
# agents h1..h3, each with its own CRUX_SHM_DIR and fake ranks: job JA spread
# over the three hosts, and one job per host (J1..J3). Checks:
#   - every agent applies the same schedule revision and gives JA one level;
#   - cruxctl set on one host applies on every host (through etcd), clear too;
#     overrides set on two hosts are both in force, cleared one by one;
#   - the leader frozen (SIGSTOP) past its lease: another leads; resumed, the
#     old leader finds its lease gone and follows the new leader's schedule;
#   - the leader cruxd SIGKILLed: another leads within the lease TTL and the
#     schedule continues (JA stays scheduled at its level, never re-profiled);
#   - a non-leader SIGKILLed: its host record expires, its job leaves the
#     schedule of the others;
#   - etcd stopped: the tables stay, status says stale, cruxctl set fails at
#     once naming etcd; etcd back: not stale, a new override goes through.
# Usage: cruxd-cluster.sh CRUXD CRUXCTL FAKE_RANK
# Variables set here are read by the sourced cruxd-lib.sh / etcd-lib.sh.
# shellcheck disable=SC2034
set -eu
CRUXD=$1
CTL=$2
FAKE=$3
. "$(dirname "$0")/cruxd-lib.sh"
etcd_start "$T/etcd" 1 || exit 1
export CRUX_ETCD="$ETCD_ENDPOINTS"
start_hosts 3

# ---- all three agree ----
wait_agree "1 2 3" JA scheduled 15 "the three agents did not agree on a schedule with JA scheduled"
echo "agreed: revision $REV, JA level $LEVEL, leader $LEADER"
lvl=$LEVEL
for h in 1 2 3; do
	[ "$(stale $h)" = false ] || fail "h$h reports stale with etcd up"
	job_of "$T/s$h.json" J1 | grep -q '"state"' || fail "h$h's table lacks J1 (a job of h1 only)"
done

# ---- an override set on one host applies on every host ----
CRUX_SHM_DIR=$T/h2 "$CTL" set --job JA --level 0 >/dev/null || fail "cruxctl set in cluster mode"
MINREV=$REV
wait_agree "1 2 3" JA overridden 10 "the override of h2 did not reach every host"
[ "$LEVEL" = 0 ] || fail "override level $LEVEL, not 0"
# Overrides from two hosts merge: h3's override of J3 leaves h2's of JA in
# force (once, both hosts' whole files went to one key: the last one won).
CRUX_SHM_DIR=$T/h3 "$CTL" set --job J3 --level 1 >/dev/null || fail "cruxctl set on h3"
MINREV=$REV
wait_agree "1 2 3" J3 overridden 10 "the override of h3 did not reach every host"
for h in 1 2 3; do
	[ "$(job_of "$T/s$h.json" JA)" = '"level":0,"state":"overridden"' ] ||
		fail "h3's override removed h2's from h$h: JA is $(job_of "$T/s$h.json" JA)"
done
# Clearing one job on h2 leaves h3's override.
CRUX_SHM_DIR=$T/h2 "$CTL" clear --job JA >/dev/null || fail "cruxctl clear --job JA on h2"
MINREV=$REV
wait_agree "1 2 3" JA scheduled 10 "clearing the override did not reach every host"
for h in 1 2 3; do
	[ "$(job_of "$T/s$h.json" J3)" = '"level":1,"state":"overridden"' ] ||
		fail "clearing JA on h2 removed h3's override of J3 on h$h"
done
# A clear on h1 removes the override h3 set (any host clears any override).
CRUX_SHM_DIR=$T/h1 "$CTL" clear --job J3 >/dev/null || fail "cruxctl clear --job J3 on h1 (set on h3)"
MINREV=$REV
wait_agree "1 2 3" J3 scheduled 10 "clearing J3 (set on h3) on h1 did not reach every host"
if CRUX_SHM_DIR=$T/h1 "$CTL" clear --job nosuch >"$T/clr.out" 2>&1; then
	fail "clear --job nosuch succeeded"
fi
grep -q "job env:nosuch (0x" "$T/clr.out" || fail "clear --job nosuch does not name the job: $(cat "$T/clr.out")"
echo "override: set on two hosts, both in force, cleared one by one (one from another host) on every host (revision $REV)"

# ---- the leader freezes past its lease, then resumes ----
F=${LEADER#h}
eval "kill -STOP \$A$F"
others=""
for h in 1 2 3; do [ $h = "$F" ] || others="$others $h"; done
MINREV=$REV
i=0
until agree "$others" JA scheduled && [ "$LEADER" != "h$F" ]; do
	i=$((i + 1))
	[ $i -le $(((TTL + 5) * 10)) ] || { eval "kill -CONT \$A$F"; fail "no new leader while h$F was frozen"; }
	sleep 0.1
done
eval "kill -CONT \$A$F"
newlead=$LEADER
MINREV=$((REV - 1))
wait_agree "1 2 3" JA scheduled 10 "the resumed h$F did not follow the new leader $newlead"
[ "$LEADER" = "$newlead" ] || fail "leader $LEADER after h$F resumed, not $newlead"
echo "leader h$F frozen: $newlead leads; h$F resumed and follows revision $REV"

# ---- the leader dies ----
L=${LEADER#h}
eval "kill -KILL \$A$L"
eval "wait \$A$L 2>/dev/null || true"
eval "A$L="
rest=""
for h in 1 2 3; do [ $h = "$L" ] || rest="$rest $h"; done
t0=$(date +%s%N)
MINREV=$REV
# While the others take over, JA must never go back to profiling.
i=0
until agree "$rest" JA scheduled && [ "$LEADER" != "h$L" ]; do
	for h in $rest; do
		st "$h" | grep -q '"id":"JA","level":[0-9]*,"state":"profiling"' &&
			fail "JA re-profiled on h$h after the leader died"
	done
	i=$((i + 1))
	[ $i -le $(((TTL + 5) * 10)) ] || fail "no new leader with a new schedule after the leader h$L died"
	sleep 0.1
done
ms=$((($(date +%s%N) - t0) / 1000000))
echo "leader h$L killed: $LEADER leads, revision $REV, after $ms ms (lease TTL ${TTL} s)"
[ "$LEVEL" = "$lvl" ] || fail "JA moved from level $lvl to $LEVEL after the failover (same inputs)"
# The dead host's job leaves every table (cruxctl reads each host's table and
# status one after the other: allow the passes that bring them together).
for h in $rest; do
	i=0
	while st "$h" | grep -q "\"id\":\"J$L\",\"level\":[0-9]*,\"state\""; do
		i=$((i + 1))
		[ $i -le 30 ] || fail "h$h still schedules J$L of the dead host"
		sleep 0.1
	done
done

# ---- a non-leader dies ----
N=
for h in $rest; do [ "h$h" = "$LEADER" ] || N=$h; done
eval "kill -KILL \$A$N"
eval "wait \$A$N 2>/dev/null || true"
eval "A$N="
M=${LEADER#h}
MINREV=$REV
i=0
until agree "$M" JA scheduled && ! job_of "$T/s$M.json" "J$N" | grep -q state; do
	i=$((i + 1))
	[ $i -le $(((TTL + 5) * 10)) ] || fail "the leader h$M still schedules J$N after h$N died"
	sleep 0.1
done
echo "non-leader h$N killed: h$M rescheduled without J$N (revision $REV)"

# ---- etcd stops: the table stays, status says stale; etcd returns ----
before=$(job_of "$T/s$M.json" JA)
etcd_stop
i=0
until [ "$(stale "$M")" = true ]; do
	i=$((i + 1))
	[ $i -le 50 ] || fail "h$M does not say stale with etcd stopped"
	sleep 0.1
done
sleep 1
st "$M" >"$T/stale.json"
grep -q '"running":true' "$T/stale.json" || fail "the agent stopped refreshing its table without etcd"
[ "$(job_of "$T/stale.json" JA)" = "$before" ] || fail "the table changed without etcd"
grep -q "etcd unreachable" "$T/a$M.log" || fail "no log line says etcd is unreachable"
# An override cannot reach the cluster now: refused at once, with the reason.
cat "$T/h$M/overrides.conf" >"$T/ovr.before" 2>/dev/null || true
t0=$(date +%s%N)
if CRUX_SHM_DIR=$T/h$M "$CTL" set --job JA --level 0 >"$T/set.out" 2>&1; then
	fail "cruxctl set was acknowledged with etcd stopped: $(cat "$T/set.out")"
fi
ms=$((($(date +%s%N) - t0) / 1000000))
grep -q "etcd is unreachable" "$T/set.out" || fail "cruxctl set with etcd stopped: $(cat "$T/set.out")"
[ "$ms" -lt 1500 ] || fail "cruxctl set with etcd stopped took $ms ms to fail"
cat "$T/h$M/overrides.conf" 2>/dev/null | cmp -s - "$T/ovr.before" ||
	fail "cruxctl set with etcd stopped changed the overrides file"
[ "$(job_of "$(st "$M" >"$T/stale2.json"; echo "$T/stale2.json")" JA)" = "$before" ] ||
	fail "the table changed without etcd"
echo "etcd stopped: h$M keeps JA ($before), status stale, cruxctl set refused at once ($ms ms)"
# Same member, same data and ports: the leases and keys come back.
"$ETCD_BIN" --name m1 --data-dir "$T/etcd/m1" \
	--listen-client-urls "http://127.0.0.1:$ETCD_BASE" --advertise-client-urls "http://127.0.0.1:$ETCD_BASE" \
	--listen-peer-urls "http://127.0.0.1:$((ETCD_BASE + 1))" \
	--initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_BASE + 1))" \
	--initial-cluster "m1=http://127.0.0.1:$((ETCD_BASE + 1))" --initial-cluster-token "crux-test-$$" \
	--heartbeat-interval 50 --election-timeout 500 >>"$T/etcd/m1.log" 2>&1 &
ETCD_PIDS=$!
i=0
until [ "$(stale "$M")" = false ]; do
	i=$((i + 1))
	[ $i -le 100 ] || fail "h$M still stale 10 s after etcd returned"
	sleep 0.1
done
grep -q "etcd reachable again" "$T/a$M.log" || fail "no log line says etcd is back"
# The cluster works again: a new override goes through etcd and comes back.
CRUX_SHM_DIR=$T/h$M "$CTL" set --job JA --level 1 >/dev/null || fail "cruxctl set after etcd returned"
wait_agree "$M" JA overridden 10 "no new schedule after etcd returned"
[ "$LEVEL" = 1 ] || fail "override after etcd returned: level $LEVEL, not 1"
echo "etcd back: h$M not stale, new schedule revision $REV"
echo "cruxd-cluster: ok"
