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
# NCCL calls, but NCCL loads its plugins with dlopen all the same. This runs
# the worker with the Crux net plugin (traffic marked and routed) and the Crux
# profiler plugin (NCCL_PROFILER_PLUGIN=crux; NCCL 2.27 or later), which feeds
# the profile from NCCL's own events; the preload is left out. Every worker
# must use the same --job-id (default: tf- and a hash of the worker list), so
# all derive one job key.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PREFIX="${CRUX_PREFIX:-/usr/local}"
WORKERS=""
INDEX=""
JOB=""
usage() {
	cat <<'EOF'
usage: tf-crux.sh [--crux PREFIX] [--ifname IF] --workers host0:port,host1:port --index I \
                  [--job-id NAME] -- SCRIPT [ARGS...]
Launch one TensorFlow worker under Crux; run it once per worker host with that
worker's index (0 .. workers - 1); TF_CONFIG is built from --workers. e.g.
  tf-crux.sh --workers node0:12345,node1:12345 --index 0 -- examples/tensorflow/mwms_train.py
TensorFlow's wheels link NCCL statically: the preload cannot see their NCCL
calls, so the worker runs with the Crux net plugin (NCCL_NET_PLUGIN=crux,
NCCL_NET=Crux) and the Crux profiler plugin (NCCL_PROFILER_PLUGIN=crux, NCCL
2.25 or later); it refuses to start when the net plugin is missing. Every
worker must use the same --job-id (default: tf- and a hash of the worker list).
EOF
}
while [ $# -gt 0 ]; do
	case "$1" in
	--crux) PREFIX="$2"; shift 2 ;;
	--ifname) export NCCL_SOCKET_IFNAME="$2"; shift 2 ;;
	--workers) WORKERS="$2"; shift 2 ;;
	--index) INDEX="$2"; shift 2 ;;
	--job-id) JOB="$2"; shift 2 ;;
	--) shift; break ;;
	-h | --help) usage; exit 0 ;;
	*) echo "tf-crux.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done
[ -n "$WORKERS" ] && [ -n "$INDEX" ] && [ $# -gt 0 ] ||
	{ echo "tf-crux.sh: --workers, --index and the script are required (see --help)" >&2; exit 2; }
case "$INDEX" in '' | *[!0-9]*) echo "tf-crux.sh: --index '$INDEX' is not a worker index" >&2; exit 2 ;; esac
nworkers=$(printf '%s' "$WORKERS" | tr ',' '\n' | grep -c .)
if [ "$INDEX" -ge "$nworkers" ]; then
	echo "tf-crux.sh: --index $INDEX is beyond the $nworkers worker(s) of --workers (0 .. $((nworkers - 1)))" >&2
	exit 2
fi
list="$(printf '%s' "$WORKERS" | sed 's/[^,][^,]*/"&"/g')"
export TF_CONFIG="{\"cluster\": {\"worker\": [$list]}, \"task\": {\"type\": \"worker\", \"index\": $INDEX}}"
# The default id is short and stable: a hash of the worker list (every worker
# hashes the same list), not the list itself, which outgrows the 59-character
# limit of CRUX_JOB_ID with a few workers.
if [ -z "$JOB" ]; then
	JOB="tf-$(printf '%s' "$WORKERS" | sha256sum | cut -c1-16)"
elif [ ${#JOB} -gt 59 ] || [ "$JOB" != "$(printf '%s' "$JOB" | tr -cd '!-~')" ]; then
	echo "tf-crux.sh: --job-id '$JOB' is not valid: at most 59 printable characters, no spaces" >&2
	exit 2
fi
export CRUX_JOB_ID="$JOB"
# The preload cannot see statically linked NCCL; the profiler plugin can.
export CRUX_NO_PRELOAD=1
# shellcheck disable=SC1091
. "$HERE/../crux-env.sh" "$PREFIX"
if [ -n "$crux_env_missing" ]; then
	echo "tf-crux.sh: $crux_env_missing not found under $PREFIX: the worker would run without" \
		"Crux, so it is not started; fix: install Crux there or give --crux PREFIX (a meson" \
		"build directory works)" >&2
	exit 1
fi
profiler_dir=""
for d in "$PREFIX/lib" "$PREFIX/lib64" "$PREFIX/lib/x86_64-linux-gnu" "$PREFIX/profiler"; do
	[ -e "$d/libnccl-profiler-crux.so" ] && { profiler_dir="$d"; break; }
done
if [ -n "$profiler_dir" ]; then
	export LD_LIBRARY_PATH="$profiler_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	export NCCL_PROFILER_PLUGIN=crux
else
	echo "tf-crux.sh: libnccl-profiler-crux.so not found under $PREFIX: this job is not profiled" >&2
fi
exec python3 "$@"
