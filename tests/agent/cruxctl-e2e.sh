#!/bin/sh
# cruxctl set / clear / status / top end to end, without and with a running
# cruxd, in a private CRUX_SHM_DIR; status lists the processes attached to
# cruxd. Usage: cruxctl-e2e.sh CRUXCTL CRUXD FAKE_RANK
set -eu
CTL=$1
AGENT=$2
RANK=$3
. "$(dirname "$0")/../lib/harness.sh"
cxt_workdir cxag-e2e
tmp=$CXT_W
export CRUX_SHM_DIR="$tmp/shm"
export CRUX_HEARTBEAT_TIMEOUT=1s
export CRUX_PROBE=0
export CRUX_AGENT_INTERVAL=100ms
fail() { cxt_fail "$@"; }
expect_fail() { if "$@" >"$tmp/out" 2>"$tmp/err"; then fail "should have failed: $*"; fi; }

# ---- errors name their real cause, once (no generic follow-up) ----
bad="$tmp/bad"
mkdir -m 755 "$bad"
ln -s /etc/passwd "$bad/decision.tbl"
expect_fail env CRUX_SHM_DIR="$bad" "$CTL" status
grep -q "decision.tbl is a symbolic link; refusing to follow it; fix: rm $bad/decision.tbl" "$tmp/err" ||
	fail "status on a symlinked table: $(cat "$tmp/err")"
grep -q "unsafe" "$tmp/err" && fail "status blames the directory for the table: $(cat "$tmp/err")"
expect_fail env CRUX_SHM_DIR="$bad" "$CTL" set --job foo --level 1
grep -q "cannot write the decision table: .*symbolic link" "$tmp/err" ||
	fail "set on a symlinked table: $(cat "$tmp/err")"
grep -q "for writing: unsafe permissions" "$tmp/err" && fail "set names a generic cause: $(cat "$tmp/err")"
rm "$bad/decision.tbl"
printf 'CRXD\001\000' >"$bad/decision.tbl"; chmod 644 "$bad/decision.tbl"
truncate -s 598400 "$bad/decision.tbl"
CRUX_SHM_DIR="$bad" "$CTL" status >"$tmp/out" 2>&1 || fail "status on an old table: $(cat "$tmp/out")"
grep -q "layout version 1, but this build reads version 2" "$tmp/out" ||
	fail "status on an old table does not name the version: $(cat "$tmp/out")"
rm "$bad/decision.tbl"
chmod 777 "$bad"
expect_fail env CRUX_SHM_DIR="$bad" "$CTL" status
[ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "fix: chmod 755 $bad" "$tmp/err" ||
	fail "status on an unsafe directory: $(cat "$tmp/err")"
chmod 755 "$bad"
mkdir "$bad/agent.status"
expect_fail env CRUX_SHM_DIR="$bad" "$AGENT" --no-probe
grep -q "agent.status: Is a directory" "$tmp/err" || fail "cruxd hides why it stopped: $(cat "$tmp/err")"
grep -q "input/output error" "$tmp/err" && fail "cruxd names a generic cause: $(cat "$tmp/err")"

# ---- no agent: the table is written directly ----
"$CTL" set --job foo --level 2 --route 198.18.0.2=1:40001,40002 --timeout 1h >"$tmp/out" 2>"$tmp/warn"
grep -q "table written directly" "$tmp/out" || fail "set without agent: $(cat "$tmp/out")"
# Warnings: the entry dies with the heartbeat; no process of that job runs.
grep -q "no agent refreshes the table's heartbeat: plugins drop this entry 3600 s" "$tmp/warn" ||
	fail "no heartbeat warning: $(cat "$tmp/warn")"
grep -q "no running process publishes job env:foo" "$tmp/warn" || fail "no job warning: $(cat "$tmp/warn")"
expect_fail "$CTL" set --job foo --level 1 --timeout 5parsecs
grep -q -- "--timeout" "$tmp/err" || fail "bad duration message: $(cat "$tmp/err")"
"$CTL" --json status >"$tmp/st.json"
grep -q '"id":"env:foo","level":2,"state":"overridden"' "$tmp/st.json" || fail "job not in table"
grep -q '"path":1,"ports":\[40001,40002\]' "$tmp/st.json" || fail "route not in table"
grep -q '"heartbeat_timeout_s":3600' "$tmp/st.json" || fail "timeout not set"
"$CTL" status | grep -q "env:foo" || fail "text status lacks the job"
expect_fail "$CTL" set --job foo --level 9
grep -q "level" "$tmp/err" || fail "bad level message"
expect_fail "$CTL" set --job foo --level 1 --route 198.18.0.2=1
grep -q "ports" "$tmp/err" || fail "route without ports message"
expect_fail "$CTL" set --job foo --level 1 --route nonsense
expect_fail "$CTL" clear --job nosuchjob
"$CTL" --json clear --job env:foo | grep -q '"ok":true' || fail "clear"
"$CTL" --json status | grep -q 'env:foo' && fail "job still there after clear"
# A corrupt overrides file: set warns how to recover, clear really clears it.
echo "garbage here" >"$CRUX_SHM_DIR/overrides.conf"
"$CTL" set --job foo --level 1 >/dev/null 2>"$tmp/warn"
grep -q "fix: correct it, or run 'cruxctl clear'" "$tmp/warn" || fail "corrupt file advice: $(cat "$tmp/warn")"
"$CTL" clear >/dev/null 2>"$tmp/warn"
grep -q "replaced by an empty overrides file" "$tmp/warn" || fail "clear kept a corrupt file: $(cat "$tmp/warn")"
grep -q garbage "$CRUX_SHM_DIR/overrides.conf" && fail "garbage still in overrides.conf"

# ---- with an agent: through the overrides file ----
"$CTL" set --job keep --level 1 >/dev/null          # left by an operator before the agent
"$AGENT" --interval 100ms --window 200ms --no-probe --levels 5 --log-level info 2>"$tmp/agent.log" &
agent_pid=$!
# SIGKILL also ends it where the test left it stopped.
cxt_kill_at_exit "$agent_pid"
i=0
until "$CTL" --json status 2>/dev/null | grep -q '"running":true'; do
	i=$((i + 1)); [ $i -lt 50 ] || fail "agent did not come up: $(cat "$tmp/agent.log")"
	sleep 0.1
done
"$CTL" --json status | grep -q '"id":"env:keep","level":1,"state":"overridden"' ||
	fail "agent dropped the override found in the table"
"$CTL" set --job bar --level 3 >"$tmp/out"
grep -q "applied by the agent" "$tmp/out" || fail "set through agent: $(cat "$tmp/out")"
"$CTL" --json status | grep -q '"id":"env:bar","level":3,"state":"overridden"' || fail "bar"
"$CTL" top --iterations 2 --interval 100ms >"$tmp/top" || fail "top"
grep -q "env:bar" "$tmp/top" || fail "top shows no job"
"$CTL" --json top --iterations 1 | grep -q '"running":true' || fail "top --json"
"$CTL" clear >"$tmp/out"
grep -q "applied by the agent" "$tmp/out" || fail "clear through agent"
"$CTL" --json status | grep -q 'env:bar' && fail "bar still there after clear"
"$CTL" --json status | grep -q 'env:keep' && fail "keep still there after clear"

# A process attached over cruxd.sock (its record is a memfd cruxd holds) is listed by status
# with the kernel's pid and uid, its job, its source and its byte counters per peer and level.
FAKE_RANK_ATTACH=1 "$RANK" "$CRUX_SHM_DIR" env:att 198.18.7.1 198.18.7.2 1000 0.1 0.05 0.02 \
	2>"$tmp/rank.err" &
rank_pid=$!
cxt_kill_at_exit "$rank_pid"
i=0
until "$CTL" --json status 2>/dev/null | grep -q "\"attached\":\[{\"pid\":$rank_pid,"; do
	i=$((i + 1)); [ $i -lt 50 ] || fail "attached rank not listed: $(cat "$tmp/rank.err"; "$CTL" --json status)"
	sleep 0.1
done
"$CTL" --json status >"$tmp/st.json"
grep -q "\"attached\":\[{\"pid\":$rank_pid,\"uid\":$(id -u),\"job_key\":\"0x[0-9a-f]*\",\"job_id\":\"env:att\"" \
	"$tmp/st.json" || fail "attached entry lacks pid, uid or job: $(cat "$tmp/st.json")"
grep -q '"source":"preload+plugin","peers":\[{"peer":"198.18.7.2","tx_bytes":\[[1-9]' "$tmp/st.json" ||
	fail "attached entry lacks source or byte counters: $(cat "$tmp/st.json")"
for f in "$CRUX_SHM_DIR"/prof-*; do
	[ -e "$f" ] && fail "an attached rank left a v1 record file: $f"
done
"$CTL" status >"$tmp/st.txt"
grep -A2 "attached processes" "$tmp/st.txt" | grep -q "^ *$rank_pid  *$(id -u) env:att .*preload+plugin" ||
	fail "text status lacks the attached rank: $(cat "$tmp/st.txt")"
grep -q "peer 198.18.7.2 *tx by level [1-9]" "$tmp/st.txt" || fail "text status lacks the counters"
# set knows a job whose ranks are attached to cruxd (it read only v1 record files and warned
# "no running process publishes job" for them); --timeout with an agent is refused, not ignored.
"$CTL" set --job att --level 1 >/dev/null 2>"$tmp/warn" || fail "set on an attached job: $(cat "$tmp/warn")"
grep -q "no running process" "$tmp/warn" && fail "set warned about an attached job: $(cat "$tmp/warn")"
"$CTL" set --job nosuchjob --level 1 >/dev/null 2>"$tmp/warn" || fail "set nosuchjob"
grep -q "no running process publishes job env:nosuchjob" "$tmp/warn" || fail "no warning for a typo: $(cat "$tmp/warn")"
"$CTL" clear >/dev/null
expect_fail "$CTL" set --job att --level 1 --timeout 1d
grep -q "\-\-timeout applies only without a running agent" "$tmp/err" || fail "--timeout with an agent: $(cat "$tmp/err")"
# Not root: status sees the agent running (kill(pid, 0) answers EPERM), set says it needs root.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	cp "$CTL" "$tmp/cruxctl-copy" && chmod 755 "$tmp/cruxctl-copy" # the checkout may be mode 700
	NR="setpriv --reuid=65534 --regid=65534 --clear-groups"
	$NR "$tmp/cruxctl-copy" status >"$tmp/nr.txt" 2>&1 || true
	grep -q "^agent .* running" "$tmp/nr.txt" || fail "non-root status: $(head -n 5 "$tmp/nr.txt")"
	grep -q "NOT RUNNING" "$tmp/nr.txt" && fail "non-root status calls the agent not running"
	rc=0
	$NR "$tmp/cruxctl-copy" set --job att --level 1 >/dev/null 2>"$tmp/nr.err" || rc=$?
	[ "$rc" = 1 ] || fail "non-root set: exit $rc"
	grep -q "set needs root: cruxd (pid $agent_pid)" "$tmp/nr.err" || fail "non-root set: $(cat "$tmp/nr.err")"
fi
kill -KILL "$rank_pid"; wait "$rank_pid" 2>/dev/null || true
# Gone from the list once its connection closed (the next pass).
i=0
while "$CTL" --json status | grep -q '"job_id":"env:att"'; do
	i=$((i + 1)); [ $i -lt 30 ] || fail "the dead rank is still listed"
	sleep 0.1
done

# A corrupt overrides file under a running agent: refused with the way out, and clear recovers.
echo "garbage here" >"$CRUX_SHM_DIR/overrides.conf"
expect_fail "$CTL" set --job bar --level 2
grep -q "fix: correct it, or run 'cruxctl clear'" "$tmp/err" || fail "set on a corrupt file: $(cat "$tmp/err")"
"$CTL" clear >"$tmp/out" 2>"$tmp/warn" || fail "clear on a corrupt file: $(cat "$tmp/warn" "$tmp/out")"
grep -q "applied by the agent" "$tmp/out" || fail "clear through agent on a corrupt file"
grep -q garbage "$CRUX_SHM_DIR/overrides.conf" && fail "garbage still in overrides.conf"
"$CTL" set --job bar --level 2 >"$tmp/out" 2>/dev/null || fail "set after recovery"
"$CTL" clear >/dev/null

# ---- SIGHUP: configuration reloaded, agent keeps running ----
kill -HUP "$agent_pid"
i=0
until grep -q "configuration reloaded" "$tmp/agent.log"; do
	i=$((i + 1)); [ $i -lt 30 ] || fail "no reload after SIGHUP: $(cat "$tmp/agent.log")"
	sleep 0.1
done
"$CTL" --json status | grep -q '"running":true' || fail "agent gone after SIGHUP"

# ---- agent holds the table but does not answer: refuse ----
kill -STOP "$agent_pid"
sleep 1.3
expect_fail "$CTL" set --job baz --level 1
grep -q "no agent answers" "$tmp/err" || fail "unreachable agent message: $(cat "$tmp/err")"
kill -CONT "$agent_pid"

cat >"$tmp/t.topo" <<TOPO
host h0 h1 h2 h3
switch tor0 tor1 agg0 agg1
link h0 tor0 100
link h1 tor0 100
link h2 tor1 100
link h3 tor1 100
link tor0 agg0 100
link tor0 agg1 100
link tor1 agg0 100
link tor1 agg1 100
TOPO
cat >"$tmp/j.jobs" <<JOBS
job 1 hosts=h0,h2 compute=0.2 allreduce=2e9
job 2 hosts=h1,h3 compute=0.4 allreduce=1e9
JOBS
# plan without --levels plans with the running agent's levels
"$CTL" --json plan --topology "$tmp/t.topo" --jobs "$tmp/j.jobs" >"$tmp/plan.json" 2>"$tmp/plan.err" ||
	fail "plan with agent"
grep -q '"levels":5' "$tmp/plan.json" || fail "plan did not take the agent's levels: $(cat "$tmp/plan.json")"
grep -q "5 levels, as the agent" "$tmp/plan.err" || fail "plan levels note: $(cat "$tmp/plan.err")"

# ---- clean stop: valid table, stale after the timeout ----
kill -TERM "$agent_pid"
wait "$agent_pid" || fail "agent exit status"
"$CTL" --json status | grep -q '"generation"' || fail "no valid table after SIGTERM"
sleep 1.2
"$CTL" --json status | grep -q '"stale":true' || fail "table not stale after the timeout"
# ---- plan: the scheduler library's offline planner ----
"$CTL" --json plan --topology "$tmp/t.topo" --jobs "$tmp/j.jobs" --levels 2 >"$tmp/plan.json" ||
	fail "plan"
grep -q '"levels":2' "$tmp/plan.json" || fail "plan output: $(cat "$tmp/plan.json")"
# CRUX_LEVELS is honoured as cruxd reads it (it was ignored: 8 levels, even for 'banana').
CRUX_LEVELS=3 "$CTL" --json plan --topology "$tmp/t.topo" --jobs "$tmp/j.jobs" >"$tmp/plan.json" ||
	fail "plan with CRUX_LEVELS=3"
grep -q '"levels":3' "$tmp/plan.json" || fail "plan ignored CRUX_LEVELS=3: $(cat "$tmp/plan.json")"
rc=0
CRUX_LEVELS=banana "$CTL" plan --topology "$tmp/t.topo" --jobs "$tmp/j.jobs" >/dev/null 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] || fail "plan with CRUX_LEVELS=banana: exit $rc"
grep -q "CRUX_LEVELS" "$tmp/err" || fail "plan CRUX_LEVELS=banana message: $(cat "$tmp/err")"
expect_fail "$CTL" plan --topology "$tmp/nonexistent" --jobs "$tmp/j.jobs"
echo "cruxctl end-to-end: ok"
