#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# crux-tb-analyze on synthetic trainer logs with known answers: utilization,
# iteration time, JCT, the --check verdicts (direction, starvation) and the
# rejection of malformed logs.
#   analyze_fixture.sh BUILD_ROOT
set -uo pipefail
A="$1/bench/testbed/crux-tb-analyze"
. "$(dirname "$0")/../lib/harness.sh"
cxt_workdir crux-tb-an
T=$CXT_W
fail() { cxt_fail "$@"; }

# mk RUN JOB RANKS ITERS COMPUTE_S COMM_S [STALL_AT]: a job's logs; iterations
# back to back from t = 10 s; at iteration STALL_AT the comm phase lasts 3 s
# with no bucket finishing in between (a starved job).
mk() {
	local run="$1" job="$2" n="$3" iters="$4" c="$5" m="$6" stall="${7:--1}" r
	mkdir -p "$T/$run/logs"
	for ((r = 0; r < n; r++)); do
		awk -v it="$iters" -v c="$c" -v m="$m" -v st="$stall" -v job="$job" -v r="$r" -v n="$n" 'BEGIN {
			printf "# crux-tb-trainer job=%s model=x rank=%d nranks=%d host=- compute_ms=%g grad_bytes=1 buckets=2\n", job, r, n, c * 1000
			t = 10e9
			for (i = 0; i < it; i++) {
				mm = (i == st) ? 3.0 : m
				ce = t + c * 1e9; e = ce + mm * 1e9
				b1 = (i == st) ? e : ce + mm * 0.5e9
				printf "%d %.0f %.0f %.0f %.0f %.0f\n", i, t, ce, e, b1, e
				t = e
			}
			printf "# done iters=%d\n", it
		}' >"$T/$run/logs/$job-r$r.log"
	done
}
jobs_txt() { printf 'hi gpt 2 high\nlo bert 2 low\n' >"$T/$1/jobs.txt"; }

# none: hi 0.5 + 1.0 s (20 it, 30 s), lo 0.2 + 0.3 s (70 it, 35 s)
mk none hi 2 20 0.5 1.0; mk none lo 2 70 0.2 0.3; jobs_txt none
# crux: hi 0.5 + 0.5 s (20 it, 20 s), lo 0.2 + 0.4 s (60 it, 36 s)
mk crux hi 2 20 0.5 0.5; mk crux lo 2 60 0.2 0.4; jobs_txt crux

out="$("$A" --check --json "$T/r.json" --plot-dir "$T" none:"$T/none" crux:"$T/crux")" ||
	fail "a clear improvement did not pass --check: $out"
# Window none: from 11.5 s (the first iterations end) to 40 s (hi ends).
grep -q '"benchmark": "testbed"' "$T/r.json" || fail "no JSON"
python_free_get() { tr -d '\n ' <"$T/r.json" | grep -o "$1" | head -n 1; }
# hi iteration time: 1.5 s (none), 1.0 s (crux); JCT 30 s and 20 s.
python_free_get '"hi":{"model":"gpt","gpus":2,"role":"high","iter_time_s":{"mean":1.500000' >/dev/null ||
	fail "hi's iteration time (none) is not 1.5 s"
grep -q 'utilization +' <<<"$out" || fail "no utilization line: $out"
grep -q 'check: PASS' <<<"$out" || fail "no PASS verdict: $out"
[ -s "$T/util.dat" ] && [ -s "$T/jct.dat" ] && [ -s "$T/timeline.dat" ] || fail "plot data missing"

# The same runs in the other order: the direction is wrong, --check fails.
if out="$("$A" --check crux:"$T/crux" none:"$T/none")"; then
	fail "a slowdown passed --check: $out"
fi
grep -q 'check: FAIL' <<<"$out" || fail "no FAIL verdict: $out"

# A starved low-intensity job (3 s without any progress) fails --check.
mk starve hi 2 20 0.5 0.5; mk starve lo 2 60 0.2 0.4 10; jobs_txt starve
if out="$("$A" --check none:"$T/none" crux:"$T/starve")"; then
	fail "a starved job passed --check: $out"
fi
grep -q 'STARVED' <<<"$out" || fail "starvation not reported: $out"
# Stalls of the baseline arm are reported but do not fail the scheduled arm.
mk basestall hi 2 20 0.5 1.0; mk basestall lo 2 70 0.2 0.3 10; jobs_txt basestall
out="$("$A" --check none:"$T/basestall" crux:"$T/crux")" ||
	fail "a stall of the baseline failed --check: $out"
grep -q 'without progress | none .*lo=[1-9]' <<<"$out" || fail "the baseline stall is not reported: $out"

# Malformed input is rejected with the file named.
cp -r "$T/none" "$T/bad"
echo "7 123 oops" >>"$T/bad/logs/lo-r1.log"
if err="$("$A" none:"$T/bad" 2>&1)"; then
	fail "a malformed log was accepted"
fi
grep -q 'lo-r1.log:.*malformed' <<<"$err" || fail "the error does not name the file: $err"
printf 'hi gpt 0 high\n' >"$T/bad/jobs.txt"
"$A" none:"$T/bad" >/dev/null 2>&1 && fail "a job with 0 ranks was accepted"
echo "PASS"
