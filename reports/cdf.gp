# Response-length CDF of one tailsim run: x = response length (tokens),
# y = fraction of responses no longer than x, with the p50, p90, p99 and
# maximum marked; the long tail is the slow climb of the last few percent.
# Written by report_write().
#
#   gnuplot -d -c reports/cdf.gp cdf.dat cdf.png ["title"]
#
# cdf.dat, block 0 (index 0): length_tokens fraction   (a right-continuous
#                             step function, one line per distinct length)
#          block 1 (index 1): label length_tokens fraction side   (p50 ... max;
#                             side 1: the next point is near, so this label
#                             goes right of and below its point, not left
#                             of and above it: p99 next to a capped max)
# Needs at least one response.

dat = ARG1
out = ARG2
ttl = (ARGC >= 3) ? ARG3 : "Response length CDF"

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1000, 600 noenhanced font "Sans,11"
} else {
    set terminal png size 1000, 600 noenhanced
}
set output out

set title ttl
set xlabel "response length (tokens)"
set ylabel "fraction of responses <= length"
set xrange [0 : *]
set yrange [0 : 1.05]
set ytics 0.1 out nomirror
set xtics out nomirror
set grid lc rgb "#dddddd"
set border 3
set key bottom right

plot dat index 0 using 1:2 with steps lw 2 lc rgb "#3b6fb6" title "responses", \
     dat index 1 using 2:(0):(0):3 with vectors nohead dt 2 lc rgb "#b03a2e" notitle, \
     dat index 1 using 2:($4 > 0 ? NaN : $3):(sprintf(" %s = %d", strcol(1), int($2))) \
         with labels point pt 7 ps 0.8 lc rgb "#b03a2e" right offset -0.5,0.6 \
         title "percentiles", \
     dat index 1 using 2:($4 > 0 ? $3 : NaN):(sprintf("%s = %d ", strcol(1), int($2))) \
         with labels point pt 7 ps 0.8 lc rgb "#b03a2e" left offset 0.5,-0.9 notitle
