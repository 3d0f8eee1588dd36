#!/bin/sh
# Integration: the etcd client over TLS with client certificates. A CA, a
# server certificate for 127.0.0.1 and a client certificate are made here
# with openssl; etcd requires client certificates (--client-cert-auth).
# Usage: etcd-tls.sh TLS_TEST
set -eu
. "$(dirname "$0")/etcd-lib.sh"
etcd_need
for t in curl openssl; do
	command -v $t >/dev/null || { echo "FAIL: $t is needed (Debian $t)" >&2; exit 1; }
done
tmp=$(mktemp -d /tmp/crux-etcd-tls.XXXXXX)
trap 'etcd_stop; rm -rf "$tmp"' EXIT INT TERM
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
