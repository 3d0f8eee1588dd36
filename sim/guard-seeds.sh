#!/bin/sh
# The fairness guard across workload seeds, on the two experiments where it
# acts (2:1 Clos 40x8 and double-sided, both with scattered placement). Per
# experiment and seed, three crux-sim runs: the baselines and unguarded
# Crux-full (ecmp,sincronia,taccl,cassini-lite,crux-full), and Crux-full with the
# bound on each job's mean slowdown at 4 (crux-full@4) and at 2 (crux-full@2).
# Prints, per guarded run, the gain kept = (util - best baseline's) /
# (Crux-full's - best baseline's) and the worst slowdown, then the median,
# min and max per experiment and bound; writes bench/results/sim-guard-seeds.json.
#
# Usage: sh sim/guard-seeds.sh [BUILD_DIR] [FIRST_SEED] [LAST_SEED]
#        (defaults: build 1 10; about 10 CPU-minutes per double-sided seed,
#        1 per Clos seed)
# CRUX_SIM_PAR: runs at once (default: the online CPUs); CRUX_SIM_EXPERIMENTS:
# a subset of the two; CRUX_SIM_GUARDS: a subset of the guarded runs
# ("crux-full@4 crux-full@2"); CRUX_SIM_OUT: the result file (default
# bench/results/sim-guard-seeds.json). Each run's JSON is
# kept in BUILD_DIR/guard-seeds/ and reused when present: after changing the
# guard, delete that directory's crux-full@* files (the baselines and
# unguarded Crux-full do not run the guard).
set -eu

if [ "${1:-}" = --one ]; then
	# --one SIM DIR EXPERIMENT SEED GROUP: one crux-sim run (xargs calls this);
	# GROUP is base or a guarded policy.
	sim=$2 dir=$3 exp=$4 seed=$5 group=$6
	out="$dir/$exp-s$seed-$group.json"
	[ -s "$out" ] && exit 0
	case $exp in
	clos2-dense-random)
		topo="--topo clos2 --tors 40 --hosts-per-tor 8 --tor-gbps 50 --channels 4 --placement random" ;;
	dsided-random) topo="--topo dsided --placement random" ;;
	*) echo "guard-seeds: unknown experiment $exp" >&2; exit 1 ;;
	esac
	case $group in
	base) pol=ecmp,sincronia,taccl,cassini-lite,crux-full ;;
	*) pol=$group ;;
	esac
	# shellcheck disable=SC2086 # topo is a list of options
	"$sim" run --seed "$seed" --policy "$pol" $topo --no-progress --json "$out.tmp" \
		>"$dir/$exp-s$seed-$group.log" 2>&1 || {
		echo "guard-seeds: $exp seed $seed ($pol) failed: see $dir/$exp-s$seed-$group.log" >&2
		exit 1
	}
	mv "$out.tmp" "$out"
	exit 0
fi

BUILD=${1:-build}
FIRST=${2:-1}
LAST=${3:-10}
SIM="$BUILD/sim/crux-sim"
DIR="$BUILD/guard-seeds"
OUT=${CRUX_SIM_OUT:-bench/results/sim-guard-seeds.json}
GUARDS=${CRUX_SIM_GUARDS:-crux-full@4 crux-full@2}
PAR=${CRUX_SIM_PAR:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)}
EXPERIMENTS=${CRUX_SIM_EXPERIMENTS:-clos2-dense-random dsided-random}
unset CRUX_MAX_SLOWDOWN CRUX_LEVEL_WEIGHTS

if [ ! -x "$SIM" ]; then
	echo "guard-seeds: $SIM not found; build first (meson compile -C $BUILD)" >&2
	exit 1
fi
for g in $GUARDS; do
	case $g in crux-full@4 | crux-full@2) ;; *)
		echo "guard-seeds: CRUX_SIM_GUARDS takes crux-full@4 and/or crux-full@2 (got '$g')" >&2
		exit 1 ;;
	esac
done
case "$FIRST$LAST" in *[!0-9]*)
	echo "guard-seeds: seeds must be numbers (got '$FIRST' '$LAST')" >&2
	exit 1 ;;
esac
mkdir -p "$DIR" bench/results

# The guarded runs (slow: bound 2 the slowest) first, so that the cheap ones
# fill in around them.
# shellcheck disable=SC2086 # GUARDS is a list
for g in $(printf '%s\n' $GUARDS | sort) base; do
	for e in $EXPERIMENTS; do
		s=$FIRST
		while [ "$s" -le "$LAST" ]; do
			echo "$e $s $g"
			s=$((s + 1))
		done
	done
done | xargs -P "$PAR" -n 3 sh "$0" --one "$SIM" "$DIR"

# One line per run: experiment seed policy util worst p99, read from the
# JSON crux-sim writes (null where a figure is undefined).
table() {
	for e in $EXPERIMENTS; do
		s=$FIRST
		while [ "$s" -le "$LAST" ]; do
			for g in base $GUARDS; do
				python3 -c '
import json, sys
e, s, path = sys.argv[1:4]
fig = lambda v: "null" if v is None else str(v)
for r in json.load(open(path))["runs"]:
    sd = r["slowdown"]
    print(e, s, r["policy"], fig(r["mean_gpu_util"]), fig(sd["max"]), fig(sd["p99"]))
' "$e" "$s" "$DIR/$e-s$s-$g.json"
			done
			s=$((s + 1))
		done
	done
}

# The command that reproduces this file, with the subset options that were set.
CMD="sh sim/guard-seeds.sh BUILD $FIRST $LAST"
[ -n "${CRUX_SIM_OUT:-}" ] && CMD="CRUX_SIM_OUT=$OUT $CMD"
[ -n "${CRUX_SIM_GUARDS:-}" ] && CMD="CRUX_SIM_GUARDS='$GUARDS' $CMD"
[ -n "${CRUX_SIM_EXPERIMENTS:-}" ] && CMD="CRUX_SIM_EXPERIMENTS='$EXPERIMENTS' $CMD"

table | awk -v first="$FIRST" -v last="$LAST" -v guards="$GUARDS" \
	-v cmd="$CMD" '
function sorted_median(a, n,    i, j, t) {
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{
	key = $1 SUBSEP $2
	util[key, $3] = $4; worst[key, $3] = $5; p99[key, $3] = $6
	if (!(($1) in seen_e)) { seen_e[$1] = 1; exps[++ne] = $1 }
	if (!(key in seen_s)) { seen_s[key] = 1; nseed[$1]++; seeds[$1, nseed[$1]] = $2 }
}
END {
	nb = split("ecmp sincronia taccl cassini-lite", base, " ")
	ng = split(guards, gp, " ")
	runs = "ecmp,sincronia,taccl,cassini-lite,crux-full"
	for (g = 1; g <= ng; g++)
		runs = runs (g == ng ? " and " : ", ") gp[g]
	printf "{\n  \"description\": \"crux-sim, 5000 jobs over 14 days per seed; per seed %d runs: %s\",\n", ng + 1, runs
	printf "  \"command\": \"%s\",\n", cmd
	printf "  \"gain_kept\": \"(util - util(best baseline)) / (util(crux-full) - util(best baseline))\",\n"
	printf "  \"experiments\": [\n"
	for (x = 1; x <= ne; x++) {
		e = exps[x]
		printf "    {\"experiment\": \"%s\", \"seeds\": [\n", e
		for (k = 1; k <= nseed[e]; k++) {
			s = seeds[e, k]; key = e SUBSEP s
			bb = ""
			for (b = 1; b <= nb; b++)
				if ((key, base[b]) in util && (bb == "" || util[key, base[b]] > util[key, bb]))
					bb = base[b]
			ub = util[key, bb]; uf = util[key, "crux-full"]
			printf "      {\"seed\": %d, \"best_baseline\": \"%s\", \"%s\": {\"util\": %s, \"worst\": %s, \"p99\": %s}, \"crux-full\": {\"util\": %s, \"worst\": %s, \"p99\": %s}", \
				s, bb, bb, ub, worst[key, bb], p99[key, bb], uf, worst[key, "crux-full"], p99[key, "crux-full"]
			for (g = 1; g <= ng; g++) {
				pol = gp[g]; bound = substr(pol, index(pol, "@") + 1) + 0
				gk = uf > ub ? (util[key, pol] - ub) / (uf - ub) : 0
				wb = worst[key, pol] <= bound
				printf ", \"%s\": {\"util\": %s, \"worst\": %s, \"p99\": %s, \"gain_kept\": %.4f, \"within_bound\": %s}", \
					pol, util[key, pol], worst[key, pol], p99[key, pol], gk, wb ? "true" : "false"
				gains[e, pol, k] = gk; ws[e, pol, k] = worst[key, pol]
				printf "%-20s seed %3d  %-12s gain kept %6.1f %%  worst %.2fx (bound %g)%s\n", \
					e, s, pol, 100 * gk, worst[key, pol], bound, wb ? "" : "  ABOVE THE BOUND" > "/dev/stderr"
			}
			printf "}%s\n", k < nseed[e] ? "," : ""
		}
		printf "    ], \"summary\": {"
		for (g = 1; g <= ng; g++) {
			pol = gp[g]; bound = substr(pol, index(pol, "@") + 1) + 0
			n = nseed[e]; lo = 1e9; hi = -1e9; wmax = 0; ok = 0; sum = 0
			for (k = 1; k <= n; k++) {
				v = gains[e, pol, k]; arr[k] = v; sum += v
				if (v < lo) lo = v
				if (v > hi) hi = v
				if (v >= 0.9) ok++
				if (ws[e, pol, k] > wmax) wmax = ws[e, pol, k]
			}
			med = sorted_median(arr, n)
			printf "%s\"%s\": {\"seeds\": %d, \"gain_kept_median\": %.4f, \"gain_kept_mean\": %.4f, \"gain_kept_min\": %.4f, \"gain_kept_max\": %.4f, \"runs_at_least_0.9\": %d, \"worst\": %s, \"within_bound\": %s}", \
				(g > 1 ? ", " : ""), pol, n, med, sum / n, lo, hi, ok, wmax, (wmax <= bound ? "true" : "false")
			printf "%-20s %-12s seeds %d: gain kept median %.1f %% (mean %.1f, %.1f-%.1f), %d of %d runs >= 90 %%, worst %.2fx\n", \
				e, pol, n, 100 * med, 100 * sum / n, 100 * lo, 100 * hi, ok, n, wmax > "/dev/stderr"
		}
		printf "}}%s\n", x < ne ? "," : ""
	}
	printf "  ]\n}\n"
}' >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "guard-seeds: wrote $OUT"
