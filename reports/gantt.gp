# GPU timeline (Gantt chart) of one tailsim run: one row per GPU (GPU 0 at
# the top), x = seconds from the start of the run, each interval coloured by
# state (busy, idle, drafter training); dashed lines mark where each phase
# starts (of the first step, and where each later step starts); each name
# sits in a band over the chart, centred over a grey line spanning its
# phase, at the height gantt.dat gives it so that no two names overlap
# (short phases such as old_logp and ref).  A multi-turn run adds, under
# the GPUs, a row per trajectory that finished last (the critical path
# first): its turns' queue waits and generation, its tool calls and tool-slot
# waits.
# Written by report_write().
#
#   gnuplot -d -c reports/gantt.gp gantt.dat gantt.png ["title" [xmax_s]]
#
# xmax_s: the time axis runs to this (when beyond the run's end), so that a
# comparison's charts share one axis; read as a number only.
# gantt.dat, block 0 (index 0): gpu phase state t0_s t1_s phase_name state_name
#                                 (state 0 = busy, 1 = idle, 2 = train)
#            block 1 (index 1): phase name t_start_s t_end_s label_level
#                                 (a run of several RL steps: the first
#                                 step's phases, then -1 "step k" t t for
#                                 where each later step starts; by time)
#            block 2 (index 2): rank kind t0_s t1_s response turn kind_name
#                                 (kind 0 queue, 1 generate, 2 tool_queue,
#                                 3 tool; one line of rank -1 when none)
# Needs at least one interval.

dat = ARG1
out = ARG2
ttl = (ARGC >= 3) ? ARG3 : "GPU timeline"

stats dat index 0 using 1 nooutput
ngpu = int(STATS_max) + 1
stats dat index 0 using 4:5 nooutput
tmin = STATS_min_x
tmax = STATS_max_y
if (ARGC >= 4) { xm = ARG4 + 0.0; if (xm > tmax) { tmax = xm } }
if (tmax <= tmin) { tmax = tmin + 1 }
stats dat index 1 using 5 nooutput
nlev = int(STATS_max) + 1
stats dat index 2 using 1 nooutput
ntj = int(STATS_max) + 1
# trajectory rows, under the GPUs: tr y-units each (a readable height
# however many GPUs), after a gap of half a row
tr = (ngpu > 16) ? ngpu / 16.0 : 1.0
ty0 = ngpu - 0.5 + 0.5 * tr
yc(k) = ty0 + tr * (k + 0.5)
ybot = (ntj > 0) ? ty0 + tr * ntj : ngpu - 0.5

# Rows shrink as GPUs are added; the image grows up to a limit.
h = 300 + 8 * ngpu
if (h < 480) { h = 480 }
if (h > 2400) { h = 2400 }
h = h + 40 * ntj
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
c_queue = 0xbbbbbb
c_gen   = 0x6a3d9a
c_toolq = 0xf5d04a
c_tool  = 0xff7f00
tcol(k) = (k == 0) ? c_queue : (k == 1) ? c_gen : (k == 2) ? c_toolq : c_tool
# Half-height of a row: a visible gap between a few GPUs, none between many
# (the gaps would otherwise stripe the chart).
hh = (ngpu > 48) ? 0.5 : 0.42

# The names' band over GPU 0: nlev lines of ~17 px, in rows of the y axis
# (the plot area is the image less ~170 px of title, labels and key).
lr = 17.0 * (ybot + 0.5) / (h - 170 - 17.0 * nlev)
top = -0.5 - lr * (nlev + 0.3)
yl(lev) = -0.5 - lr * (lev + 0.5)

set title ttl
set xlabel "time from the start of the run (s)"
set ylabel (ntj > 0) ? "GPU / trajectory" : "GPU"
set xrange [tmin : tmax]
set yrange [ybot : top]
set xtics out nomirror
yinc = (ngpu <= 16) ? 1 : 10 ** floor(log10(ngpu / 4.0))
set ytics 0, yinc, ngpu - 1 out nomirror
if (ntj > 0) {
    do for [k = 0:ntj - 1] {
        set ytics add (sprintf((k == 0) ? "crit." : "#%d", k) yc(k))
    }
}
set grid xtics lc rgb "#dddddd" lw 1
set border 3
set style fill solid 1.0 noborder
set key outside below center horizontal samplen 3

plot dat index 0 using (($4+$5)/2):1:(($5-$4)/2):(hh):(col($3)) \
         with boxxyerror lc rgb variable notitle, \
     dat index 2 using (($3+$4)/2):(($1 >= 0) ? yc($1) : NaN):(($4-$3)/2):(0.4 * tr):(tcol($2)) \
         with boxxyerror lc rgb variable notitle, \
     dat index 1 using 3:(-0.5):(0):(ngpu) with vectors nohead dt 2 lw 1.5 \
         lc rgb "#333333" notitle, \
     dat index 1 using 3:(yl($5) + 0.42 * lr):($4 - $3):(0) with vectors nohead \
         lw 2 lc rgb "#888888" notitle, \
     dat index 1 using (($3+$4)/2):(yl($5)):2 with labels center font ",10" notitle, \
     keyentry with boxes fc rgb "#3b6fb6" title "busy", \
     keyentry with boxes fc rgb "#f0b4b4" title "idle (bubble)", \
     keyentry with boxes fc rgb "#2e9e4f" title "drafter training", \
     keyentry with lines dt 2 lw 1.5 lc rgb "#333333" title "phase boundary", \
     keyentry with boxes fc rgb "#bbbbbb" title (ntj > 0 ? "turn queued" : ""), \
     keyentry with boxes fc rgb "#6a3d9a" title (ntj > 0 ? "turn generating" : ""), \
     keyentry with boxes fc rgb "#f5d04a" title (ntj > 0 ? "tool slot wait" : ""), \
     keyentry with boxes fc rgb "#ff7f00" title (ntj > 0 ? "tool call" : "")
