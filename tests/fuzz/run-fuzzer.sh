#!/bin/sh
# run-fuzzer.sh FUZZER CORPUS_DIR: replay the regression corpus, then fuzz for
# CRUX_FUZZ_SECONDS (default 20) from it with mutation seed CRUX_FUZZ_SEED
# (default 1: every run walks the same sequence of inputs, so what CI meets
# was met here first, only further on a faster machine; 0: a random seed,
# for exploring). New inputs go to a scratch
# directory, never into the source tree: removed after a clean run, kept (and
# named) after a failing one for its crash artifact. The fuzzer is not exec'd:
# that dropped the exit trap and left every run's scratch directory in /tmp.
# A crash exits 1, not libFuzzer's default 77, which meson reads as "skipped".
set -eu
fuzzer=$1
corpus=$2
secs=${CRUX_FUZZ_SECONDS:-20}
seed=${CRUX_FUZZ_SEED:-1}
case $seed in '' | *[!0-9]*)
	echo "run-fuzzer: CRUX_FUZZ_SEED='$seed' is not a number (1: the fixed walk, 0: random)" >&2
	exit 2 ;;
esac
. "$(dirname "$0")/../lib/harness.sh"
cxt_workdir crux-fuzz
scratch=$CXT_W
rc=0
"$fuzzer" -error_exitcode=1 -artifact_prefix="$scratch/" -runs=0 "$corpus" || rc=$?
if [ "$rc" = 0 ]; then
	"$fuzzer" -error_exitcode=1 -seed="$seed" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$scratch/" "$scratch" "$corpus" || rc=$?
fi
if [ "$rc" != 0 ]; then
	# shellcheck disable=SC2034 # read by the harness's exit action
	KEEP=1
	echo "run-fuzzer: exit $rc; new inputs and artifacts kept in $scratch"
fi
exit "$rc"
