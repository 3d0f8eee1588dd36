#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# torchrun-crux.sh: launch a PyTorch job under Crux on this node. Run it on
# every node of the job with the same arguments (as torchrun itself).
#   torchrun-crux.sh [--crux PREFIX] [--ifname IF] -- TORCHRUN_ARGS... SCRIPT [ARGS...]
# e.g.
#   torchrun-crux.sh --crux /usr/local --ifname eth0 -- \
#       --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint node0:29500 \
#       examples/pytorch/ddp_train.py --iters 500
# What it adds: LD_PRELOAD=libcrux-preload.so (profiles from the NCCL calls),
# NCCL_NET_PLUGIN=crux and NCCL_NET=Crux (NCCL's network is the Crux plugin:
# its traffic is marked with the job's priority class and sent on the chosen
# paths). Every rank derives the same job key from torchrun's run id and
# rendezvous endpoint (TORCHELASTIC_RUN_ID, MASTER_ADDR:MASTER_PORT); set
# CRUX_JOB_ID to name the job yourself. cruxd must run on every node.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PREFIX="${CRUX_PREFIX:-/usr/local}"
usage() {
	cat <<'EOF'
usage: torchrun-crux.sh [--crux PREFIX] [--ifname IF] -- TORCHRUN_ARGS... SCRIPT [ARGS...]
Launch a PyTorch job under Crux on this node; run it on every node of the job
with the same arguments (as torchrun itself). e.g.
  torchrun-crux.sh --crux /usr/local --ifname eth0 -- \
      --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint node0:29500 \
      examples/pytorch/ddp_train.py --iters 500
  --crux PREFIX  where Crux is installed, or a meson build directory
                 (default: CRUX_PREFIX or /usr/local)
  --ifname IF    NCCL_SOCKET_IFNAME
Adds LD_PRELOAD=libcrux-preload.so, NCCL_NET_PLUGIN=crux and NCCL_NET=Crux;
refuses to start when those libraries are missing (the job would run without
Crux). Every rank derives one job key from torchrun's run id and rendezvous
endpoint; set CRUX_JOB_ID to name the job yourself. cruxd must run on every node.
EOF
}
while [ $# -gt 0 ]; do
	case "$1" in
	--crux) PREFIX="$2"; shift 2 ;;
	--ifname) export NCCL_SOCKET_IFNAME="$2"; shift 2 ;;
	--) shift; break ;;
	-h | --help) usage; exit 0 ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { echo "torchrun-crux.sh: give torchrun's arguments after --" >&2; exit 2; }
command -v torchrun >/dev/null 2>&1 || { echo "torchrun-crux.sh: torchrun not found (pip install torch)" >&2; exit 1; }
# shellcheck disable=SC1091
. "$HERE/../crux-env.sh" "$PREFIX"
if [ -n "$crux_env_missing" ]; then
	echo "torchrun-crux.sh: $crux_env_missing not found under $PREFIX: the job would run without" \
		"Crux, so it is not started; fix: install Crux there or give --crux PREFIX (a meson" \
		"build directory works)" >&2
	exit 1
fi
# pgrep without the preload crux-env.sh just exported: it is for the training processes only
if ! env -u LD_PRELOAD pgrep -x cruxd >/dev/null 2>&1; then
	echo "torchrun-crux.sh: warning: no cruxd on this node: the plugin runs on its defaults" >&2
fi
exec torchrun "$@"
