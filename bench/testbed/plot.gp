# SPDX-License-Identifier: Apache-2.0
# The testbed's result at a glance (gnuplot; run.sh passes datadir, outfile, scen,
# narms and arm1..arm3, the arms' names: none, crux, paths).
# Left: cluster GPU utilization per arm (mean, error bar = stdev over runs).
# Middle: JCT of every job per arm. Right: per-second cluster utilization of
# the first run of each arm.
label(a) = (a eq "none" ? "no scheduling" : a eq "crux" ? "Crux" : a eq "paths" ? "Crux + paths" : a)
set terminal pngcairo size 1500,520 font "Sans,11"
set output outfile
set multiplot layout 1,3 title sprintf("Crux testbed (%s scenario): %s", scen, \
	narms > 2 ? label(arm1)." vs ".label(arm2)." vs ".label(arm3) : narms > 1 ? label(arm1)." vs ".label(arm2) : label(arm1)) font "Sans,14"

set style fill solid 0.85 border -1
set grid ytics lc rgb "#dddddd"
set key top left

# 1. Utilization
set title "Cluster GPU utilization (higher is better)"
set ylabel "GPU utilization (%)"
set yrange [0:*]
set boxwidth 0.6
set xrange [-0.6:narms - 0.4]
set yrange [*:*]
stats datadir."/util.dat" using 2 nooutput
set yrange [0:(STATS_max * 1.25 > 5 ? STATS_max * 1.25 : 5)]
set xtics nomirror font "Sans,12"
plot datadir."/util.dat" using 0:2:(0.6):xtic(1) with boxes lc rgb "#4c72b0" notitle, \
     "" using 0:2:3 with yerrorbars lc rgb "black" pt 0 notitle, \
     "" using 0:($2+$3+1):(sprintf("%.1f%%", $2)) with labels offset 0,0.6 notitle

# 2. JCT per job
set title "Job completion time (lower is better)"
set ylabel "JCT (s)"
set xrange [*:*]
set yrange [*:*]
stats datadir."/jct.dat" using 2 nooutput
jmax = STATS_max
if (narms > 1) {
	stats datadir."/jct.dat" using 4 nooutput
	jmax = (STATS_max > jmax ? STATS_max : jmax)
}
if (narms > 2) {
	stats datadir."/jct.dat" using 6 nooutput
	jmax = (STATS_max > jmax ? STATS_max : jmax)
}
set yrange [0:jmax * 1.3]
set key top center horizontal
set style data histograms
set style histogram errorbars gap 1.5 lw 1
set boxwidth 0.9
set xtics nomirror font "Sans,9"
set bmargin 4
if (narms > 2) {
	plot datadir."/jct.dat" using 2:3:xtic(1) title label(arm1) lc rgb "#dd8452", \
	     "" using 4:5 title label(arm2) lc rgb "#55a868", \
	     "" using 6:7 title label(arm3) lc rgb "#8172b2"
} else { if (narms > 1) {
	plot datadir."/jct.dat" using 2:3:xtic(1) title label(arm1) lc rgb "#dd8452", \
	     "" using 4:5 title label(arm2) lc rgb "#55a868"
} else {
	plot datadir."/jct.dat" using 2:3:xtic(1) title arm1 lc rgb "#dd8452"
} }

# 3. Timeline
set title "Per-second cluster GPU utilization (first run)"
set bmargin 3
set style data lines
set xlabel "time in the contention window (s)"
set ylabel "GPU utilization (%)"
set yrange [0:100]
set xtics auto font "Sans,10"
if (narms > 2) {
	plot datadir."/timeline.dat" index 0 using 1:2 with lines lw 2 lc rgb "#dd8452" title label(arm1), \
	     "" index 1 using 1:2 with lines lw 2 lc rgb "#55a868" title label(arm2), \
	     "" index 2 using 1:2 with lines lw 2 lc rgb "#8172b2" title label(arm3)
} else { if (narms > 1) {
	plot datadir."/timeline.dat" index 0 using 1:2 with lines lw 2 lc rgb "#dd8452" title label(arm1), \
	     "" index 1 using 1:2 with lines lw 2 lc rgb "#55a868" title label(arm2)
} else {
	plot datadir."/timeline.dat" index 0 using 1:2 with lines lw 2 lc rgb "#dd8452" title arm1
} }

unset multiplot
