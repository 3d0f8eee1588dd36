#!/bin/sh
# bench/cluster/run.sh [BUILD_DIR]: start a 3-member etcd on loopback, run
# cluster-bench at N = 100 and N = 1000 (Lingjun topology), write
# bench/results/cluster.json. Bounded: each N has its own time limit.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
bin=$build/bench/cluster/cluster-bench
. "$root/tests/cluster/etcd-lib.sh"
etcd_need
[ -x "$bin" ] || { echo "build first: meson compile -C $build" >&2; exit 1; }
ulimit -n 65536 2>/dev/null || true
tmp=$(mktemp -d /tmp/crux-cluster-bench.XXXXXX)
trap 'etcd_stop; rm -rf "$tmp"' EXIT INT TERM
parts=""
for spec in "100 10 30" "1000 30 60"; do
	set -- $spec
	etcd_stop
	rm -rf "$tmp"/m*
	etcd_start "$tmp" 3
	timeout 900 "$bin" "$ETCD_ENDPOINTS" "$1" "$2" "$3" "$root/bench/data/lingjun-topo.csv" \
		"$tmp/n$1.json"
	parts="${parts:+$parts,}$(cat "$tmp/n$1.json")"
done
out=$root/bench/results/cluster.json
printf '{"bench": "cluster", "machine_cores": %s, "runs": [%s]}\n' "$(nproc)" "$parts" >"$out"
echo "wrote $out"
