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
. "$(dirname "$0")/../lib/harness.sh"
cxt_need_root "network namespaces, veth, tc"
cxt_workdir crux-tb-verbs
OUT=$CXT_W
bash "$1/bench/testbed/run.sh" --build "$2" --scenario short --reps 1 --arms crux \
	--transport verbs --tag "v$((RANDOM % 1000))" --out "$OUT" 2>&1 | tee "$OUT/run.log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || cxt_fail "the run failed (exit $rc)"
line="$(cat "$OUT"/run-crux-1/transport.txt 2>/dev/null)"
moves="$(sed -n 's/.*transport, \([0-9]*\) lane moves.*/\1/p' <<<"$line")"
echo "$line"
[ "${moves:-0}" -gt 0 ] || cxt_fail "no connection moved to a lane of a new class"
echo "PASS: the jobs ran over verbs on the software RDMA device; the agent's classes reached the QPs ($moves lane moves)"
