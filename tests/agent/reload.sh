#!/bin/sh
# cruxd --config: the file's CRUX_ settings apply at start, SIGHUP (what
# `systemctl reload cruxd` sends) re-reads it, a broken file is refused on
# reload and the running configuration stays, options beat the file.
# Usage: reload.sh CRUXD CRUXCTL
set -eu
AGENT=$1
CTL=$2
. "$(dirname "$0")/../lib/harness.sh"
cxt_workdir cxreload
tmp=$CXT_W
fail() { cxt_fail "$@"; }
export CRUX_SHM_DIR="$tmp/shm" CRUX_PROBE=0 CRUX_LEVELS=2 CRUX_LOG_LEVEL=info
unset CRUX_METRICS || true
levels() { "$CTL" --json status 2>/dev/null | sed -n 's/.*"nlevels":\([0-9]*\).*/\1/p'; }
wait_levels() {
	i=0
	while [ "$(levels)" != "$1" ]; do
		i=$((i + 1)); [ $i -lt 50 ] || fail "levels $(levels), expected $1"
		sleep 0.1
	done
}
wait_log() {
	i=0
	until grep -q "$1" "$tmp/cruxd.log"; do
		i=$((i + 1)); [ $i -lt 50 ] || fail "no '$1' in the log"
		sleep 0.1
	done
}

# A broken file at start: exit 2, the line named.
printf 'CRUX_LEVELS=3\nLEVELS=4\n' >"$tmp/bad.conf"
rc=0; "$AGENT" --config "$tmp/bad.conf" --passes 1 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] || fail "broken --config: exit $rc"
grep -q "bad.conf: line 2: only CRUX_ variables" "$tmp/err" || fail "message: $(cat "$tmp/err")"

# The file beats the environment (CRUX_LEVELS=2 above).
printf '# cruxd settings\nexport CRUX_LEVELS="3"\nCRUX_AGENT_INTERVAL=100ms\n' >"$tmp/cruxd.conf"
"$AGENT" --config "$tmp/cruxd.conf" 2>"$tmp/cruxd.log" &
pid=$!
cxt_kill_at_exit "$pid"
wait_levels 3
# Reload: the edited file is read again.
printf 'CRUX_LEVELS=5\nCRUX_AGENT_INTERVAL=100ms\n' >"$tmp/cruxd.conf"
kill -HUP "$pid"
wait_levels 5
wait_log "configuration reloaded: 5 levels"
# A broken edit is refused; the agent keeps 5 levels and runs on.
printf 'CRUX_LEVELS=5\nCRUX_LEVELS=nine\n' >"$tmp/cruxd.conf"
kill -HUP "$pid"
wait_log "reload refused, keeping the running configuration: CRUX_LEVELS='nine'"
printf 'CRUX_LEVELS="4\n' >"$tmp/cruxd.conf"
kill -HUP "$pid"
wait_log "reload refused.*line 1: unmatched"
[ "$(levels)" = 5 ] || fail "levels changed by a refused reload"
kill -0 "$pid" || fail "agent died on a refused reload"
kill "$pid"; wait "$pid" || fail "agent exit status"

# Options beat the file; a missing file is a warning, not an error.
printf 'CRUX_LEVELS=3\n' >"$tmp/cruxd.conf"
"$AGENT" --config "$tmp/cruxd.conf" --levels 6 --interval 100ms 2>"$tmp/cruxd.log" &
pid=$!
cxt_kill_at_exit "$pid"
wait_levels 6
kill "$pid"; wait "$pid" || true
"$AGENT" --config "$tmp/none.conf" --passes 1 2>"$tmp/cruxd.log" || fail "missing --config file is fatal"
grep -q "none.conf does not exist" "$tmp/cruxd.log" || fail "no warning for a missing file"
echo "cruxd --config and reload: ok"
