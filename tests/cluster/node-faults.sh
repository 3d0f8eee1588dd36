#!/bin/sh
# Integration: cluster nodes under faults on etcd's side (node_faults_it.c),
# against a one-member etcd started here; the test restarts it empty on the
# same endpoint through a script written here.
# Usage: node-faults.sh NODE_FAULTS_TEST
set -eu
. "$(dirname "$0")/etcd-lib.sh"
etcd_need
tmp=$(mktemp -d /tmp/crux-node-faults.XXXXXX)
trap 'etcd_stop; [ -f "$tmp/pid" ] && kill "$(cat "$tmp/pid")" 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
etcd_start "$tmp" 1
c=$ETCD_BASE
p=$((ETCD_BASE + 1))
# Same name, ports and flags, data directory wiped: etcd restored empty.
cat >"$tmp/restart-empty.sh" <<EOS
#!/bin/sh
kill $ETCD_PIDS
while kill -0 $ETCD_PIDS 2>/dev/null; do sleep 0.05; done
rm -rf "$tmp/m1"
"$ETCD_BIN" --name m1 --data-dir "$tmp/m1" \
	--listen-client-urls http://127.0.0.1:$c --advertise-client-urls http://127.0.0.1:$c \
	--listen-peer-urls http://127.0.0.1:$p --initial-advertise-peer-urls http://127.0.0.1:$p \
	--initial-cluster m1=http://127.0.0.1:$p --initial-cluster-token crux-test-$$ \
	--heartbeat-interval 50 --election-timeout 500 >>"$tmp/m1.log" 2>&1 &
echo \$! >"$tmp/pid"
i=0
until curl -fsS -m 1 http://127.0.0.1:$c/health 2>/dev/null | grep -q '"health":"true"'; do
	i=\$((i + 1)); [ \$i -le 50 ] || exit 1; sleep 0.1
done
EOS
chmod 755 "$tmp/restart-empty.sh"
"$1" "$ETCD_ENDPOINTS" $ETCD_PIDS "$tmp/restart-empty.sh"
