#!/bin/sh
# Run the profiler-plugin benchmark from a build directory and write
# bench/results/profiler.json: sh bench/profiler/run.sh [BUILD]
set -eu
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
shm=$(mktemp -d)
trap 'rm -rf "$shm"' EXIT
chmod 755 "$shm"
CRUX_TIMING=host CRUX_PROFILE_WINDOW=1s CRUX_SHM_DIR="$shm" CRUX_JOB_ID=bench-profiler \
	"$build/bench/profiler/bench-profiler" "$build/profiler/libnccl-profiler-crux.so" \
	"$root/bench/results/profiler.json"
