#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Network sensitivity for placement (issue 31): cruxctl placement --json
# (schema crux.placement/1), the stall breakdown in cruxctl status / --json,
# from the profile records without an agent and from cruxd's status with one.
# Ranks are fake-rank processes with known figures: iteration 0.2 s, compute
# 0.12 s, communication 0.08 s (all exposed), 1 MB per iteration to one peer
# host; the plugin busy 30 % of the time (60 ms per iteration) for one job,
# absent for the other. Expected: compute 0.6, network 0.3, interconnect 0.1;
# without the plugin's figure the network part is unknown (null) and all
# 0.4 is interconnect.
# Usage: placement.sh CRUXCTL CRUXD FAKE_RANK
set -eu
CTL=$1
AGENT=$2
RANK=$3
. "$(dirname "$0")/../lib/harness.sh"
cxt_need_cmd python3
cxt_workdir cxag-place
tmp=$CXT_W
pids=
export CRUX_SHM_DIR="$tmp/shm"
export CRUX_PROBE=0
export CRUX_AGENT_INTERVAL=100ms
export CRUX_PROFILE_WINDOW=1s
mkdir -m 755 "$CRUX_SHM_DIR"
fail() { cxt_fail "$@"; }

ranks() {
	FAKE_RANK_BUSY=0.3 "$RANK" "$CRUX_SHM_DIR" env:net 198.18.0.1 198.18.0.2 1000000 0.2 0.12 0.08 &
	pids="$pids $!"
	cxt_kill_at_exit $!
	"$RANK" "$CRUX_SHM_DIR" env:intra 198.18.0.1 198.18.0.3 2000000 0.2 0.12 0.08 &
	pids="$pids $!"
	cxt_kill_at_exit $!
}

# check FILE SOURCE: the placement document's figures
check() {
	python3 - "$1" "$2" <<'PY' || fail "placement document ($2): $(cat "$1")"
import json, sys
d = json.load(open(sys.argv[1]))
src = sys.argv[2]
assert d["schema"] == "crux.placement/1", d["schema"]
jobs = {j["id"]: j for j in d["jobs"]}
net, intra = jobs["env:net"], jobs["env:intra"]
close = lambda a, b: a is not None and abs(a - b) < 1e-6
for j in (net, intra):
    assert j["source"] == src, (j["id"], j["source"])
    assert j["ranks"] == 1 and close(j["iter_time_s"], 0.2), j
    assert close(j["compute_fraction"], 0.6), j
    assert close(j["other_fraction"], 0.0), j
assert close(net["network_stall_fraction"], 0.3), net
assert close(net["interconnect_stall_fraction"], 0.1), net
assert intra["network_stall_fraction"] is None, intra
assert close(intra["interconnect_stall_fraction"], 0.4), intra
for j, peer, bpi in ((net, "198.18.0.2", 1e6), (intra, "198.18.0.3", 2e6)):
    assert len(j["peers"]) == 1, j
    p = j["peers"][0]
    assert p["src"] == "198.18.0.1" and p["dst"] == peer, p
    # the agent measures over a window of a running counter: within 10 %
    assert abs(p["bytes_per_iter"] - bpi) <= 0.1 * bpi, p
    assert abs(j["bytes_per_iter"] - bpi) <= 0.1 * bpi, j
PY
}

# ---- without an agent: from the records ----
ranks
sleep 0.5
"$CTL" --json placement >"$tmp/p1.json" || fail "placement --json"
check "$tmp/p1.json" records
"$CTL" placement >"$tmp/p1.txt" || fail "placement"
grep -q "^env:net .* 60.0% *30.0% *10.0% *0.0%" "$tmp/p1.txt" || fail "placement text: $(cat "$tmp/p1.txt")"
"$CTL" --json status >"$tmp/s1.json" || fail "status --json"
python3 - "$tmp/s1.json" <<'PY' || fail "status --json stalls: $(cat "$tmp/s1.json")"
import json, sys
d = json.load(open(sys.argv[1]))
s = {j["id"]: j["stalls"] for j in d["jobs"]}
assert abs(s["env:net"]["network"] - 0.3) < 1e-6 and s["env:net"]["net_known"] is True, s
assert s["env:intra"]["network"] is None and s["env:intra"]["net_known"] is False, s
assert abs(s["env:intra"]["interconnect"] - 0.4) < 1e-6, s
PY
"$CTL" status >"$tmp/s1.txt" || fail "status"
grep -q "env:net .*compute 60.0%  interconnect 10.0%  network 30.0%  other 0.0%" "$tmp/s1.txt" ||
	fail "status text: $(cat "$tmp/s1.txt")"
grep -q "env:intra .*network -" "$tmp/s1.txt" || fail "status text, unknown network: $(cat "$tmp/s1.txt")"
"$CTL" top --iterations 1 --interval 100ms >"$tmp/top.txt" </dev/null || fail "top"
grep -q "env:net .*compute 60.0%  interconnect 10.0%  network 30.0%  other 0.0%" "$tmp/top.txt" ||
	fail "top: $(cat "$tmp/top.txt")"
"$CTL" placement extra >/dev/null 2>"$tmp/err" && fail "placement took an argument"
grep -q "placement takes no arguments ('extra')" "$tmp/err" || fail "argument error: $(cat "$tmp/err")"
for p in $pids; do kill -KILL "$p"; wait "$p" 2>/dev/null || true; done
pids=
rm -f "$CRUX_SHM_DIR"/prof-*.rec

# ---- with cruxd: attached ranks, the agent's status ----
"$AGENT" >"$tmp/agent.log" 2>&1 &
cxt_kill_at_exit $!
i=0
until [ -S "$CRUX_SHM_DIR/cruxd.sock" ]; do
	i=$((i + 1)); [ $i -lt 100 ] || fail "cruxd did not start: $(cat "$tmp/agent.log")"; sleep 0.1
done
export FAKE_RANK_ATTACH=1
ranks
# the agent measures bytes per iteration over a profile window (1 s)
i=0
while :; do
	"$CTL" --json placement >"$tmp/p2.json" 2>/dev/null || true
	if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); j=[x for x in d["jobs"] if x["source"]=="agent" and x["peers"]]; sys.exit(0 if len(j)==2 else 1)' "$tmp/p2.json" 2>/dev/null; then
		break
	fi
	i=$((i + 1)); [ $i -lt 100 ] || fail "the agent never reported both jobs with peers: $(cat "$tmp/p2.json")"
	sleep 0.1
done
sleep 1.2 # a full window after the first measurement
"$CTL" --json placement >"$tmp/p2.json" || fail "placement --json with agent"
check "$tmp/p2.json" agent
echo PASS
