#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The testbed's jobs over the plugin's verbs transport on the software RDMA
# device (tests/softrdma): the short scenario, Crux arm, once.
#   testbed_verbs.sh SOURCE_ROOT BUILD_ROOT   (root; exit 77 otherwise)
#
# Asserts the RDMA path end to end, not magnitudes:
#   - every rank carried its bytes over the verbs transport and every job
#     finished with its sums verified (run.sh fails otherwise);
#   - the agent's decisions reached the queue pairs: the ranks moved their
#     connections onto lanes of new classes (QPs built with the new traffic
#     class), and the fabric's priority classes above the default carried
#     the jobs' bytes (HTB classifies by the DSCP the device puts on the wire).
set -uo pipefail
if [ "$(id -u)" -ne 0 ]; then
	echo "SKIP: needs root (network namespaces, veth, tc)"
	exit 77
fi
OUT="$(mktemp -d /tmp/crux-tb-verbs.XXXXXX)"
trap 'rm -rf "$OUT"' EXIT
bash "$1/bench/testbed/run.sh" --build "$2" --scenario short --reps 1 --arms crux \
	--transport verbs --tag "v$((RANDOM % 1000))" --out "$OUT" 2>&1 | tee "$OUT/run.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "FAIL: the run failed (exit $rc)"; exit 1; }
line="$(cat "$OUT"/run-crux-1/transport.txt 2>/dev/null)"
moves="$(sed -n 's/.*transport, \([0-9]*\) lane moves.*/\1/p' <<<"$line")"
echo "$line"
[ "${moves:-0}" -gt 0 ] || { echo "FAIL: no connection moved to a lane of a new class"; exit 1; }
echo "PASS: the jobs ran over verbs on the software RDMA device; the agent's classes reached the QPs ($moves lane moves)"
