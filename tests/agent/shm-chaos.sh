#!/bin/sh
# Contract v2 under attack: while cruxd runs and a job's two plugin processes
# move a verified two-phase transfer between two network namespaces, every
# kind of shared state in CRUX_SHM_DIR is truncated, grown, scribbled on,
# replaced and removed, and the attach socket gets garbage. Nobody may die:
# the transfer completes with every byte verified, cruxd survives, recreates
# its socket and files, and the job's ranks are still attached at the end.
# The sender runs as a real unprivileged user (a system account this test
# creates with useradd and removes at the end) and is profiled by the root agent.
# cruxctl status runs through the attack too (never killed by what it reads)
# and lists the attached ranks with the kernel's uid.
# usage: shm-chaos.sh CRUXD CONFORMANCE PLUGIN_DIR CRUXCTL
set -u
AGENT=$1 CONF=$2 PLUGDIR=$3 CTL=$4
. "$(dirname "$0")/../lib/harness.sh"
cxt_need_root "network namespaces"
P=cxch$$
A=${P}a B=${P}b
cxt_workdir cxch
W=$CXT_W
AP="" SP="" RP=""
# The unprivileged rank's account: ours if it carries this comment (a run that was
# killed left it: reused, then removed); another account of that name is used, never removed.
RU=crux-test RU_TAG="Crux test account (tests/agent/shm-chaos.sh)" RU_OURS=""
cxt_at_exit '[ -z "$RU_OURS" ] || userdel "$RU"'
fail() { cxt_fail "$@"; }
set -e
cxt_ns "$A"
cxt_ns "$B"
cxt_veth "$A" "${P}x" 198.18.1.1 "$B" "${P}y" 198.18.1.2
# The sender's link at 1 Gbit/s, so that the held phase 1 does not move tens of
# gigabytes through the receiver's checks on a fast machine.
tc -n "$A" qdisc add dev "${P}x" root tbf rate 1gbit burst 256kb latency 100ms ||
	echo "note: no tc/tbf here: phase 1 runs at veth speed"
set +e
S="$W/shm"
export CRUX_SHM_DIR="$S" CRUX_JOB_ID="$P" NCCL_NET_PLUGIN=crux LD_LIBRARY_PATH="$PLUGDIR" \
	CRUX_SOCKET_IFNAME="$P" CRUX_TIMEOUT=30s CRUX_AGENT_INTERVAL=100ms CRUX_PROBE=0 \
	CRUX_PUBLISH_INTERVAL=20ms CRUX_LOG_LEVEL=info

"$AGENT" >"$W/agent.log" 2>&1 &
AP=$!
cxt_kill_at_exit "$AP"
i=0
while [ ! -S "$S/cruxd.sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
[ -S "$S/cruxd.sock" ] || fail "cruxd did not open its socket"

ip netns exec "$B" "$CONF" xfer-recv "$W" >"$W/recv.log" 2>&1 &
RP=$!
cxt_kill_at_exit "$RP"
# The sender runs as an unprivileged user (root agent, root receiver): any user attaches.
if ! getent passwd "$RU" >/dev/null; then
	command -v useradd >/dev/null 2>&1 || fail "useradd is missing: cannot create the unprivileged user"
	useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
		--comment "$RU_TAG" "$RU" || fail "useradd $RU failed"
fi
# shellcheck disable=SC2034 # read by the exit action above
[ "$(getent passwd "$RU" | cut -d: -f5)" = "$RU_TAG" ] && RU_OURS=1
RUID=$(id -u "$RU") RGID=$(id -g "$RU")
[ "$RUID" != 0 ] || fail "user $RU is root"
chmod 1777 "$W"
# The unprivileged user may not enter the checkout (root's home is mode 700 on
# Debian): it runs copies of the test program and the plugin from $W.
mkdir -p "$W/bin"
cp "$CONF" "$W/bin/" || fail "cannot copy $CONF to $W/bin"
for f in "$PLUGDIR"/*.so*; do
	[ -f "$f" ] && { cp "$f" "$W/bin/" || fail "cannot copy $f to $W/bin"; }
done
chmod -R a+rX "$W/bin"
UCONF="$W/bin/$(basename "$CONF")"
if command -v setpriv >/dev/null 2>&1; then
	AS="setpriv --reuid=$RUID --regid=$RGID --init-groups"
else
	AS="runuser -u $RU --"
fi
echo "the sender runs as $RU (uid $RUID): $AS"
# Phase 1 holds until the attack is over (phase1.stop), however fast this machine
# is, and publishes its message count in $W/sent: every round must see it grow.
ip netns exec "$A" $AS env LD_LIBRARY_PATH="$W/bin" "$UCONF" xfer-send "$W" 262144 64 400 hold \
	>"$W/send.log" 2>&1 &
SP=$!
cxt_kill_at_exit "$SP"

# Wait until both ranks are attached (the agent names the job).
i=0
until grep -q "job env:$P .*arrived" "$W/agent.log" || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
grep -q "job env:$P .*arrived" "$W/agent.log" || fail "the job never reached cruxd"
i=0
until grep -q "(uid $RUID) attached: job env:$P" "$W/agent.log" || [ $i -ge 100 ]; do
	sleep 0.1; i=$((i + 1))
done
grep -q "(uid $RUID) attached: job env:$P" "$W/agent.log" ||
	fail "the unprivileged rank ($RU, uid $RUID) was not profiled by the root agent"

junk() { head -c "$1" /dev/urandom; }
garbage_to_socket() {
	python3 - "$S/cruxd.sock" <<'PY' 2>/dev/null
import os, socket, sys
for n in (0, 3, 256, 257, 4096):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(sys.argv[1]); s.send(os.urandom(n) if n else b"")
    except OSError:
        pass
    s.close()
PY
}
ctl_ok() {
	for a in "--json status" status; do
		# shellcheck disable=SC2086
		"$CTL" $a >/dev/null 2>&1
		r=$?
		[ $r -lt 128 ] || fail "cruxctl $a died (rc $r)"
	done
}
sent() { cat "$W/sent" 2>/dev/null || echo 0; }
round=0 busy=0
while [ $round -lt 6 ]; do
	before=$(sent)
	COPIES=$(cd "$S" 2>/dev/null && ls attached/prof-*.rec 2>/dev/null)
	for f in decision.tbl agent.status cruxd.sock $COPIES; do
		[ -e "$S/$f" ] && truncate -s 0 "$S/$f" 2>/dev/null
		sleep 0.05
		[ -e "$S/$f" ] && truncate -s 4M "$S/$f" 2>/dev/null
		sleep 0.05
		[ -f "$S/$f" ] && junk 4096 | dd of="$S/$f" conv=notrunc bs=4096 seek=1 2>/dev/null
		sleep 0.05
		junk 1000 >"$S/.x" && mv -f "$S/.x" "$S/$f"
		sleep 0.05
		rm -f "$S/$f"
		ctl_ok
		sleep 0.1
	done
	junk 11456 >"$S/prof-1-1.rec"; chmod 644 "$S/prof-1-1.rec"
	ln -sf /etc/passwd "$S/prof-2-2.rec"
	# cruxd recreates its socket within a second; then it gets garbage.
	i=0
	while [ ! -S "$S/cruxd.sock" ] && [ $i -lt 30 ]; do sleep 0.1; i=$((i + 1)); done
	garbage_to_socket
	round=$((round + 1))
	[ "$(sent)" -gt "$before" ] && busy=$((busy + 1))
	echo "round $round: messages sent $before -> $(sent)"
done
echo "the transfer made progress in $busy of $round rounds"
[ $busy -eq $round ] || fail "the transfer stalled during the attack"
[ ! -e "$W/phase1.done" ] || fail "phase 1 ended before the attack did"
rm -f "$S/prof-1-1.rec" "$S/prof-2-2.rec"
touch "$W/phase1.stop"
i=0
while [ ! -e "$W/phase1.done" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
[ -e "$W/phase1.done" ] || fail "phase 1 did not finish"
# Both ranks still attached: cruxctl lists them, the sender with its user's uid.
i=0
until "$CTL" --json status 2>/dev/null | grep -q "\"uid\":$RUID,\"job_key\":\"0x[0-9a-f]*\",\"job_id\":\"env:$P\"" ||
	[ $i -ge 30 ]; do
	sleep 0.1; i=$((i + 1))
done
"$CTL" --json status >"$W/status.json" 2>&1
grep -q "\"uid\":$RUID,\"job_key\":\"0x[0-9a-f]*\",\"job_id\":\"env:$P\"" "$W/status.json" ||
	fail "cruxctl does not list the unprivileged rank: $(cat "$W/status.json")"
[ "$(grep -o "\"job_id\":\"env:$P\"" "$W/status.json" | wc -l)" -ge 2 ] ||
	fail "cruxctl does not list both ranks: $(cat "$W/status.json")"
touch "$W/phase2.go"
wait $SP; SR=$?; SP=""
wait $RP; RR=$?; RP=""
cat "$W/send.log" "$W/recv.log"
[ $SR = 0 ] && [ $RR = 0 ] || fail "transfer failed (send $SR, recv $RR)"
grep -q "bytes verified" "$W/recv.log" || fail "the receiver verified nothing"
kill -0 "$AP" 2>/dev/null || fail "cruxd died"
# Within two seconds cruxd has its socket and files back.
sleep 2
[ -S "$S/cruxd.sock" ] || fail "cruxd did not recreate its socket"
[ "$(stat -c %s "$S/decision.tbl" 2>/dev/null)" = "$(stat -c %s "$S/decision.tbl" 2>/dev/null)" ] &&
	[ -f "$S/decision.tbl" ] || fail "cruxd did not recreate decision.tbl"
[ -f "$S/agent.status" ] || fail "cruxd did not recreate agent.status"
grep -q "listening on a new socket" "$W/agent.log" || fail "no socket recreation logged"
grep -q "refused pid" "$W/agent.log" || fail "the garbage was not refused"
kill -TERM "$AP"; wait "$AP"; AR=$?; AP=""
[ $AR = 0 ] || fail "cruxd exited with $AR"
echo "PASS: transfer verified, cruxd survived $round rounds and recreated its state"
