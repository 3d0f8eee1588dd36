#!/bin/sh
# tf-crux.sh, torchrun-crux.sh and crux-env.sh against stand-in python3 and
# torchrun (no TensorFlow, no GPU): the default job id is short and the same on
# every worker; a bad --job-id or an index beyond the workers is named as such;
# both launchers refuse to start without the Crux libraries; --help is a usage
# text; crux-env.sh turns a relative prefix into an absolute one.
# Usage: tf_crux.sh SOURCE_ROOT BUILD_ROOT
set -eu
SRC=$1
BUILD=$2
. "$(dirname "$0")/../lib/harness.sh"
cxt_need_cmd bash
cxt_need_cmd sha256sum coreutils
cxt_workdir cxtf
tmp=$CXT_W
fail() { cxt_fail "$@"; }
mkdir "$tmp/bin"
cat >"$tmp/bin/python3" <<'PY'
#!/bin/sh
echo "CRUX_JOB_ID=$CRUX_JOB_ID"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
echo "TF_CONFIG=$TF_CONFIG"
PY
chmod +x "$tmp/bin/python3"
workers=worker-node-0001.cluster.example.org:12345,worker-node-0002.cluster.example.org:12345,worker-node-0003.cluster.example.org:12345,worker-node-0004.cluster.example.org:12345
for i in 0 3; do
	PATH="$tmp/bin:$PATH" bash "$SRC/examples/tensorflow/tf-crux.sh" --crux "$BUILD" \
		--workers "$workers" --index $i -- train.py >"$tmp/out$i" 2>"$tmp/err$i" ||
		fail "worker $i: $(cat "$tmp/err$i")"
done
id0=$(sed -n 's/^CRUX_JOB_ID=//p' "$tmp/out0")
id3=$(sed -n 's/^CRUX_JOB_ID=//p' "$tmp/out3")
[ -n "$id0" ] && [ "$id0" = "$id3" ] || fail "workers derive different ids: '$id0' '$id3'"
[ ${#id0} -le 59 ] || fail "default id '$id0' is longer than 59 characters"
echo "$id0" | grep -Eq '^tf-[0-9a-f]{16}$' || fail "default id '$id0'"
grep -q '"index": 3' "$tmp/out3" || fail "TF_CONFIG: $(cat "$tmp/out3")"
# An explicit id that is too long: named, exit 2, no "set CRUX_JOB_ID" advice.
long=$(printf '%070d' 0)
if PATH="$tmp/bin:$PATH" bash "$SRC/examples/tensorflow/tf-crux.sh" --crux "$BUILD" \
	--workers a:1 --index 0 --job-id "$long" -- train.py >/dev/null 2>"$tmp/err"; then
	fail "a 70-character --job-id was accepted"
fi
grep -q "job-id '$long' is not valid: at most 59" "$tmp/err" || fail "long id message: $(cat "$tmp/err")"
grep -q "set CRUX_JOB_ID" "$tmp/err" && fail "message advises setting CRUX_JOB_ID"
# crux-env.sh: a relative prefix becomes absolute.
parent=$(dirname "$BUILD")
rel=$(basename "$BUILD")
# (In a fresh shell: dash's "." passes no arguments, so the prefix goes in CRUX_PREFIX.)
out=$(cd "$parent" && env -u LD_LIBRARY_PATH -u LD_PRELOAD CRUX_PREFIX="$rel" ENVSH="$SRC/examples/crux-env.sh" \
	sh -c '. "$ENVSH" && echo "${LD_LIBRARY_PATH-}|${LD_PRELOAD-}"')
case "$out" in
/*"|"/*) ;;
*) fail "crux-env.sh left relative paths: $out" ;;
esac
echo "$out" | grep -q "^$BUILD/plugin" || fail "plugin dir: $out"
# An index beyond the worker list: named, exit 2, nothing started.
rc=0
PATH="$tmp/bin:$PATH" bash "$SRC/examples/tensorflow/tf-crux.sh" --crux "$BUILD" \
	--workers a:1,b:1 --index 2 -- train.py >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" = 2 ] || fail "--index 2 of 2 workers: exit $rc"
grep -q "index 2 is beyond the 2 worker" "$tmp/err" || fail "index message: $(cat "$tmp/err")"
[ ! -s "$tmp/out" ] || fail "--index 2 of 2 workers started the worker"
# The libraries missing: the launchers refuse to start the job without Crux.
cat >"$tmp/bin/torchrun" <<'TR'
#!/bin/sh
echo "torchrun started"
TR
chmod +x "$tmp/bin/torchrun"
rc=0
PATH="$tmp/bin:$PATH" bash "$SRC/examples/tensorflow/tf-crux.sh" --crux "$tmp/nocrux" \
	--workers a:1 --index 0 -- train.py >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] && [ ! -s "$tmp/out" ] || fail "tf-crux.sh without the libraries: exit $rc, $(cat "$tmp/out")"
grep -q "libnccl-net-crux.so not found under $tmp/nocrux: the worker would run without Crux" "$tmp/err" ||
	fail "tf-crux.sh missing library message: $(cat "$tmp/err")"
rc=0
PATH="$tmp/bin:$PATH" bash "$SRC/examples/pytorch/torchrun-crux.sh" --crux "$tmp/nocrux" -- \
	--nproc-per-node 1 train.py >"$tmp/out" 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] && [ ! -s "$tmp/out" ] || fail "torchrun-crux.sh without the libraries: exit $rc, $(cat "$tmp/out")"
grep -q "libnccl-net-crux.so libcrux-preload.so not found" "$tmp/err" ||
	fail "torchrun-crux.sh missing library message: $(cat "$tmp/err")"
PATH="$tmp/bin:$PATH" bash "$SRC/examples/pytorch/torchrun-crux.sh" --crux "$BUILD" -- \
	--nproc-per-node 1 train.py >"$tmp/out" 2>"$tmp/err" || fail "torchrun-crux.sh: $(cat "$tmp/err")"
grep -q "torchrun started" "$tmp/out" || fail "torchrun-crux.sh did not start torchrun"
# --help: a usage text, not lines of the script's source.
for l in examples/tensorflow/tf-crux.sh examples/pytorch/torchrun-crux.sh; do
	bash "$SRC/$l" --help >"$tmp/help" || fail "$l --help failed"
	head -n 1 "$tmp/help" | grep -q "^usage: " || fail "$l --help: $(head -n 2 "$tmp/help")"
	grep -Eq 'set -e|HERE=|PREFIX=|SPDX' "$tmp/help" && fail "$l --help prints its source: $(cat "$tmp/help")"
done
echo "tf-crux.sh, torchrun-crux.sh, crux-env.sh: ok"
