#!/bin/sh
# Integration: the etcd client against a real one-member etcd started here.
# Usage: etcd-client.sh CLIENT_TEST ELECTION_TEST NODE_TEST
set -eu
. "$(dirname "$0")/etcd-lib.sh"
etcd_need
command -v curl >/dev/null || { echo "FAIL: curl is needed for the health check" >&2; exit 1; }
tmp=$(mktemp -d /tmp/crux-etcd-client.XXXXXX)
trap 'etcd_stop; rm -rf "$tmp"' EXIT INT TERM
etcd_start "$tmp" 1
# A dead endpoint first: the client must move on to the live one.
"$1" "http://127.0.0.1:1,$ETCD_ENDPOINTS"
"$2" "$ETCD_ENDPOINTS"
# The node test freezes and thaws etcd itself (SIGSTOP/SIGCONT).
"$3" "$ETCD_ENDPOINTS" $ETCD_PIDS
