# A line figure of the paper report (accepted length vs draft depth and vs
# batch, throughput and speedup vs batch): one line per series.  Written by
# paper_report_write().
#
#   gnuplot -d -c reports/paper_xy.gp plot.dat plot.png "title|xlabel|ylabel|logx"
#
# plot.dat: one block per series (index i), opened by a line holding the
# series name in quotes, then lines "x y".  logx 1 draws x on a log2 axis.

dat = ARG1
out = ARG2
spec = (ARGC >= 3) ? ARG3 : "||| 0"
i1 = strstrt(spec, "|")
ttl = spec[1 : i1 - 1]
rest = spec[i1 + 1 :]
i2 = strstrt(rest, "|")
xl = rest[1 : i2 - 1]
rest = rest[i2 + 1 :]
i3 = strstrt(rest, "|")
yl = rest[1 : i3 - 1]
logx = int(rest[i3 + 1 :])

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 900, 560 noenhanced font "Sans,11"
} else {
    set terminal png size 900, 560 noenhanced
}
set output out

stats dat using 1 nooutput
nblocks = STATS_blocks

set title ttl
set xlabel xl
set ylabel yl
if (logx) { set logscale x 2 }
set xtics out nomirror
set ytics out nomirror
set yrange [0 : *]
set offsets graph 0.03, graph 0.03, graph 0.08, 0
set grid lc rgb "#dddddd"
set border 3
set key outside right top
set style data linespoints

plot for [i = 0 : nblocks - 1] dat index i using 1:2 lw 2 pt 7 ps 1.1 title columnheader(1)
