#!/bin/sh
# Integration: cluster nodes under faults on etcd's side (node_faults_it.c),
# against a one-member etcd started here; the test restarts it empty on the
# same endpoint through a script written here.
# Host h3 reaches etcd through a TCP proxy (tcp_proxy.c) that can drop or
# blackhole its connections.
# Usage: node-faults.sh NODE_FAULTS_TEST TCP_PROXY
set -eu
. "$(dirname "$0")/etcd-lib.sh"
etcd_need
. "$(dirname "$0")/../lib/harness.sh"
cxt_workdir crux-node-faults
tmp=$CXT_W
cxt_at_exit etcd_stop
# the etcd that restart-empty.sh started (not this shell's child)
cxt_at_exit '[ ! -f "$tmp/pid" ] || kill "$(cat "$tmp/pid")"'
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
pp=$((ETCD_BASE + 2))
while ! port_free "$pp"; do pp=$((pp + 1)); done
"$2" "$pp" "$c" >"$tmp/proxy.out" 2>&1 &
PROXY_PID=$!
cxt_kill_at_exit "$PROXY_PID"
i=0
until grep -q ready "$tmp/proxy.out"; do
	i=$((i + 1)); [ $i -le 50 ] || { echo "FAIL: tcp-proxy did not start: $(cat "$tmp/proxy.out")" >&2; exit 1; }
	sleep 0.1
done
"$1" "$ETCD_ENDPOINTS" $ETCD_PIDS "$tmp/restart-empty.sh" "http://127.0.0.1:$pp" "$PROXY_PID" ||
	{ rc=$?; echo "tcp-proxy said:" >&2; cat "$tmp/proxy.out" >&2; ss -tnp 2>/dev/null | grep -c "127.0.0.1:$pp" >&2; exit $rc; }
