#!/bin/sh
# Integration: the etcd client against a real one-member etcd started here.
# Usage: etcd-client.sh CLIENT_TEST ELECTION_TEST NODE_TEST
set -eu
. "$(dirname "$0")/etcd-lib.sh"
etcd_need
. "$(dirname "$0")/../lib/harness.sh"
command -v curl >/dev/null || cxt_fail "curl is needed for the health check (Debian package curl)"
cxt_workdir crux-etcd-client
tmp=$CXT_W
cxt_at_exit etcd_stop
etcd_start "$tmp" 1
# A dead endpoint first: the client must move on to the live one.
"$1" "http://127.0.0.1:1,$ETCD_ENDPOINTS"
"$2" "$ETCD_ENDPOINTS"
# The node test freezes and thaws etcd itself (SIGSTOP/SIGCONT).
"$3" "$ETCD_ENDPOINTS" $ETCD_PIDS
