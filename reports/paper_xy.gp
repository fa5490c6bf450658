# A line figure of the paper report (accepted length vs draft depth and vs
# batch, throughput and speedup vs batch): one line per series.  Written by
# paper_report_write().
#
#   gnuplot -d -c reports/paper_xy.gp plot.dat plot.png "title|xlabel|ylabel|logx|kinds"
#
# plot.dat: one block per series (index i), opened by a line holding the
# series name in quotes, then lines "x y".  logx 1 draws x on a log2 axis.
# kinds holds one digit per series: 0 a tailsim curve (line and points),
# 1 a published value (large red marker), 2 a reference line (grey, dashed).

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
rest = rest[i3 + 1 :]
i4 = strstrt(rest, "|")
logx = int(rest[1 : i4 - 1])
kinds = rest[i4 + 1 :]
kind(i) = (i < strlen(kinds)) ? int(kinds[i + 1 : i + 1]) : 0

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
set offsets graph 0.03, graph 0.03, graph 0.22, 0  # headroom for the key
set grid lc rgb "#dddddd"
set border 3
set key inside right top box opaque
set linetype 1 lc rgb "#3b6fb6" lw 2 pt 7 ps 1.1 dt 1
set linetype 2 lc rgb "#b03a2e" lw 2 pt 9 ps 2.4 dt 1
set linetype 3 lc rgb "#777777" lw 1.5 pt 0 ps 0 dt 2
set linetype 4 lc rgb "#2e9e4f" lw 2 pt 5 ps 1.1 dt 1
set style data linespoints

# tailsim curves after the first take linetype 4 (green squares).
lt_of(i) = (kind(i) == 0) ? ((i == 0) ? 1 : 4) : kind(i) + 1
plot for [i = 0 : nblocks - 1] dat index i using 1:2 lt lt_of(i) title columnheader(1)
