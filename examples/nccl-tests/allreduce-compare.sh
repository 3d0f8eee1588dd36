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
#   --mpi "HOSTFILE"  mpirun -np N --hostfile HOSTFILE (one rank per GPU)
#   --one-gpu         two ranks (mpirun -np 2 on localhost) on this machine's
#                     GPU 0 that look like two hosts (distinct NCCL_HOSTID), so
#                     NCCL's traffic between them goes through the network plugin
# nccl-tests must be built with MPI=1 (make MPI=1 MPI_HOME=...).
#
#   allreduce-compare.sh --nccl-tests DIR --crux PREFIX (--one-gpu | --mpi HOSTFILE --np N)
#                        [--arms "plain crux"] [--sizes "8 256M"] [--iters 20]
#                        [--ifname eth0] [--start-agent] [--out DIR]
# Prints each arm's bus bandwidth at the largest size and their ratio.
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
OUT="$(mktemp -d /tmp/crux-nccl-tests.XXXXXX)"
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
	-h | --help) sed -n '3,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option '$1' (see --help)" ;;
	esac
done
[ -n "$NT" ] || die "--nccl-tests DIR is required (a build of https://github.com/NVIDIA/nccl-tests)"
BIN="$NT/build/all_reduce_perf"
[ -x "$BIN" ] || BIN="$NT/all_reduce_perf"
[ -x "$BIN" ] || die "all_reduce_perf not found in $NT/build or $NT (run 'make' in nccl-tests)"
[ -n "$MODE" ] || die "choose --one-gpu or --mpi HOSTFILE"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 ||
	die "no NVIDIA GPU visible (nvidia-smi -L failed): NCCL needs a GPU"
mkdir -p "$OUT"

AGENT_PID=""
trap '[ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null; true' EXIT

run_arm() {
	local arm="$1" log="$OUT/$1.log"
	local -a envs=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)
	[ -n "$IFNAME" ] && envs+=("NCCL_SOCKET_IFNAME=$IFNAME")
	if [ "$arm" = crux ]; then
		# shellcheck disable=SC1091
		local vars
		vars="$(env -i PATH="$PATH" sh -c ". '$HERE/../crux-env.sh' '$PREFIX' && env" | grep -E '^(LD_LIBRARY_PATH|LD_PRELOAD|NCCL_NET_PLUGIN|NCCL_NET|CRUX_SHM_DIR)=')"
		while IFS= read -r v; do envs+=("$v"); done <<<"$vars"
		envs+=("CRUX_JOB_ID=nccl-tests-$$")
	fi
	echo "== $arm: $BIN -b $MIN -e $MAX -f 2 -g 1 -n $ITERS" | tee "$log"
	local -a xs=() launch
	local v
	for v in "${envs[@]}"; do xs+=(-x "$v"); done
	if [ "$MODE" = one ]; then
		# Two ranks on GPU 0, each its own "host" for NCCL (nccl-tests built with MPI=1).
		launch=(mpirun -np 2 --host localhost:2 -x CUDA_VISIBLE_DEVICES=0 "${xs[@]}"
			sh -c 'NCCL_HOSTID="crux-host-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}" exec "$0" "$@"')
	else
		launch=(mpirun -np "$NP" --hostfile "$HOSTFILE" "${xs[@]}")
	fi
	"${launch[@]}" "$BIN" -b "$MIN" -e "$MAX" -f 2 -g 1 -n "$ITERS" >>"$log" 2>&1
	if [ "$arm" = crux ]; then
		grep -q "Using network Crux" "$log"* || echo "warning: NCCL did not report 'Using network Crux'" >&2
	fi
	# Last data row: size count type redop root time algbw busbw ...
	awk '$1 ~ /^[0-9]+$/ && NF >= 8 {last = $0} END {split(last, f); print f[1], f[8]}' "$log"
}

if [ "$START_AGENT" -eq 1 ]; then
	CRUXD="$PREFIX/bin/cruxd"
	[ -x "$CRUXD" ] || CRUXD="$PREFIX/agent/cruxd/cruxd"
	[ -x "$CRUXD" ] || die "cruxd not found under $PREFIX"
	"$CRUXD" >"$OUT/cruxd.log" 2>&1 &
	AGENT_PID=$!
fi

declare -A BW
for arm in $ARMS; do
	read -r size bw < <(run_arm "$arm")
	BW[$arm]="$bw"
	echo "$arm: bus bandwidth ${bw} GB/s at ${size} bytes"
done
if [ -n "${BW[plain]:-}" ] && [ -n "${BW[crux]:-}" ]; then
	awk -v a="${BW[crux]}" -v b="${BW[plain]}" 'BEGIN { if (b > 0) printf "crux / plain bus bandwidth: %.3fx\n", a / b }'
fi
echo "logs: $OUT"
