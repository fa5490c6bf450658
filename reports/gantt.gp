# GPU timeline (Gantt chart) of one tailsim run: one row per GPU (GPU 0 at
# the top), x = seconds from the start of the run, each interval coloured by
# state (busy, idle, drafter training); dashed lines mark where each phase
# starts (of the first step, and where each later step starts) and their
# names label the top axis.  Written by report_write().
#
#   gnuplot -d -c reports/gantt.gp gantt.dat gantt.png ["title"]
#
# gantt.dat, block 0 (index 0): gpu phase state t0_s t1_s phase_name state_name
#                                 (state 0 = busy, 1 = idle, 2 = train)
#            block 1 (index 1): phase name t_start_s t_end_s
#                                 (a run of several RL steps: the first
#                                 step's phases, then -1 "step k" t t for
#                                 where each later step starts)
# Needs at least one interval.

dat = ARG1
out = ARG2
ttl = (ARGC >= 3) ? ARG3 : "GPU timeline"

stats dat index 0 using 1 nooutput
ngpu = int(STATS_max) + 1
stats dat index 0 using 4:5 nooutput
tmin = STATS_min_x
tmax = STATS_max_y
if (tmax <= tmin) { tmax = tmin + 1 }

# Rows shrink as GPUs are added; the image grows up to a limit.
h = 300 + 8 * ngpu
if (h < 480) { h = 480 }
if (h > 2400) { h = 2400 }
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
    set terminal pngcairo size 1400, h noenhanced font "Sans,11"
} else {
    set terminal png size 1400, h noenhanced
}
set output out

c_busy  = 0x3b6fb6
c_idle  = 0xf0b4b4
c_train = 0x2e9e4f
col(s) = (s == 0) ? c_busy : (s == 1) ? c_idle : c_train
# Half-height of a row: a visible gap between a few GPUs, none between many
# (the gaps would otherwise stripe the chart).
hh = (ngpu > 48) ? 0.5 : 0.42

set title ttl
set xlabel "time from the start of the run (s)"
set ylabel "GPU"
set xrange [tmin : tmax]
set yrange [ngpu - 0.5 : -0.5]
set ytics out nomirror
if (ngpu <= 16) { set ytics 1 }
set xtics out nomirror
set link x2
set x2tics out rotate by 30 left font ",10"
set grid xtics lc rgb "#dddddd" lw 1
set border 3
set style fill solid 1.0 noborder
set key outside below center horizontal samplen 3

plot dat index 0 using (($4+$5)/2):1:(($5-$4)/2):(hh):(col($3)) \
         with boxxyerror lc rgb variable notitle, \
     dat index 1 using 3:(-0.5):(0):(ngpu) with vectors nohead dt 2 lw 1.5 \
         lc rgb "#333333" notitle, \
     dat index 1 using (($3+$4)/2):(NaN):x2ticlabels(2) axes x2y1 notitle, \
     keyentry with boxes fc rgb "#3b6fb6" title "busy", \
     keyentry with boxes fc rgb "#f0b4b4" title "idle (bubble)", \
     keyentry with boxes fc rgb "#2e9e4f" title "drafter training", \
     keyentry with lines dt 2 lw 1.5 lc rgb "#333333" title "phase boundary"
