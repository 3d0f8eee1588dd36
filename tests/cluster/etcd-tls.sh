#!/bin/sh
# Integration: the etcd client over TLS with client certificates. A CA, a
# server certificate for 127.0.0.1 and a client certificate are made here
# with openssl; etcd requires client certificates (--client-cert-auth).
# With CRUXD CRUXCTL FAKE_RANK: cruxd in cluster mode over the same TLS
# (--etcd-ca, --etcd-cert, --etcd-key) applies a schedule; without its client
# certificate it is refused and says stale.
# Usage: etcd-tls.sh TLS_TEST [CRUXD CRUXCTL FAKE_RANK]
# ETCD_* variables set here are read by the sourced etcd-lib.sh.
# shellcheck disable=SC2034
set -eu
. "$(dirname "$0")/etcd-lib.sh"
etcd_need
. "$(dirname "$0")/../lib/harness.sh"
for t in curl openssl; do
	command -v $t >/dev/null || cxt_fail "$t is needed (Debian $t)"
done
cxt_workdir crux-etcd-tls
tmp=$CXT_W
cxt_at_exit etcd_stop
cd "$tmp"
q() { "$@" >/dev/null 2>&1; }
q openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=crux-test-ca -keyout ca.key -out ca.pem
# etcd's gateway dials its own gRPC server with this certificate: it must
# also be a client certificate.
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >server.ext
q openssl req -newkey rsa:2048 -nodes -subj /CN=etcd -keyout server.key -out server.csr
q openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
	-extfile server.ext -out server.pem
printf 'extendedKeyUsage=clientAuth\n' >client.ext
q openssl req -newkey rsa:2048 -nodes -subj /CN=cruxd -keyout client.key -out client.csr
q openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
	-extfile client.ext -out client.pem
ETCD_SCHEME=https
ETCD_EXTRA_ARGS="--cert-file $tmp/server.pem --key-file $tmp/server.key --client-cert-auth --trusted-ca-file $tmp/ca.pem"
ETCD_CURL_ARGS="--cacert $tmp/ca.pem --cert $tmp/client.pem --key $tmp/client.key"
etcd_start "$tmp" 1
"$1" "$ETCD_ENDPOINTS" "$tmp/ca.pem" "$tmp/client.pem" "$tmp/client.key"
[ $# -ge 4 ] || exit 0

# ---- cruxd over TLS ----
CRUXD=$2 CTL=$3 FAKE=$4
fail() { CXT_LOG_LINES=20 cxt_fail "$@"; }
mkdir -m 755 "$tmp/shm"
export CRUX_SHM_DIR="$tmp/shm" CRUX_PROBE=0 CRUX_AGENT_INTERVAL=200ms CRUX_PROFILE_WINDOW=1s
"$FAKE" "$tmp/shm" JT 10.78.0.1 10.78.0.2 1000 0.1 0.05 0.05 &
rpid=$!
cxt_kill_at_exit "$rpid"
# cluster_state: "REVISION STALE" from cruxctl --json status
cluster_state() {
	"$CTL" --json status 2>/dev/null | grep -o '"schedule_revision":[0-9]*,"schedule_input_revision":[0-9]*,"stale":[a-z]*' |
		sed 's/"schedule_revision":\([0-9]*\),.*"stale":\([a-z]*\)/\1 \2/'
}
"$CRUXD" --etcd "$ETCD_ENDPOINTS" --cluster tls --host t1 --etcd-ca "$tmp/ca.pem" \
	--etcd-cert "$tmp/client.pem" --etcd-key "$tmp/client.key" --log-level info >"$tmp/cruxd.log" 2>&1 &
apid=$!
cxt_kill_at_exit "$apid"
i=0
until "$CTL" --json status 2>/dev/null | grep -q '"id":"JT","level":[0-9]*,"state":"scheduled"' &&
	[ "$(cluster_state | cut -d' ' -f2)" = false ]; do
	i=$((i + 1))
	[ $i -le 100 ] || fail "cruxd over TLS did not apply a schedule with JT scheduled"
	sleep 0.1
done
echo "cruxd over TLS: schedule revision $(cluster_state | cut -d' ' -f1) applied, JT scheduled"
kill -TERM $apid
wait $apid 2>/dev/null || true
# Without its client certificate etcd refuses it: stale from the start.
"$CRUXD" --etcd "$ETCD_ENDPOINTS" --cluster tls --host t2 --etcd-ca "$tmp/ca.pem" \
	--log-level info >"$tmp/cruxd.log" 2>&1 &
apid=$!
cxt_kill_at_exit "$apid"
i=0
until [ "$(cluster_state | cut -d' ' -f2)" = true ]; do
	i=$((i + 1))
	[ $i -le 100 ] || fail "cruxd without a client certificate does not say stale"
	sleep 0.1
done
grep -q "etcd unreachable" "$tmp/cruxd.log" || fail "no log line names the refused etcd"
echo "cruxd without its client certificate: refused, status stale"
echo "etcd-tls cruxd: ok"
