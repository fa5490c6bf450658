# DCP imbalance vs GPU count: one line per strategy, x = GPUs (log2 axis:
# 8, 16, 32, 64, 128), y = imbalance (mean over GPUs of (slowest group -
# this GPU's busy time), over the slowest group's time, summed over the
# plan's steps), the same batch trace planned at each size.  Written by
# dcp_report_write() from a `tailsim dcp --scale --db` run.
#
#   gnuplot -d -c reports/dcp_imbalance.gp dcp_imbalance.dat dcp_imbalance.png ["title"]
#
# dcp_imbalance.dat: one block per strategy (index i), each opened by a
# comment line "# name" and holding lines "gpus imbalance_percent"; the
# first line of the file is "# strategies N".

dat = ARG1
out = ARG2
ttl = (ARGC >= 3) ? ARG3 : "Imbalance vs GPU count"

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 900, 560 noenhanced font "Sans,11"
} else {
    set terminal png size 900, 560 noenhanced
}
set output out

stats dat using 1 nooutput
nblocks = STATS_blocks

set title ttl
set xlabel "GPUs"
set ylabel "imbalance (%)"
set logscale x 2
set xrange [6 : 170]
set xtics (8, 16, 32, 64, 128) out nomirror
set ytics out nomirror
set yrange [0 : *]
set grid ytics lc rgb "#dddddd"
set border 3
set key outside right top
set style data linespoints

plot for [i = 0 : nblocks - 1] dat index i using 1:2 lw 2 pt 7 ps 1.1 title columnheader(1)
