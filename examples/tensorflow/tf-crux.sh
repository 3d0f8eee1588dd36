#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tf-crux.sh: launch one TensorFlow worker under Crux. Run it once per worker
# host with that worker's index; TF_CONFIG is built from --workers.
#   tf-crux.sh [--crux PREFIX] [--ifname IF] --workers host0:port,host1:port --index I \
#              [--job-id NAME] -- SCRIPT [ARGS...]
# e.g.
#   tf-crux.sh --workers node0:12345,node1:12345 --index 0 -- examples/tensorflow/mwms_train.py
#
# TensorFlow's pip wheels link NCCL statically: LD_PRELOAD cannot see their
# NCCL calls (the preload notices and says so once), but NCCL still loads the
# Crux net plugin, so the job's traffic is marked and routed. Its profile then
# lacks compute timing: give it a level with 'cruxctl set --job NAME --level N'
# or call crux_iteration_mark() from a training callback. Every worker must
# use the same --job-id (default: the worker list), so all derive one job key.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PREFIX="${CRUX_PREFIX:-/usr/local}"
WORKERS=""
INDEX=""
JOB=""
while [ $# -gt 0 ]; do
	case "$1" in
	--crux) PREFIX="$2"; shift 2 ;;
	--ifname) export NCCL_SOCKET_IFNAME="$2"; shift 2 ;;
	--workers) WORKERS="$2"; shift 2 ;;
	--index) INDEX="$2"; shift 2 ;;
	--job-id) JOB="$2"; shift 2 ;;
	--) shift; break ;;
	-h | --help) sed -n '3,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "tf-crux.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done
[ -n "$WORKERS" ] && [ -n "$INDEX" ] && [ $# -gt 0 ] ||
	{ echo "tf-crux.sh: --workers, --index and the script are required (see --help)" >&2; exit 2; }
case "$INDEX" in '' | *[!0-9]*) echo "tf-crux.sh: --index '$INDEX' is not a worker index" >&2; exit 2 ;; esac
list="$(printf '%s' "$WORKERS" | sed 's/[^,][^,]*/"&"/g')"
export TF_CONFIG="{\"cluster\": {\"worker\": [$list]}, \"task\": {\"type\": \"worker\", \"index\": $INDEX}}"
export CRUX_JOB_ID="${JOB:-tf-$WORKERS}"
# shellcheck disable=SC1091
. "$HERE/../crux-env.sh" "$PREFIX"
exec python3 "$@"
