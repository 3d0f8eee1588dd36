#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# demo.sh [BUILD [socket|verbs]]: the README's demo (make demo). Runs the
# default testbed scenario: an emulated leaf-spine fabric in network
# namespaces, a GPT-like job contending with BERT- and ResNet-like jobs, no
# scheduling vs Crux (cruxd + preload + plugin), 3 repetitions each (about 4
# minutes). Prints the comparison table; writes bench/results/testbed.json and
# testbed.png. With verbs (make demo TRANSPORT=verbs) the plugin runs its RDMA
# transport on the software RDMA device (tests/softrdma, a test double) and the
# results go to the run's own fresh directory, never over committed files.
set -eu

BUILD="${1:-build}"
TRANSPORT="${2:-socket}"
case "$TRANSPORT" in
socket | verbs) ;;
*) echo "make demo: TRANSPORT='$TRANSPORT': expected socket or verbs" >&2; exit 1 ;;
esac
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

if [ "$(id -u)" -ne 0 ]; then
	cat >&2 <<MSG
make demo: needs root. The testbed creates network namespaces and veth links,
shapes them with tc (HTB) and sets per-namespace sysctls and host names
(CAP_NET_ADMIN and CAP_SYS_ADMIN), and it installs missing Debian packages
(iproute2, util-linux, gnuplot-nox). Run it as root:  sudo make demo
MSG
	exit 1
fi

missing=""
command -v ip >/dev/null 2>&1 || missing="$missing iproute2"
command -v tc >/dev/null 2>&1 || missing="$missing iproute2"
command -v unshare >/dev/null 2>&1 || missing="$missing util-linux"
command -v bash >/dev/null 2>&1 || missing="$missing bash"
command -v gnuplot >/dev/null 2>&1 || missing="$missing gnuplot-nox"
if [ -n "$missing" ]; then
	# shellcheck disable=SC2086
	sh "$ROOT/tools/install-deps.sh" $missing
fi

case "$BUILD" in
/*) ;;
*) BUILD="$ROOT/$BUILD" ;;
esac
[ -d "$BUILD" ] || { echo "make demo: build directory $BUILD not found (run make build)" >&2; exit 1; }

mkdir -p "$ROOT/bench/results"
OUT="$(mktemp -d /tmp/crux-demo.XXXXXX)"
rc=0
if [ "$TRANSPORT" = verbs ]; then
	echo "make demo: Crux testbed, default scenario, plugin over verbs on the software RDMA device (about 5 minutes; Ctrl-C tears everything down)"
	bash "$HERE/run.sh" --build "$BUILD" --scenario default --reps 3 --out "$OUT" \
		--transport verbs --json "$OUT/testbed-verbs.json" --plot "$OUT/testbed-verbs.png" || rc=$?
else
	echo "make demo: Crux testbed, default scenario (about 4 minutes; Ctrl-C tears everything down)"
	bash "$HERE/run.sh" --build "$BUILD" --scenario default --reps 3 --out "$OUT" \
		--json "$ROOT/bench/results/testbed.json" --plot "$ROOT/bench/results/testbed.png" || rc=$?
fi
echo "per-run logs: $OUT"
exit $rc
