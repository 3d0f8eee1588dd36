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

# The command that reproduces this file, with the subset options that were set.
CMD="sh sim/guard-seeds.sh BUILD $FIRST $LAST"
[ -n "${CRUX_SIM_OUT:-}" ] && CMD="CRUX_SIM_OUT=$OUT $CMD"
[ -n "${CRUX_SIM_GUARDS:-}" ] && CMD="CRUX_SIM_GUARDS='$GUARDS' $CMD"
[ -n "${CRUX_SIM_EXPERIMENTS:-}" ] && CMD="CRUX_SIM_EXPERIMENTS='$EXPERIMENTS' $CMD"

python3 "$(dirname "$0")/guard-seeds.py" "$DIR" "$OUT.tmp" "$CMD" "$FIRST" "$LAST" "$EXPERIMENTS" "$GUARDS"
mv "$OUT.tmp" "$OUT"
echo "guard-seeds: wrote $OUT"
