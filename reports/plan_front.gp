# Capacity plan of `tailsim plan`: every feasible configuration as a point
# (x = GPU-hours per 1,000 RL steps, y = step time), the Pareto front as a
# line, the step-time target as a dashed line and the cheapest configuration
# meeting it circled.  Every point is labelled: the front's in blue, left of
# and below their point (no configuration lies there: none dominates a front
# point), the others smaller, in grey, right of and below theirs (up to 40
# configurations; beyond that only the front's).  Written by plan_plot().
#
#   gnuplot -d -c reports/plan_front.gp plan.dat plan_front.png ["title"]
#
# plan.dat, block 0: gpu_hours step_s "label" excluded   (every feasible
#                    configuration; excluded 1: above --max-off-policy, drawn x)
#           block 1: the same for the front, by GPU-hours
#           block 2: gpu_hours step_s "label" target_s   (NaN point when none meets
#                    the target; target_s 0 when there is no target)
#           block 3: gpu_hours step_s "label"   (the configurations off the front)

dat = ARG1
out = ARG2
ttl = (ARGC >= 3) ? ARG3 : "Capacity plan"

if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1100, 650 noenhanced font "Sans,11"
} else {
    set terminal png size 1100, 650 noenhanced
}
set output out

set title ttl
set xlabel "GPU-hours per 1,000 RL steps"
set ylabel "RL step time (s)"
set grid lc rgb "#dddddd"
set border 3
set xtics out nomirror
set ytics out nomirror
set key top right

stats dat index 2 using 4 nooutput
tgt = STATS_max
stats dat index 0 using 4 nooutput
nexcl = STATS_sum
stats dat index 0 using 1:2 nooutput
nconf = STATS_records
yhi = (tgt > STATS_max_y) ? tgt : STATS_max_y
set xrange [0 : STATS_max_x * 1.08]
set yrange [0 : yhi * 1.12]

plot dat index 0 using 1:($4 > 0 ? 1/0 : $2) with points pt 7 ps 0.9 lc rgb "#9aa7b8" \
         title "configurations", \
     dat index 0 using 1:($4 > 0 ? $2 : 1/0) with points pt 2 ps 1.1 lc rgb "#9aa7b8" \
         title (nexcl > 0 ? "above the off-policy limit" : ""), \
     dat index 1 using 1:2 with linespoints lw 2 pt 7 ps 1.1 lc rgb "#3b6fb6" title "Pareto front", \
     dat index 1 using 1:2:3 with labels right offset -0.8,-0.7 font ",9" tc rgb "#3b6fb6" notitle, \
     dat index 3 using 1:(nconf <= 40 ? $2 : NaN):3 with labels left offset 0.8,-0.6 font ",8" \
         tc rgb "#7d8794" notitle, \
     (tgt > 0 ? tgt : 1/0) with lines dt 2 lw 1.5 lc rgb "#b03a2e" title "target step time", \
     dat index 2 using 1:2 with points pt 6 ps 3 lw 2 lc rgb "#b03a2e" title "cheapest meeting the target"
