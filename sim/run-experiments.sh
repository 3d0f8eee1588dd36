#!/bin/sh
# Regenerates the crux-sim results committed under bench/results/:
#   sim-clos2-{pack,random}.json / -util.png / -slowdown.png
#   sim-dsided-{pack,random}.json / ...
#   sim-speed.json
# Usage: sh sim/run-experiments.sh [BUILD_DIR]   (default: build)
# CRUX_SIM_ONLY: a subset of the experiment names below (and/or "speed"),
# e.g. after a guard change only the experiments where the guard acts.
# Each experiment replays the same seeded workload (5,000 jobs over two
# weeks, offered load 1.0: the queue never empties, so JCT measures queue
# growth) under every policy, one seed; tens of minutes each on a loaded
# 2-core machine. The two-week tables these made before were withdrawn (old
# evaluator, Sincronia ranking no-traffic jobs first, one seed); the
# comparison the README reports is sim/sweep.py's (seeds, loads and
# fabrics swept).
set -eu
BUILD=${1:-build}
SIM="$BUILD/sim/crux-sim"
OUT=bench/results
SEED=${CRUX_SIM_SEED:-1}
# The guard variants are named in the policy list; the operator knobs would
# also bound the plain Crux policies.
unset CRUX_MAX_SLOWDOWN CRUX_LEVEL_WEIGHTS
# Every policy, then Crux-full with the fairness guard: equal level weights
# alone (/w), the bound at 4 and 2 on each job's mean slowdown, and the same
# bounds on every plan's prediction (/p, the previous guard). Promotion by
# measured slowdown alone: CRUX_SIM_POLICIES=crux-full~4,crux-full~2.
POLICIES=${CRUX_SIM_POLICIES:-all,crux-full/w,crux-full@4,crux-full@2,crux-full@4/p,crux-full@2/p}

if [ ! -x "$SIM" ]; then
	echo "run-experiments: $SIM not found; build first (meson compile -C $BUILD)" >&2
	exit 1
fi
mkdir -p "$OUT"

ONLY=${CRUX_SIM_ONLY:-}

wanted() {
	[ -z "$ONLY" ] && return 0
	case " $ONLY " in *" $1 "*) return 0 ;; esac
	return 1
}

run() {
	name=$1
	title=$2
	shift 2
	wanted "$name" || return 0
	echo "== $name: $title"
	"$SIM" run --policy "$POLICIES" --seed "$SEED" --experiment "$name" --title "$title" \
		--json "$OUT/sim-$name.json" --plot "$OUT/sim-$name" "$@"
}

run clos2-random "Two-layer Clos, scattered placement" --topo clos2 --placement random
run clos2-pack "Two-layer Clos, packed placement" --topo clos2 --placement pack
run dsided-random "Double-sided, scattered placement" --topo dsided --placement random
run dsided-pack "Double-sided, packed placement" --topo dsided --placement pack
# Sensitivity: fewer, denser ToRs (40 x 8 hosts, 16 x 50G uplinks: 2:1) where jobs share
# oversubscribed uplinks more. Its 4 channels of 50G each fill a 50G uplink, so this is where
# ECMP collisions weigh MOST (more channels per host pair spread a pair's traffic over more
# uplinks and shrink the ECMP-path baselines' loss; sim/sweep.py measures it).
run clos2-dense-random "Two-layer Clos, 40 ToR x 8 hosts (2:1), scattered" --topo clos2 \
	--tors 40 --hosts-per-tor 8 --tor-gbps 50 --channels 4 --placement random

wanted speed || exit 0
echo "== speed"
"$SIM" speed --policy crux-full --placement random --seed "$SEED" --json "$OUT/sim-speed.json"
