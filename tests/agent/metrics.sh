#!/bin/sh
# cruxd --metrics end to end: scrape the endpoint with curl while a fake job
# runs and check the text strictly (promcheck); refused specs and ports; the
# start line with and without journald. Usage: metrics.sh CRUXD FAKE_RANK PROMCHECK
set -eu
AGENT=$1
RANK=$2
CHECK=$3
. "$(dirname "$0")/../lib/harness.sh"
cxt_need_cmd curl
cxt_workdir cxmetrics
tmp=$CXT_W
fail() { cxt_fail "$@"; }
export CRUX_SHM_DIR="$tmp/shm" CRUX_PROBE=0 CRUX_AGENT_INTERVAL=100ms CRUX_PROFILE_WINDOW=300ms
unset JOURNAL_STREAM CRUX_METRICS || true

# The checker itself refuses bad text.
printf 'crux_x 1\n' | "$CHECK" 2>/dev/null && fail "promcheck took a sample without TYPE"
printf '# TYPE crux_x gauge\ncrux_x{a="b\\q"} 1\n' | "$CHECK" 2>/dev/null && fail "promcheck took a bad escape"
printf '# TYPE crux_x counter\ncrux_x 1\n' | "$CHECK" 2>/dev/null && fail "promcheck took a counter without _total"
printf '# TYPE crux_x gauge\ncrux_x{a="b\\"\\\\\\n"} -1.5e3\n' | "$CHECK" || fail "promcheck refused valid text"

# Bad specs: exit 2, a message naming the option and the forms.
for spec in nonsense 1.2.3.4.5:80 127.0.0.1:99999 host:; do
	if "$AGENT" --passes 1 --metrics "$spec" 2>"$tmp/err"; then fail "--metrics $spec accepted"; fi
	grep -q "CRUX_METRICS='$spec' is not PORT, ADDR:PORT" "$tmp/err" || fail "message for $spec: $(cat "$tmp/err")"
done

"$RANK" "$tmp/shm" env:metrics-job 198.19.1.2 198.19.2.2 1000000 0.1 0.07 0.03 &
cxt_kill_at_exit $!
"$AGENT" --metrics 127.0.0.1:0 2>"$tmp/cruxd.log" &
cxt_kill_at_exit $!
port=
i=0
while [ $i -lt 50 ]; do
	port=$(sed -n 's|.*metrics http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$tmp/cruxd.log")
	[ -n "$port" ] && break
	sleep 0.1; i=$((i + 1))
done
[ -n "$port" ] || fail "no metrics URL in the start line"
grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z cruxd\[[0-9]+\] INFO: cruxd .* started .*levels' "$tmp/cruxd.log" ||
	fail "start line without timestamp or configuration"

# Wait until the job is scheduled, then check the whole text.
i=0
while [ $i -lt 80 ]; do
	curl -sS -o "$tmp/m" "http://127.0.0.1:$port/metrics" || fail "scrape failed"
	grep -q '^crux_job_state{job="env:metrics-job",state="scheduled"} 1$' "$tmp/m" && break
	sleep 0.1; i=$((i + 1))
done
grep -q '^crux_job_state{job="env:metrics-job",state="scheduled"} 1$' "$tmp/m" || fail "job not scheduled: $(cat "$tmp/m")"
"$CHECK" --prefix crux_ --require crux_job_state --require crux_job_level --require crux_job_intensity \
	--require crux_job_priority --require crux_job_compute_seconds --require crux_job_comm_seconds \
	--require crux_job_bytes_per_iteration --require crux_level_bytes_per_iteration \
	--require crux_agent_schedule_age_seconds --require crux_agent_heartbeat_age_seconds \
	--require crux_agent_passes_total --require crux_agent_profile_records \
	--require crux_probe_peer_up --require crux_agent_overrides_error <"$tmp/m" || fail "format"
grep -q '^crux_agent_jobs 1$' "$tmp/m" || fail "crux_agent_jobs"
# The job was published as scheduled: the table changed at least twice (was always 0).
grep -Eq '^crux_agent_table_generation ([2-9]|[1-9][0-9]+)$' "$tmp/m" ||
	fail "table generation: $(grep table_generation "$tmp/m")"
grep -Eq '^crux_job_level\{job="env:metrics-job"\} [0-9]$' "$tmp/m" || fail "job level"
grep -Eq '^crux_job_compute_seconds\{job="env:metrics-job"\} 0\.0[67]' "$tmp/m" || fail "compute time: $(grep compute "$tmp/m")"
grep -q '^crux_level_bytes_per_iteration{level="3"}' "$tmp/m" || fail "bytes per level"
curl -sS -D "$tmp/h" -o /dev/null "http://127.0.0.1:$port/metrics"
grep -qi '^content-type: text/plain; version=0.0.4' "$tmp/h" || fail "content type"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/nothing")
[ "$code" = 404 ] || fail "unknown path gave $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$port/metrics")
[ "$code" = 405 ] || fail "POST gave $code"

# A port in use: a clear message, exit 2.
if CRUX_SHM_DIR="$tmp/shm2" "$AGENT" --passes 1 --metrics "127.0.0.1:$port" 2>"$tmp/err"; then
	fail "second agent on a busy port started"
fi
grep -q "cannot listen on 127.0.0.1 port $port" "$tmp/err" || fail "busy port: $(cat "$tmp/err")"

# Under journald (JOURNAL_STREAM set) no timestamps of our own.
JOURNAL_STREAM=8:1 CRUX_SHM_DIR="$tmp/shm3" "$AGENT" --passes 1 2>"$tmp/j"
grep -q '^cruxd\[[0-9]*\] INFO: cruxd .* started .*metrics off' "$tmp/j" || fail "journald start line: $(cat "$tmp/j")"
# An invalid CRUX_LOG_LEVEL: one behaviour, a message and exit 2 (no "using warn" then an exit).
rc=0
CRUX_LOG_LEVEL=verbose CRUX_SHM_DIR="$tmp/shm4" "$AGENT" --passes 1 2>"$tmp/ll" || rc=$?
[ "$rc" = 2 ] || fail "invalid CRUX_LOG_LEVEL: exit $rc"
grep -q "CRUX_LOG_LEVEL='verbose' is not valid" "$tmp/ll" || fail "log level message: $(cat "$tmp/ll")"
grep -q "using" "$tmp/ll" && fail "log level message promises to go on: $(cat "$tmp/ll")"
# A bad topology is a bad setting too: exit 2 (was 1), the file and line named.
printf 'host h1 10.0.0.1\nbogus line\n' >"$tmp/bad.topo"
rc=0
CRUX_TOPOLOGY="$tmp/bad.topo" CRUX_SHM_DIR="$tmp/shm5" "$AGENT" --passes 1 2>"$tmp/bt" || rc=$?
[ "$rc" = 2 ] || fail "bad topology: exit $rc ($(cat "$tmp/bt"))"
grep -q "bad.topo:2" "$tmp/bt" || fail "bad topology message: $(cat "$tmp/bt")"
echo "metrics: ok (port $port)"
