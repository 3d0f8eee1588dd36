#!/bin/sh
# cruxd on an emulated 2-spine fabric (network namespaces, root): two jobs on
# h1 send to h2; cruxd (in h1, with a topology naming the spines by their
# addresses) profiles them, schedules them onto the two paths, probes h2 and
# publishes routes whose source ports must really take the spine of the
# chosen path.
# Usage: agent-fabric.sh CRUXD CRUXCTL PROBE_SEND FAKE_RANK
set -eu
AGENT=$1
CTL=$2
# shellcheck disable=SC2034 # read by spine_of in fabric.sh
SEND=$3
RANK=$4
. "$(dirname "$0")/fabric.sh"
cxt_need_root "network namespaces"
cxt_need_cmd ip iproute2
cxt_workdir cxag-fab
tmp=$CXT_W

build 2
cat >"$tmp/topo" <<TOPO
# the agent-fabric test's namespace fabric; spines named by the address they answer probes from
host 198.19.1.2 198.19.2.2
switch leaf1 leaf2 198.19.11.2 198.19.12.2
link 198.19.1.2 leaf1 10
link 198.19.2.2 leaf2 10
link leaf1 198.19.11.2 10
link leaf1 198.19.12.2 10
link 198.19.11.2 leaf2 10
link 198.19.12.2 leaf2 10
TOPO
export CRUX_SHM_DIR="$tmp/shm"
export CRUX_TOPOLOGY="$tmp/topo"
export CRUX_PROFILE_WINDOW=300ms
export CRUX_AGENT_INTERVAL=100ms
export CRUX_HEARTBEAT_TIMEOUT=1s
export CRUX_PROBE_PORTS_PER_PATH=4
export CRUX_PROBE_PORTS=41000-48999
ip netns exec ${P}h1 "$AGENT" 2>"$tmp/agent.log" &
cxt_kill_at_exit $!
i=0
until [ -f "$tmp/shm/decision.tbl" ]; do
	i=$((i + 1)); [ $i -lt 50 ] || fail "agent did not start: $(cat "$tmp/agent.log")"
	sleep 0.1
done
# J1 turns its bytes into much more compute than J2
ip netns exec ${P}h1 "$RANK" "$tmp/shm" env:J1 198.19.1.2 198.19.2.2 1000000 0.1 0.09 0.01 &
cxt_kill_at_exit $!
ip netns exec ${P}h1 "$RANK" "$tmp/shm" env:J2 198.19.1.2 198.19.2.2 100000000 0.1 0.01 0.08 &
cxt_kill_at_exit $!

routes() {
	"$CTL" --json status |
		grep -o '{"key":"0x[0-9a-f]*","peer":"[^"]*","path":[0-9]*,"ports":\[[0-9,]*\]}' || true
}
i=0
while [ "$(routes | wc -l)" -lt 2 ]; do
	i=$((i + 1))
	[ $i -lt 150 ] || { "$CTL" status; cat "$tmp/agent.log"; fail "no routes for both jobs"; }
	sleep 0.1
done
"$CTL" status
routes >"$tmp/routes"
cat "$tmp/routes"
spines=""
paths=""
while read -r r; do
	path=$(echo "$r" | sed 's/.*"path":\([0-9]*\).*/\1/')
	ports=$(echo "$r" | sed 's/.*"ports":\[\([0-9,]*\)\].*/\1/')
	[ -n "$ports" ] || fail "route without ports: $r"
	s=$(spine_of tcp 9 "$ports" 2)
	echo "route path $path ports $ports -> spine $s"
	# the topology names spine s 198.19.(10+s).2: the probed path through it must list these ports
	"$CTL" --json status | grep -o "\"hop\":\"198.19.$((10 + s)).2\",\"ports\":\[[0-9,]*\]" |
		grep -q "$ports" || fail "ports $ports are not the ones probed through spine $s"
	spines="$spines $s"
	paths="$paths $path"
done <"$tmp/routes"
# two jobs, one path each: the scheduler spreads them, the ports follow
set -- $spines
[ "$1" != "$2" ] || fail "both jobs on spine $1 (paths$paths)"
echo "agent-fabric: ok"
