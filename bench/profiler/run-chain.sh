#!/bin/sh
# Run the chaining benchmark (CRUX_PROFILER_NEXT) from a build directory and
# write bench/results/profiler-chain.json: sh bench/profiler/run-chain.sh [BUILD [RUNS]]
# Three processes (bench_chain.c): the Crux core off with the fixture chained
# (forwarding of a passive Crux), Crux alone vs a do-nothing plugin (its own
# profiling cost), Crux profiling with the fixture chained. The forwarding
# cost with the core on is the third's added cost less the second's
# (goal <= 20 ns per call over the chained plugin alone).
set -eu
build=${1:-build}
runs=${2:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$build/bench/profiler/bench-profiler-chain"
crux="$build/profiler/libnccl-profiler-crux.so"
fixture=$(cd "$build/bench/profiler" && pwd)/libnccl-profiler-benchfixture.so
shm=$(mktemp -d)
trap 'rm -rf "$shm"' EXIT
chmod 755 "$shm"
export CRUX_TIMING=host CRUX_PROFILE_WINDOW=1s CRUX_SHM_DIR="$shm" CRUX_JOB_ID=bench-chain
CRUX_PROFILER_NEXT="$fixture" CRUX_PRELOAD=off "$bin" "$crux" "$fixture" "$runs" "$shm/passive.json"
CRUX_PROFILER_NEXT="" "$bin" "$crux" "$fixture" "$runs" "$shm/alone.json"
CRUX_PROFILER_NEXT="$fixture" "$bin" "$crux" "$fixture" "$runs" "$shm/full.json"
field() { tr -d '\n' < "$1" | sed -n "s/.*\"$2\": \([-0-9.]*\).*/\1/p"; }
fwd=$(awk -v a="$(field "$shm/full.json" added_ns_per_call)" \
	-v b="$(field "$shm/alone.json" added_ns_per_call)" 'BEGIN { printf "%.1f", a - b }')
lo=$(awk -v a="$(field "$shm/full.json" added_min_ns)" \
	-v b="$(field "$shm/alone.json" added_max_ns)" 'BEGIN { printf "%.1f", a - b }')
hi=$(awk -v a="$(field "$shm/full.json" added_max_ns)" \
	-v b="$(field "$shm/alone.json" added_min_ns)" 'BEGIN { printf "%.1f", a - b }')
passive=$(field "$shm/passive.json" added_ns_per_call)
met=$(awk -v f="$fwd" -v p="$passive" 'BEGIN { print (f <= 20 && p <= 20) ? "true" : "false" }')
echo "forwarding with the Crux core on: $fwd ns per call (bounds $lo..$hi); passive Crux: $passive ns (goal <= 20 ns): goal met: $met"
{
	printf '{\n  "benchmark": "profiler-chain",\n'
	printf '  "what": "NCCL'"'"'s six v5 calls per collective (GroupApi, CollApi, states) per call; batches alternating with the baseline in one process; median of %s runs with range",\n' "$runs"
	printf '  "forwarding_core_on_ns_per_call": %s,\n  "forwarding_core_on_bounds_ns": [%s, %s],\n' "$fwd" "$lo" "$hi"
	printf '  "forwarding_passive_ns_per_call": %s,\n  "goal_added_ns": 20,\n  "goal_met": %s,\n' "$passive" "$met"
	printf '  "passive": '; cat "$shm/passive.json"; printf ',\n'
	printf '  "crux_alone": '; cat "$shm/alone.json"; printf ',\n'
	printf '  "chained": '; cat "$shm/full.json"; printf '\n}\n'
} > "$root/bench/results/profiler-chain.json"
echo "wrote $root/bench/results/profiler-chain.json"
