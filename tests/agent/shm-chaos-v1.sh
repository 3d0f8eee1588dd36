#!/bin/sh
# Contract v1 (no agent, no cruxd.sock) under attack: the decision table
# file written by a tool (cruxn-dtset, as cruxctl set would) and both ranks'
# profile record files are truncated, grown, scribbled on, replaced and
# removed while a job's two plugin processes move a verified two-phase
# transfer between two network namespaces. Nobody maps those files, so
# nobody may die: the transfer completes with every byte verified, and the
# ranks' records come back whole with their final byte counters.
# usage: shm-chaos-v1.sh CONFORMANCE DTSET PLUGIN_DIR
set -u
CONF=$1 DTSET=$2 PLUGDIR=$3
. "$(dirname "$0")/../lib/harness.sh"
cxt_need_root "network namespaces"
P=cxcv$$
A=${P}a B=${P}b
cxt_workdir cxcv
W=$CXT_W
SP="" RP=""
fail() { cxt_fail "$@"; }
S="$W/shm"
mkdir -m 755 "$S"
set -e
cxt_ns "$A"
cxt_ns "$B"
cxt_veth "$A" "${P}x" 198.18.1.1 "$B" "${P}y" 198.18.1.2
# The sender's link at 1 Gbit/s, so that the held phase 1 does not move tens of
# gigabytes through the receiver's checks on a fast machine.
tc -n "$A" qdisc add dev "${P}x" root tbf rate 1gbit burst 256kb latency 100ms ||
	echo "note: no tc/tbf here: phase 1 runs at veth speed"
set +e
export CRUX_SHM_DIR="$S" CRUX_JOB_ID="$P" NCCL_NET_PLUGIN=crux LD_LIBRARY_PATH="$PLUGDIR" \
	CRUX_SOCKET_IFNAME="$P" CRUX_TIMEOUT=30s CRUX_PUBLISH_INTERVAL=20ms CRUX_LOG_LEVEL=info

"$DTSET" "$S" "$P" 2 >/dev/null || fail "cannot write the decision table"
ip netns exec "$B" "$CONF" xfer-recv "$W" >"$W/recv.log" 2>&1 &
RP=$!
cxt_kill_at_exit "$RP"
# Phase 1 holds until the attack is over (phase1.stop), however fast this machine
# is, and publishes its message count in $W/sent: every round must see it grow.
SIZE=262144
ip netns exec "$A" "$CONF" xfer-send "$W" $SIZE 64 400 hold >"$W/send.log" 2>&1 &
SP=$!
cxt_kill_at_exit "$SP"

# Both ranks publish their records (v1 files) before the attack starts.
i=0
# recs: the profile record files in $S, one name a line.
recs() { for f in "$S"/prof-*.rec; do [ -e "$f" ] && basename "$f"; done; }
until [ "$(recs | wc -l)" -ge 2 ] || [ $i -ge 100 ]; do
	sleep 0.1; i=$((i + 1))
done
[ "$(recs | wc -l)" -ge 2 ] || fail "the ranks wrote no profile records"
RECS=$(recs)
[ -e "$S/cruxd.sock" ] && fail "an agent socket exists: this test is about contract v1"

junk() { head -c "$1" /dev/urandom; }
sent() { cat "$W/sent" 2>/dev/null || echo 0; }
round=0 busy=0
while [ $round -lt 6 ]; do
	before=$(sent)
	for f in decision.tbl $RECS; do
		[ -e "$S/$f" ] && truncate -s 0 "$S/$f" 2>/dev/null
		sleep 0.02
		[ -e "$S/$f" ] && truncate -s 4M "$S/$f" 2>/dev/null
		sleep 0.02
		if [ -f "$S/$f" ]; then
			junk 4096 | dd of="$S/$f" conv=notrunc bs=64 seek=1 2>/dev/null
			junk 4096 | dd of="$S/$f" conv=notrunc bs=4096 seek=1 2>/dev/null
		fi
		sleep 0.02
		junk 1000 >"$S/.x" && chmod 644 "$S/.x" && mv -f "$S/.x" "$S/$f"
		sleep 0.02
		rm -f "$S/$f"
		sleep 0.02
	done
	# A good table again: the ranks take it at their next re-read.
	"$DTSET" "$S" "$P" $((round % 4)) >/dev/null || fail "cannot rewrite the decision table"
	sleep 0.1
	round=$((round + 1))
	[ "$(sent)" -gt "$before" ] && busy=$((busy + 1))
	echo "round $round: messages sent $before -> $(sent)"
done
echo "the transfer made progress in $busy of $round rounds"
[ $busy -eq $round ] || fail "the transfer stalled during the attack"
[ ! -e "$W/phase1.done" ] || fail "phase 1 ended before the attack did"
for p in $SP $RP; do kill -0 "$p" 2>/dev/null || fail "a rank died during the attack"; done
touch "$W/phase1.stop"
i=0
while [ ! -e "$W/phase1.done" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$W/phase1.done" ] || fail "phase 1 did not finish"
touch "$W/phase2.go"
wait $SP; SR=$?; SP=""
wait $RP; RR=$?; RP=""
cat "$W/send.log" "$W/recv.log"
[ $SR = 0 ] && [ $RR = 0 ] || fail "transfer failed (send $SR, recv $RR)"
grep -q "bytes verified" "$W/recv.log" || fail "the receiver verified nothing"
# The table written after the attack was in use (level 1 = round 5 % 4).
grep -q "decision table $S/decision.tbl in use" "$W/send.log" ||
	fail "the sender never used the decision table"
# Both records are whole again and hold the final counters: every byte sent
# and received, whatever level it went at.
for f in $RECS; do [ -f "$S/$f" ] || fail "$f was not written again"; done
"$DTSET" prof "$S" >"$W/prof.txt" || fail "a profile record is not valid after the attack"
cat "$W/prof.txt"
# The sender says how many messages it sent in all (phase 1 was held).
NMSG=$(sed -n 's/^xfer-send: \([0-9]*\) messages.*/\1/p' "$W/send.log")
[ -n "$NMSG" ] || fail "the sender did not report its message count"
TOTAL=$((SIZE * NMSG))
awk -v total=$TOTAL '
	$4 == "198.18.1.2" { tx += $8 }
	$4 == "198.18.1.1" { rx += $10 }
	END { printf "counted: tx %.0f rx %.0f of %.0f\n", tx, rx, total; exit (tx >= total && rx >= total) ? 0 : 1 }
' "$W/prof.txt" || fail "the records lack the final byte counters"
echo "PASS: transfer verified, both ranks survived $round rounds on their v1 files and rewrote them"
