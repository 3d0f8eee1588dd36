#!/bin/sh
# run-all.sh [BUILD_DIR]: run every benchmark registered with meson, one at a
# time (they measure wall-clock ratios, so they must not share the CPUs).
# Each writes its result file under bench/results/. Some need root (plugin
# on a veth pair; the testbed is run by `make demo`).
set -eu
build=${1:-build}
exec meson test -C "$build" --benchmark --num-processes 1 --print-errorlogs -v
