#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# examples/nccl-tests/allreduce-compare.sh against stand-ins: an Open MPI-
# and a Hydra-flavoured mpirun, an all_reduce_perf that checks the
# environment each arm must get and prints nccl-tests' table, and nvidia-smi.
# The real cruxd from the build is started with --start-agent.
#   allreduce_compare.sh SCRIPT BUILD_DIR
set -uo pipefail
SCRIPT="$1"
BUILD="$(cd "$2" && pwd)"
. "$(dirname "$0")/../lib/harness.sh"
cxt_workdir crux-arc-test
W=$CXT_W
mkdir -p "$W/bin" "$W/nt/build" "$W/tmp" "$W/shm"
fails=0
# Counts and goes on: the script reports every failing arm, then exits 1.
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

cat >"$W/bin/nvidia-smi" <<'X'
#!/bin/sh
echo "GPU 0: Stand-in GPU (UUID: GPU-00000000)"
X

# mpirun stand-in: MPI_STANDIN_FLAVOR=openmpi|hydra decides the syntax it accepts.
cat >"$W/bin/mpirun" <<'X'
#!/usr/bin/env bash
set -u
if [ "${1:-}" = --version ]; then
	if [ "$MPI_STANDIN_FLAVOR" = openmpi ]; then echo "mpirun (Open MPI) 4.1.4"; else echo "HYDRA build details:"; fi
	exit 0
fi
np=1; envs=()
while [ $# -gt 0 ]; do
	case "$1" in
	-np) np="$2"; shift 2 ;;
	-x) [ "$MPI_STANDIN_FLAVOR" = openmpi ] || { echo "hydra: unrecognized argument -x" >&2; exit 2; }
	    envs+=("$2"); shift 2 ;;
	-genv) [ "$MPI_STANDIN_FLAVOR" = hydra ] || { echo "open mpi: unknown option -genv" >&2; exit 2; }
	    envs+=("$2=$3"); shift 3 ;;
	--hostfile | -hostfile) shift 2 ;;
	-*) echo "mpirun stand-in: unexpected option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
pids=()
for r in $(seq 0 $((np - 1))); do
	if [ "$MPI_STANDIN_FLAVOR" = openmpi ]; then rv=OMPI_COMM_WORLD_RANK; else rv=PMI_RANK; fi
	env "${envs[@]}" "$rv=$r" "$@" > "$MPI_STANDIN_DIR/rank$r.out" 2>&1 &
	pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
cat "$MPI_STANDIN_DIR"/rank*.out
exit $rc
X

# all_reduce_perf stand-in: checks its environment, prints nccl-tests' table
# (rank 0 only) with a bus bandwidth that tells the arms apart.
cat >"$W/nt/build/all_reduce_perf" <<'X'
#!/bin/sh
rank="${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-?}}"
bad() { echo "stand-in rank $rank: $*"; exit 3; }
[ "${NCCL_TESTS_DEVICE:-}" = 0 ] || bad "NCCL_TESTS_DEVICE is '${NCCL_TESTS_DEVICE:-}', not 0"
# The caller's library path (where MPI and NCCL live) must reach every arm.
case ":${LD_LIBRARY_PATH:-}:" in *":$EXPECT_LIB_DIR:"*) ;; *) bad "LD_LIBRARY_PATH '${LD_LIBRARY_PATH:-}' lost $EXPECT_LIB_DIR" ;; esac
[ "${NCCL_HOSTID:-}" = "crux-host-$rank" ] || bad "NCCL_HOSTID is '${NCCL_HOSTID:-}'"
if [ "${NCCL_NET:-}" = Crux ]; then
	[ "${NCCL_NET_PLUGIN:-}" = crux ] || bad "NCCL_NET_PLUGIN is '${NCCL_NET_PLUGIN:-}'"
	case "${LD_PRELOAD:-}" in */libcrux-preload.so*) ;; *) bad "LD_PRELOAD is '${LD_PRELOAD:-}'" ;; esac
	[ -e "${LD_PRELOAD%% *}" ] || bad "LD_PRELOAD names a missing file"
	[ "${CRUX_SHM_DIR:-}" = "$EXPECT_SHM_DIR" ] || bad "CRUX_SHM_DIR is '${CRUX_SHM_DIR:-}'"
	net=Crux; bw=9.50
else
	[ -z "${LD_PRELOAD:-}" ] || bad "plain arm has LD_PRELOAD"
	net=Socket; bw=10.00
fi
echo "vm:$$:$$ [0] NCCL INFO Using network $net"
[ "$rank" = 0 ] || exit 0
wrong=0; [ -n "${STANDIN_WRONG:-}" ] && [ "$net" = Crux ] && wrong=5
echo "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
echo "     1048576        262144     float     sum      -1   1000.0    1.05    1.05      0   1000.0    1.05    1.05      0"
echo "   268435456      67108864     float     sum      -1  50000.0    5.37    $bw      $wrong  50000.0    5.37    $bw      0"
echo "# Out of bounds values : $wrong OK"
echo "# Avg bus bandwidth    : 3.0"
X
chmod +x "$W/bin/"* "$W/nt/build/all_reduce_perf"

run() { # flavor, extra env...
	local flavor="$1"; shift
	mkdir -p "$W/ranks-$flavor"
	env PATH="$W/bin:$PATH" TMPDIR="$W/tmp" MPI_STANDIN_FLAVOR="$flavor" MPI_STANDIN_DIR="$W/ranks-$flavor" \
		CRUX_SHM_DIR="$W/shm" EXPECT_SHM_DIR="$W/shm" \
		LD_LIBRARY_PATH="$W/mpi-lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" EXPECT_LIB_DIR="$W/mpi-lib" "$@" \
		bash "$SCRIPT" --nccl-tests "$W/nt" --crux "$BUILD" --one-gpu --start-agent --ifname lo \
		--sizes "1M 256M" --iters 2
}

for flavor in openmpi hydra; do
	out="$(run "$flavor" 2>"$W/err-$flavor")"; rc=$?
	echo "--- $flavor (rc $rc)"; echo "$out"
	[ $rc -eq 0 ] || { fail "$flavor: exit $rc"; cat "$W/err-$flavor"; cat "$W/ranks-$flavor"/* 2>/dev/null; }
	grep -qx "plain: bus bandwidth 10.00 GB/s at 268435456 bytes" <<<"$out" || fail "$flavor: plain line"
	grep -qx "crux: bus bandwidth 9.50 GB/s at 268435456 bytes" <<<"$out" || fail "$flavor: crux line"
	grep -qx "crux / plain bus bandwidth: 0.950x" <<<"$out" || fail "$flavor: ratio line"
	[ -z "$(ls -A "$W/tmp")" ] || fail "$flavor: left a temporary directory behind: $(ls "$W/tmp")"
done

# Wrong values in the crux arm: the script fails, says so, and keeps the logs.
out="$(run openmpi STANDIN_WRONG=1 2>&1)"; rc=$?
[ $rc -ne 0 ] || fail "wrong values: exit 0"
grep -q "crux: FAILED" <<<"$out" || fail "wrong values: no FAILED line"
grep -q "reported wrong values" <<<"$out" || fail "wrong values: no reason given"
grep -q "^logs: " <<<"$out" || fail "wrong values: logs not kept"

# A prefix without the plugin: the crux arm fails with a clear reason.
out="$(env PATH="$W/bin:$PATH" TMPDIR="$W/tmp" MPI_STANDIN_FLAVOR=openmpi MPI_STANDIN_DIR="$W/ranks-openmpi" \
	bash "$SCRIPT" --nccl-tests "$W/nt" --crux "$W/nowhere" --one-gpu --arms crux 2>&1)"; rc=$?
[ $rc -ne 0 ] || fail "missing plugin: exit 0"
grep -q "plugin was not found under $W/nowhere" <<<"$out" || fail "missing plugin: reason not given: $out"

[ $fails -eq 0 ] && echo "allreduce-compare.sh: all checks passed"
exit $((fails > 0))
