# Pairs of speedup bars with error bars.  In the paper report: for each
# published speedup, the paper's value (a range drawn as its error bar; an
# "up to" bound drawn as a marker on a whisker from 0, labelled "up to", not
# as a bar) next to tailsim's (error bar: the bootstrap 5-95% range over
# resampled prompts, when run).  In a comparison's report (`tailsim compare
# -o`): each policy's RL-step and rollout speedup over the first policy.
# Written by paper_report_write(), which also writes the page's caption
# naming the two colours it passes here (one table in paper_report.c).
#
#   gnuplot -d -c reports/paper_bars.gp bars.dat bars.png \
#       ["title|legend a|legend b|colour a|colour b"]
#
# bars.dat: one line per label:
#   "label" a a_lo a_hi b b_lo b_hi a_bound
# a_bound 1: a is an "up to" bound (a = a_hi = the bound, a_lo = 0).
# Needs at least one line.  Colours are "#rrggbb" strings, used only as
# colours; without them grey and blue.

dat = ARG1
out = ARG2
spec = (ARGC >= 3) ? ARG3 : "Speedups: paper vs tailsim"
i1 = strstrt(spec, "|")
ttl = (i1 > 0) ? spec[1 : i1 - 1] : spec
rest = (i1 > 0) ? spec[i1 + 1 :] : ""
i2 = strstrt(rest, "|")
la = (i2 > 0) ? rest[1 : i2 - 1] : "paper (range as error bar)"
rest = (i2 > 0) ? rest[i2 + 1 :] : ""
i3 = strstrt(rest, "|")
lb = (i3 > 0) ? rest[1 : i3 - 1] : ((strlen(rest) > 0) ? rest : "tailsim (bootstrap 5-95% as error bar)")
rest = (i3 > 0) ? rest[i3 + 1 :] : ""
i4 = strstrt(rest, "|")
ca = (i4 > 0) ? rest[1 : i4 - 1] : "#9a9a9a"
cb = (i4 > 0) ? rest[i4 + 1 :] : "#3b6fb6"

stats dat using 2 nooutput
n = STATS_records
stats dat using 8 nooutput
nbound = STATS_sum
stats dat using 4 nooutput
ya = STATS_max
stats dat using 7 nooutput
yb = STATS_max
ymax = ((ya > yb) ? ya : yb) * 1.15
w = 260 + 110 * n
if (w < 900) { w = 900 }
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size w, 620 noenhanced font "Sans,11"
} else {
    set terminal png size w, 620 noenhanced
}
set output out

set title ttl
set ylabel "speedup (x)"
set xrange [-0.6 : n - 0.4]
set yrange [0 : ymax]
set ytics out nomirror
set xtics out nomirror rotate by 25 right font ",10"
set grid ytics lc rgb "#dddddd"
set border 3
set bmargin 6
set lmargin 16  # room for the first label, rotated
set key top right
set style fill solid 0.85 border lc rgb "#555555"
set boxwidth 0.38
set errorbars small

# bar a (left), bar b (right); a bound row's a is no bar but a marker.
# (The "up to" text is "" on other rows rather than a NaN point: gnuplot 5.4
# crashes on a labels plot of one NaN row.)
bar(v, bound) = (bound > 0) ? NaN : v
mark(v, bound) = (bound > 0) ? v : NaN
# an error bar only where there is a range (none: no dot on the bar's top)
err(v, lo, hi) = (hi > lo) ? v : NaN
plot dat using ($0 - 0.2):(bar($2, $8)):xtic(1) with boxes lc rgb ca title la, \
     '' using ($0 - 0.2):(err(bar($2, $8), $3, $4)):3:4 with yerrorbars lc rgb "#333333" pt 7 ps 0 lw 1.5 notitle, \
     '' using ($0 - 0.2):(mark($2, $8)):(0):(mark($2, $8)) with yerrorbars \
         lc rgb ca pt 11 ps 2.2 lw 2 title (nbound > 0 ? "paper: \"up to\" bound (whisker from 0)" : ""), \
     '' using ($0 - 0.2):2:($8 > 0 ? sprintf("up to %.2f", $2) : "") with labels \
         offset 0, 1.3 font ",9" notitle, \
     '' using ($0 + 0.2):5 with boxes lc rgb cb title lb, \
     '' using ($0 + 0.2):(err($5, $6, $7)):6:7 with yerrorbars lc rgb "#333333" pt 7 ps 0 lw 1.5 notitle, \
     1 with lines dt 2 lc rgb "#333333" notitle
