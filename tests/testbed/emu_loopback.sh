#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The job emulator over the loopback interface (no root): ring all-reduce
# results verified by the trainer for several rank counts, sizes that do not
# divide evenly and many pipelined chunks; NCCL_NET_PLUGIN resolution as
# NCCL does it; a peer killed mid-run makes the others fail, not hang.
#   emu_loopback.sh BUILD_ROOT
set -uo pipefail
B="$1"
TRAINER="$B/bench/testbed/crux-tb-trainer"
PLUGIN_DIR="$B/plugin"
[ -e "$PLUGIN_DIR/libnccl-net-crux.so" ] || { echo "SKIP: plugin not built"; exit 77; }
. "$(dirname "$0")/../lib/harness.sh"
cxt_workdir crux-tb-emu
T=$CXT_W
mkdir -m 0755 "$T/shm"
# The ranks' stderr (*.err) says why one failed; their *.log end with the last
# iterations they marked.
fail() {
	for f in "$T"/*.err; do [ -s "$f" ] && { echo "== $f"; tail -n 5 "$f"; }; done
	CXT_LOG_LINES=5 cxt_fail "$@"
}
# kill_rank_at_exit PID: PID is a rank's 'timeout' wrapper; its trainer goes first.
kill_rank_at_exit() {
	cxt_kill_at_exit "$1"
	cxt_at_exit "pkill -KILL -P $1"
}

# run_job NAME NRANKS EXTRA_TRAINER_ARGS...: start all ranks, wait, return worst rc
run_job() {
	local name="$1" n="$2" r rc=0 pids=()
	shift 2
	for ((r = 0; r < n; r++)); do
		CRUX_SHM_DIR="$T/shm" LD_LIBRARY_PATH="$PLUGIN_DIR" NCCL_NET_PLUGIN="${PLUGIN_SPEC:-crux}" \
			NCCL_SOCKET_IFNAME=lo CRUX_SOCKET_IFNAME=lo CRUX_JOB_ID="$name" \
			CRUX_TB_CHUNK_BYTES="${CHUNK:-131072}" CRUX_TB_WINDOW="${WINDOW:-4}" \
			timeout 60 "$TRAINER" --job "$name" --model tiny --rank "$r" --nranks "$n" \
			--id-file "$T/$name.id" --log "$T/$name-r$r.log" "$@" 2>"$T/$name-r$r.err" &
		pids+=($!)
		kill_rank_at_exit $!
	done
	for p in "${pids[@]}"; do
		wait "$p" || rc=$?
	done
	return $rc
}

# Odd rank counts, a gradient that does not split evenly, small chunks (many in flight).
CHUNK=4096 WINDOW=3 run_job odd3 3 --iters 4 --grad-mb 0.0371 --buckets 3 || fail "3 ranks, 4 KiB chunks"
grep -q '^# done iters=4' "$T/odd3-r2.log" || fail "3 ranks: rank 2 did not finish"
CHUNK=65536 WINDOW=16 run_job five 5 --iters 3 --grad-mb 0.5 --buckets 2 || fail "5 ranks, window 16"
run_job solo 1 --iters 2 || fail "1 rank"
run_job two 2 --iters 3 --grad-mb 0.001 --buckets 1 || fail "2 ranks, 1 KiB gradient"

# NCCL_NET_PLUGIN: an absolute path works; an unknown name fails with a message naming it.
PLUGIN_SPEC="$PLUGIN_DIR/libnccl-net-crux.so" run_job abs 2 --iters 2 || fail "absolute plugin path"
if PLUGIN_SPEC=nosuchplugin run_job bad 2 --iters 1; then
	fail "an unknown plugin name was accepted"
fi
grep -q "libnccl-net-nosuchplugin.so" "$T/bad-r0.err" || fail "the error does not name libnccl-net-nosuchplugin.so"

# A dead peer: the survivors must report an error, not hang (timeout 60 kills a hang).
pids=()
for r in 0 1 2; do
	CRUX_SHM_DIR="$T/shm" LD_LIBRARY_PATH="$PLUGIN_DIR" NCCL_NET_PLUGIN=crux NCCL_SOCKET_IFNAME=lo \
		CRUX_SOCKET_IFNAME=lo CRUX_JOB_ID=dead timeout 60 "$TRAINER" --job dead --model tiny \
		--rank "$r" --nranks 3 --iters 100000 --id-file "$T/dead.id" \
		--log "$T/dead-r$r.log" 2>"$T/dead-r$r.err" &
	pids+=($!)
	kill_rank_at_exit $!
done
for _ in $(seq 1 100); do
	[ -f "$T/dead-r1.log" ] && [ "$(grep -c '^[0-9]' "$T/dead-r1.log")" -ge 3 ] && break
	sleep 0.1
done
# pids[] are the 'timeout' wrappers: kill the trainer under rank 1's.
victim="$(pgrep -P "${pids[1]}")"
[ -n "$victim" ] || fail "rank 1 is not running"
kill -9 $victim
for i in 0 2; do
	rc=0
	wait "${pids[$i]}" || rc=$?
	[ "$rc" -ne 0 ] || fail "rank $i finished normally after its peer was killed"
	[ "$rc" -ne 124 ] || fail "rank $i hung after its peer was killed"
done
echo "PASS"
