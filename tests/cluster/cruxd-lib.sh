# shellcheck shell=sh
# Sourced by the cruxd cluster tests (after CRUXD, CTL and FAKE are set):
# a temporary directory, agents h1..hN each with its own CRUX_SHM_DIR and fake
# ranks (job JA spread over all hosts, and job Jh on host h alone), and
# helpers that read the agents' status through cruxctl --json.
# REV, LEVEL, LEADER, TTL and the like are set here for the sourcing test to read.
# shellcheck disable=SC2034
. "$(dirname "$0")/etcd-lib.sh"
etcd_need

. "$(dirname "$0")/../lib/harness.sh"
cxt_workdir cxclu
T=$CXT_W
cxt_at_exit etcd_stop
# RANKS and A1..A3: the tests read and kill them; each is also killed at exit.
RANKS=""
A1="" A2="" A3=""
fail() {
	[ -z "${CRUX_TEST_KEEP:-}" ] || cp -r "$T" "$CRUX_TEST_KEEP"
	CXT_LOG_LINES=15 cxt_fail "$@"
}

export CRUX_PROBE=0 CRUX_AGENT_INTERVAL=200ms CRUX_PROFILE_WINDOW=1s CRUX_HEARTBEAT_TIMEOUT=2s
export CRUX_CLUSTER_TTL=3s CRUX_CLUSTER="it$$"
TTL=3

start_agent() {
	CRUX_SHM_DIR=$T/h$1 "$CRUXD" --host "h$1" --log-level info >>"$T/a$1.log" 2>&1 &
	eval "A$1=$!"
	cxt_kill_at_exit $!
}
# start_hosts N: etcd must be up (CRUX_ETCD set)
start_hosts() {
	for h in $(seq 1 "$1"); do
		mkdir -p "$T/h$h"
		chmod 755 "$T/h$h"
		next=$((h % $1 + 1))
		CRUX_SHM_DIR=$T/h$h "$FAKE" "$T/h$h" JA "10.77.0.$h" "10.77.0.$next" 1000000 0.1 0.05 0.05 &
		RANKS="$RANKS $!"
		cxt_kill_at_exit $!
		CRUX_SHM_DIR=$T/h$h "$FAKE" "$T/h$h" "J$h" "10.77.0.$h" "10.77.0.$next" 100 0.1 0.09 0.01 &
		RANKS="$RANKS $!"
		cxt_kill_at_exit $!
		start_agent "$h"
	done
}

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
	rev="" want="" lead=""
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

