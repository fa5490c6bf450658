# Pairs of speedup bars with error bars.  In the paper report: for each
# published speedup, the paper's value (a range or an "up to" bound drawn as
# its error bar) next to tailsim's (error bar: the bootstrap 5-95% range over
# resampled prompts, when run).  In a comparison's report (`tailsim compare
# -o`): each policy's RL-step and rollout speedup over the first policy.
# Written by paper_report_write().
#
#   gnuplot -d -c reports/paper_bars.gp bars.dat bars.png ["title|legend a|legend b"]
#
# bars.dat: one line per label:
#   "label" a a_lo a_hi b b_lo b_hi
# Needs at least one line.  Without legends: "paper" (grey) and "tailsim"
# (blue); with them, blue and green.

dat = ARG1
out = ARG2
spec = (ARGC >= 3) ? ARG3 : "Speedups: paper vs tailsim"
i1 = strstrt(spec, "|")
ttl = (i1 > 0) ? spec[1 : i1 - 1] : spec
rest = (i1 > 0) ? spec[i1 + 1 :] : ""
i2 = strstrt(rest, "|")
la = (i2 > 0) ? rest[1 : i2 - 1] : "paper (range or bound as error bar)"
lb = (i2 > 0) ? rest[i2 + 1 :] : "tailsim (bootstrap 5-95% as error bar)"
ca = (i2 > 0) ? "#3b6fb6" : "#9a9a9a"
cb = (i2 > 0) ? "#2e9e4f" : "#3b6fb6"

stats dat using 2 nooutput
n = STATS_records
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
set yrange [0 : *]
set ytics out nomirror
set xtics out nomirror rotate by 25 right font ",10"
set grid ytics lc rgb "#dddddd"
set border 3
set bmargin 6
set key top right
set style data histogram
set style histogram errorbars gap 1.5 lw 1.5
set style fill solid 0.85 border lc rgb "#555555"
set boxwidth 0.9

plot dat using 2:3:4:xtic(1) lc rgb ca title la, \
     '' using 5:6:7 lc rgb cb title lb, \
     1 with lines dt 2 lc rgb "#333333" notitle
