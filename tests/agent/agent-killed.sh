#!/bin/sh
# The agent is killed in the middle of a job's transfer: within the heartbeat
# timeout the plugin falls back to the default class, and the transfer
# completes and verifies. Real plugin (conformance driver's verified two-phase
# transfer) between two network namespaces, cruxd with a 1 s heartbeat
# timeout, the job overridden to level 3 (DSCP 24) through cruxctl.
# usage: agent-killed.sh CRUXD CRUXCTL CONFORMANCE PLUGIN_DIR
set -u
AGENT=$1 CTL=$2 CONF=$3 PLUGDIR=$4
. "$(dirname "$0")/../lib/harness.sh"
cxt_need_root "network namespaces"
cxt_need_cmd tcpdump
P=cxag$$
A=${P}a B=${P}b
cxt_workdir cxag-kill
W=$CXT_W
fail() { CXT_LOG_LINES=200 cxt_fail "$@"; }
set -e
cxt_ns "$A"
cxt_ns "$B"
cxt_veth "$A" "${P}x" 198.18.1.1 "$B" "${P}y" 198.18.1.2
set +e
export CRUX_SHM_DIR="$W/shm" CRUX_JOB_ID="$P" NCCL_NET_PLUGIN=crux LD_LIBRARY_PATH="$PLUGDIR" \
	CRUX_SOCKET_IFNAME="$P" CRUX_TIMEOUT=10s CRUX_HEARTBEAT_TIMEOUT=1s \
	CRUX_AGENT_INTERVAL=100ms CRUX_PROBE=0

"$AGENT" 2>"$W/agent.log" &
AP=$!
cxt_kill_at_exit "$AP"
i=0
until "$CTL" --json status 2>/dev/null | grep -q '"running":true'; do
	i=$((i + 1)); [ $i -lt 50 ] || fail "agent did not start"
	sleep 0.1
done
"$CTL" set --job "$P" --level 3 >"$W/set.log" 2>&1 || fail "cruxctl set"
grep -q "applied by the agent" "$W/set.log" || fail "set did not go through the agent"

ip netns exec "$B" tcpdump -i "${P}y" -n -s 96 -U --immediate-mode -Z root -w "$W/cap.pcap" tcp 2>"$W/tcpdump.cap" &
TD=$!
cxt_kill_at_exit "$TD"
# tcpdump captures once it says "listening on" (a fixed sleep can miss the first packets).
i=0; until grep -q "listening on" "$W/tcpdump.cap" 2>/dev/null || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
ip netns exec "$B" "$CONF" xfer-recv "$W" > "$W/recv.log" 2>&1 &
RP=$!
cxt_kill_at_exit "$RP"
ip netns exec "$A" "$CONF" xfer-send "$W" 1048576 16 16 > "$W/send.log" 2>&1 &
SP=$!
cxt_kill_at_exit "$SP"
i=0
while [ ! -e "$W/phase1.done" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$W/phase1.done" ] || fail "phase 1 did not finish"
kill -KILL "$AP"; wait "$AP" 2>/dev/null; AP=""
sleep 1.5 # past the 1 s heartbeat timeout
"$CTL" --json status | grep -q '"stale":true' || fail "table not stale after the agent died"
touch "$W/phase2.go"
wait $SP; S=$?; SP=""
wait $RP; R=$?; RP=""
sleep 0.5
kill -INT "$TD"; wait "$TD" 2>/dev/null; TD=""
[ $S = 0 ] && [ $R = 0 ] || fail "transfer failed after the agent was killed (send $S, recv $R)"

# data packets: DSCP 24 (tos 0x60) while the agent ran, the default level 0
# (tos 0x0) once its heartbeat went stale
tcpdump -r "$W/cap.pcap" -n -v 'src host 198.18.1.1 and greater 200' 2>/dev/null |
	sed -n 's/.*(tos \(0x[0-9a-f]*\),.* length \([0-9]*\)).*/\1 \2/p' > "$W/tx.txt"
awk '
	$1 == "0x60" { if (seen0) late++; b60 += $2 }
	$1 == "0x0" { seen0 = 1; b0 += $2 }
	$1 != "0x60" && $1 != "0x0" { other++ }
	END {
		printf "bytes at DSCP 24 (agent alive): %d, at DSCP 0 (stale table): %d, other: %d, DSCP 24 after the fallback: %d\n", b60, b0, other, late
		ok = b60 >= 16 * 1048576 && b0 >= 16 * 1048576 && late == 0 && other == 0
		exit ok ? 0 : 1
	}' "$W/tx.txt" || fail "data packets do not show the fallback to the default class"
echo "PASS: agent killed mid-job; plugin fell back to defaults; the transfer completed"
