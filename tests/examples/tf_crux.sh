#!/bin/sh
# tf-crux.sh and crux-env.sh against a stand-in python3 (no TensorFlow, no GPU):
# the default job id is short and the same on every worker; a bad --job-id is
# named as such; crux-env.sh turns a relative prefix into an absolute one.
# Usage: tf_crux.sh SOURCE_ROOT BUILD_ROOT
set -eu
SRC=$1
BUILD=$2
command -v bash >/dev/null || { echo "SKIP: bash not installed"; exit 77; }
command -v sha256sum >/dev/null || { echo "SKIP: sha256sum not installed"; exit 77; }
tmp=$(mktemp -d /tmp/cxtf.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
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
echo "tf-crux.sh, crux-env.sh: ok"
