#!/bin/sh
# Run the preload benchmark from a build directory and write
# bench/results/preload.json: sh bench/preload/run.sh [BUILD]
set -eu
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
shm=$(mktemp -d)
trap 'rm -rf "$shm"' EXIT
chmod 755 "$shm"
CRUX_TIMING=host CRUX_PROFILE_WINDOW=1s CRUX_SHM_DIR="$shm" \
	LD_PRELOAD="$build/preload/libcrux-preload.so" \
	"$build/bench/preload/bench-preload" "$root/bench/results/preload.json"
