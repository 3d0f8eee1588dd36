#!/bin/sh
# Placement x network policy matrix (issue 31): every placement (random, pack,
# Dally with auto-tuned timers, without preemption, with a fixed 30-minute
# timer; SJF-BCO) under every network policy, at offered loads where the
# queue is stable, over several seeds, on two fabrics. Writes, per fabric F,
#   bench/results/sim-placement-F.json  (medians and ranges; every run's figures)
#   bench/results/sim-placement-F.png   (utilisation and mean JCT, per load)
# Usage: sh sim/placement-matrix.sh [BUILD_DIR]   (default: build)
# A smaller cluster and trace than the two-week experiments, so that the whole
# matrix runs in minutes on a shared 2-core machine: a two-layer Clos of
# 16 ToRs x 4 hosts x 8 GPUs (512 GPUs; 200G hosts, 4 channels) with
# 16 x 25G uplinks per ToR (F = 2to1, jobs of at most 64 GPUs: two ToRs) or
# 16 x 12.5G (F = 4to1, jobs of at most 128 GPUs: four ToRs; congested);
# 400 jobs arriving over 2 days; every run until the last job ends (makespan).
# CRUX_SIM_SEEDS (1 2 3 4 5), CRUX_SIM_LOADS (0.6 0.8), CRUX_SIM_PLACEMENTS,
# CRUX_SIM_FABRICS (2to1 4to1), CRUX_SIM_PAR (runs at once, 1),
# CRUX_SIM_OUT (bench/results/sim-placement).
set -eu
BUILD=${1:-build}
SIM="$BUILD/sim/crux-sim"
OUT=${CRUX_SIM_OUT:-bench/results/sim-placement}
SEEDS=${CRUX_SIM_SEEDS:-1 2 3 4 5}
LOADS=${CRUX_SIM_LOADS:-0.6 0.8}
PLACEMENTS=${CRUX_SIM_PLACEMENTS:-random pack dally dally-np dally-t30m sjf-bco}
FABRICS=${CRUX_SIM_FABRICS:-2to1 4to1}
PAR=${CRUX_SIM_PAR:-1}
unset CRUX_MAX_SLOWDOWN CRUX_LEVEL_WEIGHTS

if [ ! -x "$SIM" ]; then
	echo "placement-matrix: $SIM not found; build first (meson compile -C $BUILD)" >&2
	exit 1
fi
command -v python3 >/dev/null || { echo "placement-matrix: needs python3" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$(dirname "$OUT")"

for fab in $FABRICS; do
case $fab in
2to1) fopt="--tor-gbps 25 --max-job-gpus 64" ftitle="2:1 Clos, jobs <= 64 GPUs" ;;
4to1) fopt="--tor-gbps 12.5 --max-job-gpus 128" ftitle="4:1 Clos, jobs <= 128 GPUs" ;;
*) echo "placement-matrix: fabric '$fab' is not 2to1 or 4to1" >&2; exit 1 ;;
esac
rm -f "$TMP"/*.json "$TMP"/*.txt "$TMP"/*.dat
# One line per run: placement load seed.
for p in $PLACEMENTS; do
	for l in $LOADS; do
		for s in $SEEDS; do
			echo "$p $l $s"
		done
	done
done >"$TMP/runs"

# shellcheck disable=SC2016
xargs -P "$PAR" -L 1 sh -c '
	sim=$0 tmp=$1 fopt=$2 p=$3 l=$4 s=$5
	case $p in
	dally-np) opt="--placement dally --no-preempt" ;;
	dally-t30m) opt="--placement dally --delay-timer-s 1800" ;;
	*) opt="--placement $p" ;;
	esac
	# shellcheck disable=SC2086
	nice -n 10 "$sim" run --no-progress --policy all --seed "$s" --load "$l" \
		--jobs 400 --days 2 --topo clos2 --tors 16 --hosts-per-tor 4 --channels 4 $fopt $opt \
		--experiment "placement-$p-$l-$s" --json "$tmp/$p-$l-$s.json" >"$tmp/$p-$l-$s.txt" ||
		{ echo "placement-matrix: run $p $l $s failed:" >&2; cat "$tmp/$p-$l-$s.txt" >&2; exit 255; }
	echo "placement-matrix: $p load $l seed $s done" >&2
' "$SIM" "$TMP" "$fopt" <"$TMP/runs"

# shellcheck disable=SC2086 # one argument per placement
python3 sim/placement-matrix.py "$TMP" "$OUT-$fab.json" "$TMP/plot" $PLACEMENTS
if command -v gnuplot >/dev/null; then
	for l in $LOADS; do
		[ -f "$TMP/plot-$l.dat" ] || continue
		echo "$l"
	done >"$TMP/loads"
	{
		echo "set terminal pngcairo size 1400,900 font ',10'"
		echo "set output '$OUT-$fab.png'"
		echo "set multiplot layout 2,$(wc -l <"$TMP/loads") title 'crux-sim: placement x network policy (512 GPUs, $ftitle, 400 jobs, median of seeds $SEEDS; bars: min-max)'"
		echo "set style data histograms"
		echo "set style histogram errorbars gap 1 lw 1"
		echo "set style fill solid 0.8 border -1"
		echo "set key outside right top vertical"
		echo "set xtics rotate by -20"
		echo "set grid ytics"
		# Row 1: utilisation (columns 2-4 of each placement), row 2: mean JCT (5-7).
		for metric in "2:GPU_utilisation_%" "5:mean_JCT_(h)"; do
			first=${metric%%:*}
			name=$(echo "${metric#*:}" | tr _ ' ')
			while read -r l; do
				echo "set title '$name, offered load $l'"
				echo "set yrange [0:*]"
				printf "plot"
				c=0
				for p in $PLACEMENTS; do
					[ $c -gt 0 ] && printf ","
					k=$((first + c * 6))
					printf " '%s' using %d:%d:%d:xtic(1) title '%s'" "$TMP/plot-$l.dat" \
						"$k" $((k + 1)) $((k + 2)) "$p"
					c=$((c + 1))
				done
				echo
			done <"$TMP/loads"
		done
		echo "unset multiplot"
	} >"$TMP/plot.gp"
	gnuplot "$TMP/plot.gp"
	echo "placement-matrix: wrote $OUT-$fab.json and $OUT-$fab.png"
else
	echo "placement-matrix: wrote $OUT-$fab.json (gnuplot not found: no plot)"
fi
done
