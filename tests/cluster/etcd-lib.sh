# shellcheck shell=sh
# Sourced by the cluster tests: start and stop throwaway etcd members on
# loopback. Ports come from the test's PID, below the kernel's ephemeral range
# (32768+, where outgoing connections take their ports), so parallel tests do
# not collide; a port already taken moves the whole block on, and a member
# that loses a race for its port restarts the whole set on other ports.
# etcd_need: exit 77 (skip) only when etcd is missing and we cannot install it.
etcd_need() {
	ETCD_BIN=$(command -v etcd || true)
	if [ -z "$ETCD_BIN" ]; then
		if [ "$(id -u)" -ne 0 ]; then
			echo "SKIP: etcd is not installed (Debian etcd-server) and we are not root"
			exit 77
		fi
		echo "FAIL: etcd is not installed: run make deps (Debian etcd-server)" >&2
		exit 1
	fi
}

port_free() {
	! (ss -Hltn "sport = :$1" 2>/dev/null | grep -q .)
}

# etcd_pick_base N: sets ETCD_BASE so that 2N ports from it are free.
etcd_pick_base() {
	n=$1
	b=$((20000 + ($$ * 7 + ${ETCD_SHIFT:-0}) % 12000))
	tries=0
	while :; do
		ok=1
		i=0
		while [ $i -lt $((2 * n)) ]; do
			port_free $((b + i)) || ok=0
			i=$((i + 1))
		done
		[ $ok -eq 1 ] && break
		b=$((b + 2 * n + 1))
		tries=$((tries + 1))
		[ $tries -gt 50 ] && { echo "FAIL: no free ports for etcd" >&2; exit 1; }
	done
	ETCD_BASE=$b
}

# etcd_start DIR N: N members m1..mN, client port BASE+2i, peer BASE+2i+1.
# TLS: ETCD_SCHEME=https, ETCD_EXTRA_ARGS (etcd's certificate flags) and
# ETCD_CURL_ARGS (the health check's). ETCD_TIMING: raft heartbeat and
# election flags (tests: 50 ms / 500 ms, so failovers are quick).
# Sets ETCD_ENDPOINTS (comma list) and ETCD_PIDS. Up to 3 attempts.
etcd_start() {
	for attempt in 1 2 3; do
		if etcd_start_once "$1" "$2"; then
			return 0
		fi
		grep -qs "address already in use" "$1"/m*.log || break
		echo "etcd: a port was taken meanwhile; again on other ports" >&2
		etcd_stop
		rm -rf "$1"/m*
		ETCD_SHIFT=$(( ${ETCD_SHIFT:-0} + 997 * attempt ))
	done
	echo "FAIL: etcd did not become healthy; logs:" >&2
	tail -n 20 "$1"/m*.log >&2
	return 1
}

etcd_start_once() {
	dir=$1
	n=$2
	etcd_pick_base "$n"
	cluster=""
	i=1
	while [ $i -le "$n" ]; do
		cluster="${cluster:+$cluster,}m$i=http://127.0.0.1:$((ETCD_BASE + 2 * i - 1))"
		i=$((i + 1))
	done
	ETCD_ENDPOINTS=""
	ETCD_PIDS=""
	i=1
	while [ $i -le "$n" ]; do
		c=$((ETCD_BASE + 2 * i - 2))
		p=$((ETCD_BASE + 2 * i - 1))
		mkdir -p "$dir/m$i"
		"$ETCD_BIN" --name "m$i" --data-dir "$dir/m$i" \
			--listen-client-urls "${ETCD_SCHEME:-http}://127.0.0.1:$c" \
			--advertise-client-urls "${ETCD_SCHEME:-http}://127.0.0.1:$c" ${ETCD_EXTRA_ARGS:-} \
			--listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
			--initial-cluster "$cluster" --initial-cluster-token "crux-test-$$" \
			${ETCD_TIMING:---heartbeat-interval 50 --election-timeout 500} \
			>"$dir/m$i.log" 2>&1 &
		ETCD_PIDS="$ETCD_PIDS $!"
		ETCD_ENDPOINTS="${ETCD_ENDPOINTS:+$ETCD_ENDPOINTS,}${ETCD_SCHEME:-http}://127.0.0.1:$c"
		i=$((i + 1))
	done
	# Healthy = every member answers /health with quorum (bounded wait).
	t=0
	while [ $t -lt 100 ]; do
		all=1
		for ep in $(echo "$ETCD_ENDPOINTS" | tr , ' '); do
			# shellcheck disable=SC2086
			curl -fsS -m 1 ${ETCD_CURL_ARGS:-} "$ep/health" 2>/dev/null | grep -q '"health":"true"' || all=0
		done
		[ $all -eq 1 ] && return 0
		# A member that died (its port taken) will not come up: stop waiting.
		for p in $ETCD_PIDS; do
			kill -0 "$p" 2>/dev/null || return 1
		done
		sleep 0.2
		t=$((t + 1))
	done
	return 1
}

etcd_stop() {
	for p in ${ETCD_PIDS:-}; do
		kill -CONT "$p" 2>/dev/null || true
		kill "$p" 2>/dev/null || true
	done
	for p in ${ETCD_PIDS:-}; do
		wait "$p" 2>/dev/null || true
	done
	ETCD_PIDS=""
}
