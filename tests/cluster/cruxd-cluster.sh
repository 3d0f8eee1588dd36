#!/bin/sh
# Cluster mode with separate cruxd processes: a 1-member etcd and three
# agents h1..h3, each with its own CRUX_SHM_DIR and fake ranks: job JA spread
# over the three hosts, and one job per host (J1..J3). Checks:
#   - every agent applies the same schedule revision and gives JA one level;
#   - cruxctl set on one host applies on every host (through etcd), clear too;
#   - the leader frozen (SIGSTOP) past its lease: another leads; resumed, the
#     old leader finds its lease gone and follows the new leader's schedule;
#   - the leader cruxd SIGKILLed: another leads within the lease TTL and the
#     schedule continues (JA stays scheduled at its level, never re-profiled);
#   - a non-leader SIGKILLed: its host record expires, its job leaves the
#     schedule of the others;
#   - etcd stopped: the tables stay, status says stale; etcd back: not stale,
#     the schedule goes on.
# Usage: cruxd-cluster.sh CRUXD CRUXCTL FAKE_RANK
set -eu
CRUXD=$1
CTL=$2
FAKE=$3
. "$(dirname "$0")/etcd-lib.sh"
etcd_need

T=$(mktemp -d /tmp/cxclu.XXXXXX)
chmod 755 "$T"
RANKS=""
A1= A2= A3=
cleanup() {
	for p in $A1 $A2 $A3 $RANKS; do
		kill -KILL "$p" 2>/dev/null || true
	done
	for p in $A1 $A2 $A3 $RANKS; do
		wait "$p" 2>/dev/null || true
	done
	etcd_stop
	rm -rf "$T"
}
trap cleanup EXIT
fail() {
	[ -z "${CRUX_TEST_KEEP:-}" ] || cp -r "$T" "$CRUX_TEST_KEEP"
	echo "FAIL: $*" >&2
	for h in 1 2 3; do
		echo "--- h$h log" >&2
		tail -n 15 "$T/a$h.log" >&2 || true
	done
	exit 1
}

etcd_start "$T/etcd" 1 || exit 1
export CRUX_PROBE=0 CRUX_AGENT_INTERVAL=200ms CRUX_PROFILE_WINDOW=1s CRUX_HEARTBEAT_TIMEOUT=2s
export CRUX_CLUSTER_TTL=3s CRUX_ETCD="$ETCD_ENDPOINTS" CRUX_CLUSTER="it$$"
TTL=3

start_agent() {
	CRUX_SHM_DIR=$T/h$1 "$CRUXD" --host "h$1" --log-level info >>"$T/a$1.log" 2>&1 &
	eval "A$1=$!"
}
for h in 1 2 3; do
	mkdir -p "$T/h$h"
	chmod 755 "$T/h$h"
	next=$((h % 3 + 1))
	CRUX_SHM_DIR=$T/h$h "$FAKE" "$T/h$h" JA "10.77.0.$h" "10.77.0.$next" 1000000 0.1 0.05 0.05 &
	RANKS="$RANKS $!"
	CRUX_SHM_DIR=$T/h$h "$FAKE" "$T/h$h" "J$h" "10.77.0.$h" "10.77.0.$next" 100 0.1 0.09 0.01 &
	RANKS="$RANKS $!"
	start_agent $h
done

st() { CRUX_SHM_DIR=$T/h$1 "$CTL" --json status 2>/dev/null || true; }
# stale HOST: the cluster's stale flag in that host's status (true/false)
stale() { st "$1" | grep -o '"schedule_input_revision":[0-9]*,"stale":[a-z]*' | sed 's/.*://'; }
field() { sed -n "s/.*\"$2\":\"\{0,1\}\([^,\"}]*\).*/\1/p" "$1" | head -n 1; }
# job_of FILE ID: '"level":L,"state":S' of that job in a status
job_of() { grep -o "\"id\":\"$2\",\"level\":[0-9]*,\"state\":\"[a-z]*\"" "$1" | head -n 1 | sed 's/.*"level"/"level"/'; }

# agree HOSTS JOB STATE: every host applied one revision (> MINREV) with JOB in STATE at
# one level; sets REV, LEVEL, LEADER.
MINREV=0
agree() {
	rev= want= lead=
	for h in $1; do
		st "$h" >"$T/s$h.json"
		r=$(field "$T/s$h.json" schedule_revision)
		j=$(job_of "$T/s$h.json" "$2")
		l=$(field "$T/s$h.json" leader)
		[ -n "$r" ] && [ "$r" -gt "$MINREV" ] || return 1
		case "$j" in *"\"state\":\"$3\"") ;; *) return 1 ;; esac
		[ -z "$rev" ] || [ "$rev" = "$r" ] || return 1
		[ -z "$want" ] || [ "$want" = "$j" ] || return 1
		[ -n "$l" ] && { [ -z "$lead" ] || [ "$lead" = "$l" ]; } || return 1
		rev=$r want=$j lead=$l
	done
	REV=$rev LEVEL=$(echo "$want" | sed 's/"level":\([0-9]*\).*/\1/') LEADER=$lead
}
wait_agree() { # HOSTS JOB STATE LIMIT_S WHAT
	i=0
	until agree "$1" "$2" "$3"; do
		i=$((i + 1))
		[ $i -le $(($4 * 10)) ] || fail "$5"
		sleep 0.1
	done
}

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
CRUX_SHM_DIR=$T/h2 "$CTL" clear >/dev/null || fail "cruxctl clear in cluster mode"
MINREV=$REV
wait_agree "1 2 3" JA scheduled 10 "clearing the override did not reach every host"
echo "override: set and cleared on every host (revision $REV)"

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
for h in $rest; do
	job_of "$T/s$h.json" "J$L" | grep -q state && fail "h$h still schedules J$L of the dead host"
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
echo "etcd stopped: h$M keeps JA ($before), status stale"
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
