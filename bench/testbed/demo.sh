#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# demo.sh [BUILD [socket|verbs [CHECK [SCENARIO]]]]: the README's demo (make demo).
# Runs a testbed scenario (SCENARIO: mix, the default, or default; make demo
# SCENARIO=default): an emulated leaf-spine fabric in network namespaces, a
# GPT-like job contending with BERT- and ResNet-like jobs, under
# three arms interleaved, 3 repetitions each (about 10 minutes):
#   none   no scheduling (default class, ECMP paths)
#   crux   Crux priorities, ECMP paths
#   paths  Crux priorities + paths: each host's cruxd probes the fabric; the
#          leader chooses paths and the plugins bind the probed ports
# Both Crux arms run the testbed as a cluster: one cruxd per emulated host in
# its namespace with its own CRUX_SHM_DIR, coordinated through an etcd on a
# management network of its own (--decider cluster), + preload + plugin.
# Prints the comparison table with a verdict per goal; writes testbed.json and
# testbed.png into the run's own fresh directory (printed at the end), never
# over the committed bench/results files. With verbs (make demo
# TRANSPORT=verbs) the plugin runs its RDMA transport on the software RDMA
# device (tests/softrdma, a test double).
# The last line is the verdict: each goal met or not, and how far the measured
# figure is from the scheduling model's prediction for the same scenario
# (bench/testbed/predict.py); CHECK=1 (make demo CHECK=1) exits 1 when a goal
# is missed.
set -eu

BUILD="${1:-build}"
TRANSPORT="${2:-socket}"
CHECK="${3:-0}"
SCENARIO="${4:-mix}"
case "$SCENARIO" in
default | mix) ;;
*) echo "make demo: SCENARIO='$SCENARIO': expected default or mix" >&2; exit 2 ;;
esac
case "$CHECK" in
0 | 1) ;;
*) echo "make demo: CHECK='$CHECK': expected 0 or 1" >&2; exit 2 ;;
esac
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
command -v etcd >/dev/null 2>&1 || missing="$missing etcd-server"
command -v python3 >/dev/null 2>&1 || missing="$missing python3"
if [ -n "$missing" ]; then
	# shellcheck disable=SC2086
	sh "$ROOT/tools/install-deps.sh" $missing
fi

case "$BUILD" in
/*) ;;
*) BUILD="$ROOT/$BUILD" ;;
esac
[ -d "$BUILD" ] || { echo "make demo: build directory $BUILD not found (run make build)" >&2; exit 1; }

OUT="$(mktemp -d /tmp/crux-demo.XXXXXX)"
ARMS="none crux paths"
rc=0
if [ "$TRANSPORT" = verbs ]; then
	echo "make demo: Crux testbed, scenario '$SCENARIO', arms $ARMS, plugin over verbs on the software RDMA device (about 11 minutes; Ctrl-C tears everything down)"
	NAME=testbed-verbs
else
	echo "make demo: Crux testbed, scenario '$SCENARIO', arms $ARMS (about 10 minutes; Ctrl-C tears everything down)"
	NAME=testbed
fi
[ "$SCENARIO" = default ] || NAME="$NAME-$SCENARIO"
bash "$HERE/run.sh" --build "$BUILD" --scenario "$SCENARIO" --reps 3 --arms "$ARMS" --decider cluster --out "$OUT" \
	--transport "$TRANSPORT" --json "$OUT/$NAME.json" --plot "$OUT/$NAME.png" || rc=$?
echo "make demo: results in $OUT/$NAME.json and $OUT/$NAME.png, per-run logs in $OUT"
echo "make demo: the committed figures (bench/results/$NAME.json) are such a run, copied there by hand"
[ "$rc" -eq 0 ] || exit $rc
# The model's prediction for the same scenario beside the measured medians, then the verdict line.
chk=""
[ "$CHECK" = 1 ] && chk=--check
python3 "$HERE/predict.py" --build "$BUILD" --scenario "$SCENARIO" --measured "$OUT/$NAME.json" --out "$OUT/$NAME-calibration.json" \
	--verdict $chk || rc=$?
exit $rc
