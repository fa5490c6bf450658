# DCP and the data distribution: speedup over bucket parallel of each
# strategy (top) and bucket parallel's imbalance (bottom) against the share
# of long sequences (patch tokens in sequences of >= 54,000 tokens, percent),
# the scenario's video mix moved from short- to long-dominated.  Written by
# dcp_dist_figure_write() from `tailsim dcp SCENARIO --sweep-dist -o DIR`.
#
#   gnuplot -d -c reports/dcp_dist.gp dcp_dist.dat dcp_dist.png ["title"]
#
# dcp_dist.dat: one block per strategy (index i), each opened by a header
# line "name speedup" and holding "long_percent speedup" lines; the last
# block, "bucket_imbalance imbalance_percent", holds "long_percent
# imbalance_percent".

dat = ARG1
out = ARG2
ttl = (ARGC >= 3) ? ARG3 : "Speedup and bucket imbalance vs share of long sequences"

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 900, 760 noenhanced font "Sans,11"
} else {
    set terminal png size 900, 760 noenhanced
}
set output out

stats dat using 1 nooutput
nblocks = STATS_blocks

set multiplot layout 2, 1 title ttl
set grid ytics lc rgb "#dddddd"
set border 3
set xtics out nomirror
set ytics out nomirror
set key outside right top
set style data linespoints
set xrange [0 : 100]

set ylabel "speedup over bucket (x)"
set yrange [1 : *]
plot for [i = 0 : nblocks - 2] dat index i using 1:2 lw 2 pt 7 ps 1.1 title columnheader(1)

set xlabel "share of long sequences (% of patch tokens)"
set ylabel "bucket imbalance (%)"
set yrange [0 : *]
plot dat index (nblocks - 1) using 1:2 lw 2 pt 5 ps 1.1 lc rgb "#444444" title columnheader(1)

unset multiplot
