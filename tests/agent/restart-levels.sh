#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# cruxd restarts and no running job's level changes (issue 29): four jobs of
# fake-rank processes attached over cruxd.sock (as the preload attaches, and
# attaching again when the agent closes the connection) are profiled and
# scheduled on four levels; cruxd is stopped and started again while one
# job's rank is killed. From the new agent's first status on, sampled every
# 0.1 s: the three live jobs keep their level and stay scheduled (never gone,
# never profiled again at the top level); the killed job is kept through the
# grace (the heartbeat timeout, 3 s here) and departs after it, said in the
# log as ranks that did not come back (its departure then reschedules the
# others: they stay scheduled). Without the grace the new agent drops
# every job at its first pass (ranks not re-attached yet) and profiles them
# again when they come back.
# Usage: restart-levels.sh CRUXCTL CRUXD FAKE_RANK
set -eu
CTL=$1
AGENT=$2
RANK=$3
. "$(dirname "$0")/../lib/harness.sh"
cxt_workdir cxag-restart
tmp=$CXT_W
export CRUX_SHM_DIR="$tmp/shm"
export CRUX_PROBE=0
export CRUX_AGENT_INTERVAL=100ms
export CRUX_PROFILE_WINDOW=1s
export CRUX_HEARTBEAT_TIMEOUT=3s
export CRUX_LOG_LEVEL=info
mkdir -m 755 "$CRUX_SHM_DIR"
fail() { cxt_fail "$@"; }
levels() { # the four jobs as "id level state" lines, sorted
	"$CTL" --json status 2>/dev/null |
		grep -o '"id":"rs:[a-d]","level":[0-9]*,"state":"[a-z]*"' |
		sed 's/"id":"\([^"]*\)","level":\([0-9]*\),"state":"\([a-z]*\)"/\1 \2 \3/' | sort
}
running_pid() {
	"$CTL" --json status 2>/dev/null | grep -q "\"running\":true" &&
		"$CTL" --json status 2>/dev/null | grep -q "\"pid\":$1[,}]"
}
start_agent() {
	"$AGENT" 2>"$tmp/agent$1.log" &
	agent_pid=$!
	cxt_kill_at_exit "$agent_pid"
	i=0
	until running_pid "$agent_pid"; do
		i=$((i + 1)); [ $i -lt 100 ] || fail "agent $1 did not start"
		sleep 0.05
	done
}

start_agent 1
n=1
for spec in "a 8000000 0.2 0.05 0.15" "b 1000000 0.2 0.15 0.05" "c 4000000 0.3 0.1 0.2" \
	"d 2000000 0.2 0.1 0.1"; do
	# shellcheck disable=SC2086
	set -- $spec
	n=$((n + 1))
	FAKE_RANK_ATTACH=1 "$RANK" "$CRUX_SHM_DIR" "rs:$1" 198.18.0.1 "198.18.0.$n" "$2" "$3" "$4" \
		"$5" 2>"$tmp/rank-$1.log" &
	cxt_kill_at_exit $!
	[ "$1" = d ] && dpid=$!
done
i=0
until [ "$(levels | grep -c ' scheduled$')" = 4 ]; do
	i=$((i + 1)); [ $i -lt 100 ] || fail "the four jobs were not scheduled: $(levels)"
	sleep 0.1
done
before=$(levels)
[ "$(echo "$before" | cut -d' ' -f2 | sort -u | wc -l)" -ge 2 ] ||
	fail "the jobs share one level: a level change could not show ($before)"
echo "before the restart: $(echo "$before" | tr '\n' ';')"

# Restart (SIGTERM, as systemctl restart does); job d's rank dies meanwhile.
kill -TERM "$agent_pid"
wait "$agent_pid" || true
kill -KILL "$dpid"
t0=$(date +%s.%N)
start_agent 2
live=$(echo "$before" | grep -v '^rs:d ')
samples=0 d_kept=0 d_gone=
while :; do
	now=$(levels)
	el=$(echo "$(date +%s.%N) $t0" | awk '{printf "%.2f", $1 - $2}')
	got=$(echo "$now" | grep -v '^rs:d ' || true)
	if echo "$now" | grep -q '^rs:d '; then
		[ -z "$d_gone" ] || fail "job d is back after it departed"
		d_kept=$el
	else
		d_gone=${d_gone:-$el}
	fi
	# Until d departs nothing changes; its departure reschedules the
	# others (levels may move then), who stay scheduled, never profiled.
	if [ -z "$d_gone" ]; then
		[ "$got" = "$live" ] ||
			fail "${el} s after the restart the live jobs are [$(echo "$got" | tr '\n' ';')], were [$(echo "$live" | tr '\n' ';')]"
	else
		[ "$(echo "$got" | grep -c ' scheduled$')" = 3 ] ||
			fail "${el} s after the restart (job d gone) the live jobs are [$(echo "$got" | tr '\n' ';')]"
	fi
	samples=$((samples + 1))
	awk -v e="$el" 'BEGIN { exit !(e > 5) }' && break
	sleep 0.1
done
echo "after the restart: $samples samples over 5 s, live jobs unchanged until job d departed; job d kept until ${d_kept} s, gone at ${d_gone:-never}"
[ -n "$d_gone" ] || fail "job d (its rank dead) never departed"
awk -v k="$d_kept" 'BEGIN { exit !(k >= 2.5) }' ||
	fail "job d departed at ${d_gone} s, before the 3 s grace"
grep -q "job rs:d .*did not come back within 3.0 s" "$tmp/agent2.log" ||
	fail "the new agent does not say why job d departed"
grep -E "job rs:[abc] .*departed" "$tmp/agent2.log" && fail "a live job was logged as departed"
echo "restart keeps levels: ok"
