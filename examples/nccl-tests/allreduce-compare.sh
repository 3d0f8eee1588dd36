#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# allreduce-compare.sh: nccl-tests' all_reduce_perf with and without Crux
# scheduling, same hosts, same sizes, one after the other.
#   plain  NCCL as installed (its own IB/RoCE or socket transport), no Crux
#   crux   NCCL_NET_PLUGIN=crux + NCCL_NET=Crux + LD_PRELOAD=libcrux-preload.so,
#          with cruxd running on every host (started here on this host when
#          --start-agent is given)
#
# Two launch modes:
#   --mpi HOSTFILE    mpirun -np N with the host file (one rank per GPU)
#   --one-gpu         two ranks on this machine's GPU 0 that look like two hosts
#                     (distinct NCCL_HOSTID, NCCL_TESTS_DEVICE=0), so NCCL's
#                     traffic between them goes through the network plugin
# Open MPI (mpirun -x) and MPICH/Hydra (mpiexec -genv) are both recognised.
# nccl-tests must be built with MPI=1 (make MPI=1 MPI_HOME=...).
#
#   allreduce-compare.sh --nccl-tests DIR --crux PREFIX (--one-gpu | --mpi HOSTFILE --np N)
#                        [--arms "plain crux"] [--sizes "8 256M"] [--iters 20]
#                        [--ifname eth0] [--start-agent] [--out DIR]
# PREFIX is the install prefix or a meson build directory. Prints each arm's
# bus bandwidth at the largest size and their ratio. Logs go to --out DIR
# (kept); without --out they go to a temporary directory that is removed at
# exit unless a run failed.
set -euo pipefail

NT=""
PREFIX="${CRUX_PREFIX:-/usr/local}"
MODE=""
HOSTFILE=""
NP=2
ARMS="plain crux"
MIN=8
MAX=256M
ITERS=20
IFNAME="${NCCL_SOCKET_IFNAME:-}"
START_AGENT=0
OUT=""
HERE="$(cd "$(dirname "$0")" && pwd)"

die() { echo "allreduce-compare.sh: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
	case "$1" in
	--nccl-tests) NT="$2"; shift 2 ;;
	--crux) PREFIX="$2"; shift 2 ;;
	--one-gpu) MODE=one; shift ;;
	--mpi) MODE=mpi; HOSTFILE="$2"; shift 2 ;;
	--np) NP="$2"; shift 2 ;;
	--arms) ARMS="$2"; shift 2 ;;
	--sizes) read -r MIN MAX <<<"$2"; shift 2 ;;
	--iters) ITERS="$2"; shift 2 ;;
	--ifname) IFNAME="$2"; shift 2 ;;
	--start-agent) START_AGENT=1; shift ;;
	--out) OUT="$2"; shift 2 ;;
	-h | --help) sed -n '3,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option '$1' (see --help)" ;;
	esac
done
[ -n "$NT" ] || die "--nccl-tests DIR is required (a build of https://github.com/NVIDIA/nccl-tests)"
BIN="$NT/build/all_reduce_perf"
[ -x "$BIN" ] || BIN="$NT/all_reduce_perf"
[ -x "$BIN" ] || die "all_reduce_perf not found in $NT/build or $NT (run 'make MPI=1' in nccl-tests)"
[ -n "$MODE" ] || die "choose --one-gpu or --mpi HOSTFILE"
command -v mpirun >/dev/null 2>&1 || die "mpirun not found in PATH (Open MPI or MPICH)"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 ||
	die "no NVIDIA GPU visible (nvidia-smi -L failed): NCCL needs a GPU"
case "$PREFIX" in /*) ;; *) PREFIX="$(pwd)/$PREFIX" ;; esac

KEEP=1
if [ -z "$OUT" ]; then
	OUT="$(mktemp -d "${TMPDIR:-/tmp}/crux-nccl-tests.XXXXXX")"
	KEEP=0
fi
mkdir -p "$OUT"
AGENT_PID=""
FAILED=0
cleanup() {
	[ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null
	if [ "$KEEP" -eq 0 ] && [ "$FAILED" -eq 0 ]; then rm -rf "$OUT"; fi
	true
}
trap cleanup EXIT

# Open MPI exports a variable with -x VAR=VALUE, Hydra (MPICH, Intel MPI)
# with -genv VAR VALUE; the rank is OMPI_COMM_WORLD_RANK or PMI_RANK.
if mpirun --version 2>&1 | grep -qi "open mpi\|open-rte"; then
	MPI_FLAVOR=openmpi
else
	MPI_FLAVOR=hydra
fi
mpi_env() { # VAR=VALUE -> launcher arguments
	if [ "$MPI_FLAVOR" = openmpi ]; then printf '%s\n' -x "$1"; else printf '%s\n' -genv "${1%%=*}" "${1#*=}"; fi
}

# The crux arm's environment, from crux-env.sh with the caller's
# CRUX_SHM_DIR kept (the agent and the ranks must agree on it) and the
# caller's LD_LIBRARY_PATH kept behind the plugin's directory (MPI's and
# NCCL's libraries are often found through it).
SHM_DIR="${CRUX_SHM_DIR:-/dev/shm/crux}"
crux_vars() {
	env -i PATH="$PATH" CRUX_PREFIX="$PREFIX" CRUX_SHM_DIR="$SHM_DIR" \
		LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" \
		sh -c '. "$0" >&2 && env' "$HERE/../crux-env.sh" |
		grep -E '^(LD_LIBRARY_PATH|LD_PRELOAD|NCCL_NET_PLUGIN|NCCL_NET|CRUX_SHM_DIR)='
}

run_arm() { # prints "SIZE BUSBW" of the last data row on stdout; the rest goes to stderr
	local arm="$1" log="$OUT/$1.log"
	local -a envs=(NCCL_DEBUG=INFO "NCCL_DEBUG_SUBSYS=INIT,NET")
	[ -n "$IFNAME" ] && envs+=("NCCL_SOCKET_IFNAME=$IFNAME")
	if [ "$arm" = crux ]; then
		local vars v
		vars="$(crux_vars)" || { echo "crux-env.sh failed for prefix $PREFIX" >&2; return 1; }
		grep -q '^NCCL_NET_PLUGIN=crux' <<<"$vars" ||
			{ echo "the Crux plugin was not found under $PREFIX" >&2; return 1; }
		while IFS= read -r v; do envs+=("$v"); done <<<"$vars"
		envs+=("CRUX_JOB_ID=${CRUX_JOB_ID:-nccl-tests-$$}")
	fi
	echo "== $arm: $BIN -b $MIN -e $MAX -f 2 -g 1 -n $ITERS" | tee "$log" >&2
	local -a xs=() launch
	local v a
	if [ "$MODE" = one ]; then
		envs+=(NCCL_TESTS_DEVICE=0 CUDA_VISIBLE_DEVICES=0)
	fi
	for v in "${envs[@]}"; do
		while IFS= read -r a; do xs+=("$a"); done < <(mpi_env "$v")
	done
	if [ "$MODE" = one ]; then
		# Two ranks on GPU 0, each its own "host" for NCCL.
		launch=(mpirun -np 2 "${xs[@]}"
			sh -c 'NCCL_HOSTID="crux-host-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}" exec "$0" "$@"')
	else
		launch=(mpirun -np "$NP" --hostfile "$HOSTFILE" "${xs[@]}")
	fi
	if ! "${launch[@]}" "$BIN" -b "$MIN" -e "$MAX" -f 2 -g 1 -n "$ITERS" >>"$log" 2>&1; then
		echo "$arm: all_reduce_perf failed; last lines of $log:" >&2
		tail -5 "$log" >&2
		return 1
	fi
	if [ "$arm" = crux ] && ! grep -q "Using network Crux" "$log"; then
		echo "$arm: NCCL did not report 'Using network Crux' (see $log)" >&2
		return 1
	fi
	if grep -qE '^# +Out of bounds values *: *[1-9]' "$log"; then
		echo "$arm: all_reduce_perf reported wrong values (see $log)" >&2
		return 1
	fi
	# Data rows: size count type redop root time algbw busbw #wrong ...
	awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF >= 9 {size = $1; bw = $8}
	     END {if (size == "") exit 1; print size, bw}' "$log" ||
		{ echo "$arm: no result rows in $log" >&2; return 1; }
}

if [ "$START_AGENT" -eq 1 ]; then
	CRUXD=""
	for c in "$PREFIX/sbin/cruxd" "$PREFIX/bin/cruxd" "$PREFIX/agent/cruxd/cruxd"; do
		[ -x "$c" ] && { CRUXD="$c"; break; }
	done
	[ -n "$CRUXD" ] || die "cruxd not found under $PREFIX (sbin/, bin/ or agent/cruxd/)"
	mkdir -p "$SHM_DIR"
	"$CRUXD" --shm-dir "$SHM_DIR" >"$OUT/cruxd.log" 2>&1 &
	AGENT_PID=$!
	sleep 1
	kill -0 "$AGENT_PID" 2>/dev/null || { FAILED=1; cat "$OUT/cruxd.log" >&2; die "cruxd exited at start"; }
fi

declare -A BW
for arm in $ARMS; do
	if ! res="$(run_arm "$arm")"; then
		FAILED=1
		echo "$arm: FAILED (logs in $OUT)"
		continue
	fi
	read -r size bw <<<"$res"
	BW[$arm]="$bw"
	echo "$arm: bus bandwidth ${bw} GB/s at ${size} bytes"
done
if [ -n "${BW[plain]:-}" ] && [ -n "${BW[crux]:-}" ]; then
	awk -v a="${BW[crux]}" -v b="${BW[plain]}" 'BEGIN { if (b > 0) printf "crux / plain bus bandwidth: %.3fx\n", a / b }'
fi
if [ "$KEEP" -eq 1 ] || [ "$FAILED" -ne 0 ]; then echo "logs: $OUT"; fi
exit "$FAILED"
