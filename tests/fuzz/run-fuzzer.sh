#!/bin/sh
# run-fuzzer.sh FUZZER CORPUS_DIR: replay the regression corpus, then fuzz for
# CRUX_FUZZ_SECONDS (default 20) from it. New inputs go to a scratch
# directory, never into the source tree.
set -eu
fuzzer=$1
corpus=$2
secs=${CRUX_FUZZ_SECONDS:-20}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$fuzzer" -runs=0 "$corpus"
exec "$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
	-artifact_prefix="$scratch/" "$scratch" "$corpus"
