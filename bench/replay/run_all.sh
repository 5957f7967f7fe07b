#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Reproduces every table of docs/results.md that comes from dtr-replay (run from the
# repository root after `ninja -C build`). One job at a time: the timings are single-core.
#   DTR_SHARED: the shared data (default ../shared); LOGS: the published DTR logs (default
#   $DTR_SHARED/dtr-logs); REF: the published simulator's figures.
set -eu
DTR_SHARED=${DTR_SHARED:-../shared}
LOGS=${LOGS:-$DTR_SHARED/dtr-logs}
REF=${REF:-$DTR_SHARED/reference/simrd-paper-logs.json}
OUT=bench/replay/results
BIN=build/bench/replay/dtr-replay
mkdir -p "$OUT"
HS="--heuristic dtr --heuristic dtr_eqclass --heuristic dtr_local --heuristic msps --heuristic lru --heuristic largest --heuristic random"

# 1. Fidelity: every heuristic on the eight logs at the reference's nine ratios.
$BIN $HS --jobs 1 --json $OUT/paper-logs.json $LOGS/*.log > $OUT/paper-logs.txt
python3 bench/replay/compare.py $OUT/paper-logs.json "$REF" --markdown $OUT/paper-compare.md > $OUT/paper-compare.txt

# 2. Speed: the 72-replay sweep of dtr_eqclass and of dtr, one job, three times each
#    (wall time as the program reports it, CPU time from /usr/bin/time).
: > $OUT/speed.txt
speed_tmp=$(mktemp)
trap 'rm -f "$speed_tmp"' EXIT
for h in dtr_eqclass dtr; do
  for i in 1 2 3; do
    echo "uptime: $(uptime)" >> $OUT/speed.txt
    /usr/bin/time -f "cpu $h $i: %U s user %S s sys" -a -o $OUT/speed.txt \
      $BIN --heuristic $h --jobs 1 $LOGS/*.log > "$speed_tmp"
    echo "run $h $i: $(tail -1 "$speed_tmp")" >> $OUT/speed.txt
  done
done

# 3. Search strategies on the real logs (exhaustive = the fidelity run above).
for s in indexed sampled skip_small; do
  $BIN --heuristic dtr_eqclass --heuristic dtr_local --search $s --jobs 1 \
       --json $OUT/paper-search-$s.json $LOGS/*.log > $OUT/paper-search-$s.txt
done

# 4. Our own PyTorch traces, every named heuristic, default ratios.
$BIN $HS --jobs 1 --json $OUT/traces.json bench/trace/traces/*.log > $OUT/traces.txt
$BIN $HS --ratio 0.99 --ratio 0.98 --ratio 0.97 --ratio 0.96 --ratio 0.95 --ratio 0.93 --ratio 0.91 \
     --jobs 1 --json $OUT/traces-near-peak.json bench/trace/traces/latent-treelstm-t48-h128.log > $OUT/traces-near-peak.txt

# 5. The figure.
/usr/bin/python3 bench/replay/plot.py $OUT/paper-logs.json docs/figures/replay-slowdown.png --reference "$REF"

# 6. Fragmentation-aware eviction on a simulated region of exactly the budget (issue 13, item 3).
python3 bench/replay/fragmentation.py --bin $BIN --logs $LOGS --heuristic dtr_local --heuristic dtr_eqclass \
    --heuristic dtr --ratio 0.5 --ratio 0.4 --ratio 0.3 --ratio 0.25 --ratio 0.2 --placement --reserve 1,1.05,1.1,1.25,1.5,2 \
    --json $OUT/fragmentation.json > $OUT/fragmentation.txt

# 7. Offload to a simulated host tier (issue 13, item 4): the default policy and restore order,
#    without offload and with it at 25 and 50 GB/s (5 us per transfer), plus 50 GB/s with a
#    look-ahead of 8 records for prefetch; slowdowns, floors and what moved.
OFFLOAD_RATIOS="--ratio 0.9 --ratio 0.7 --ratio 0.5 --ratio 0.4 --ratio 0.3 --ratio 0.26 --ratio 0.25 --ratio 0.2 \
  --ratio 0.15 --ratio 0.12 --ratio 0.1 --ratio 0.08 --ratio 0.06 --ratio 0.05 --ratio 0.04 --ratio 0.03 --ratio 0.02"
OFFLOAD="$BIN --heuristic dtr_eqclass --restore-pins yield $OFFLOAD_RATIOS --jobs 1"
$OFFLOAD --json $OUT/offload-off.json $LOGS/*.log > /dev/null
$OFFLOAD --offload auto --offload-bandwidth 25e9 --offload-latency 5000 --json $OUT/offload-25.json $LOGS/*.log > /dev/null
$OFFLOAD --offload auto --offload-bandwidth 50e9 --offload-latency 5000 --json $OUT/offload-50.json $LOGS/*.log > /dev/null
$OFFLOAD --offload auto --offload-bandwidth 50e9 --offload-latency 5000 --prefetch 8 \
         --json $OUT/offload-50-prefetch.json $LOGS/*.log > /dev/null
#    Copies out ahead of eviction (storages that outlived 32 newer ones), alone and with released
#    storages kept (kept first).
for bw in 25 50; do
  $OFFLOAD --offload auto --offload-bandwidth ${bw}e9 --offload-latency 5000 --offload-ahead 32 \
           --json $OUT/offload-$bw-ahead32.json $LOGS/*.log > /dev/null
  $OFFLOAD --offload auto --offload-bandwidth ${bw}e9 --offload-latency 5000 --offload-ahead 32 \
           --dealloc keep --kept first --json $OUT/offload-$bw-ahead32-keep.json $LOGS/*.log > /dev/null
done
#    With both and a look-ahead of 128 records for prefetch (the look-ahead follows the log's
#    copies; a prefetch may drop kept storages to make room), and the look-ahead swept at 0.3
#    and 0.2.
mkdir -p $OUT/prefetch-sweep
for bw in 25 50; do
  $OFFLOAD --offload auto --offload-bandwidth ${bw}e9 --offload-latency 5000 --offload-ahead 32 \
           --dealloc keep --kept first --prefetch 128 \
           --json $OUT/offload-$bw-ahead32-keep-prefetch128.json $LOGS/*.log > /dev/null
  for n in 0 8 32 64 128 256 512; do
    $BIN --heuristic dtr_eqclass --restore-pins yield --ratio 0.3 --ratio 0.2 --jobs 1 \
         --offload auto --offload-bandwidth ${bw}e9 --offload-latency 5000 --offload-ahead 32 \
         --dealloc keep --kept first --prefetch $n \
         --json $OUT/prefetch-sweep/offload-$bw-ahead32-keep-prefetch$n.json $LOGS/*.log > /dev/null
  done
done
#    Copy-backs of storages with a host copy charged at a share (runtime_options::
#    copy_back_charge): the grid at 0.5 with the look-ahead of 128, and the share swept at 0.3
#    and 0.2, with that look-ahead and without one.
mkdir -p $OUT/charge-sweep
for bw in 25 50; do
  $OFFLOAD --offload auto --offload-bandwidth ${bw}e9 --offload-latency 5000 --offload-ahead 32 \
           --dealloc keep --kept first --prefetch 128 --copy-back-charge 0.5 \
           --json $OUT/offload-$bw-ahead32-keep-prefetch128-charge05.json $LOGS/*.log > /dev/null
  for c in 0.25 0.4 0.5 0.6 0.75 1; do
    $BIN --heuristic dtr_eqclass --restore-pins yield --ratio 0.3 --ratio 0.2 --jobs 1 \
         --offload auto --offload-bandwidth ${bw}e9 --offload-latency 5000 --offload-ahead 32 \
         --dealloc keep --kept first --prefetch 128 --copy-back-charge $c \
         --json $OUT/charge-sweep/offload-$bw-ahead32-keep-prefetch128-charge$c.json $LOGS/*.log > /dev/null
  done
  for n in 64 256 512; do
    $BIN --heuristic dtr_eqclass --restore-pins yield --ratio 0.3 --ratio 0.2 --jobs 1 \
         --offload auto --offload-bandwidth ${bw}e9 --offload-latency 5000 --offload-ahead 32 \
         --dealloc keep --kept first --prefetch $n --copy-back-charge 0.5 \
         --json $OUT/charge-sweep/offload-$bw-ahead32-keep-prefetch$n-charge0.5.json $LOGS/*.log > /dev/null
  done
  for c in 0.5 1; do
    $BIN --heuristic dtr_eqclass --restore-pins yield --ratio 0.3 --ratio 0.2 --jobs 1 \
         --offload auto --offload-bandwidth ${bw}e9 --offload-latency 5000 --offload-ahead 32 \
         --dealloc keep --kept first --copy-back-charge $c \
         --json $OUT/charge-sweep/offload-$bw-ahead32-keep-noprefetch-charge$c.json $LOGS/*.log > /dev/null
  done
done
DTR_SHARED=$DTR_SHARED python3 bench/replay/offload_table.py $OUT/offload-off.json "25 GB/s=$OUT/offload-25.json" \
    "50 GB/s=$OUT/offload-50.json" "50 GB/s, prefetch 8=$OUT/offload-50-prefetch.json" \
    "25 GB/s, ahead 32=$OUT/offload-25-ahead32.json" "50 GB/s, ahead 32=$OUT/offload-50-ahead32.json" \
    "25 GB/s, ahead 32, keep first=$OUT/offload-25-ahead32-keep.json" \
    "50 GB/s, ahead 32, keep first=$OUT/offload-50-ahead32-keep.json" \
    "25 GB/s, ahead 32, keep first, prefetch 128=$OUT/offload-25-ahead32-keep-prefetch128.json" \
    "50 GB/s, ahead 32, keep first, prefetch 128=$OUT/offload-50-ahead32-keep-prefetch128.json" \
    "25 GB/s, ahead 32, keep first, prefetch 128, charge 0.5=$OUT/offload-25-ahead32-keep-prefetch128-charge05.json" \
    "50 GB/s, ahead 32, keep first, prefetch 128, charge 0.5=$OUT/offload-50-ahead32-keep-prefetch128-charge05.json" \
    > $OUT/offload-tables.md

# 8. Floors (issue 13, item 5): the lowest finishing ratio on a 0.01 grid for the default and
#    dtr_held, under each restore discipline and with offload, beside each log's physical floor.
for h in dtr_eqclass dtr_held; do
  python3 bench/replay/floors.py --replay $BIN --heuristic $h \
      --config hold='--restore-pins hold' --config yield='--restore-pins yield' \
      --config 'offload 25 GB/s'='--restore-pins yield --offload auto --offload-bandwidth 25e9' \
      --config 'offload 50 GB/s'='--restore-pins yield --offload auto --offload-bandwidth 50e9' \
      --json $OUT/floors-$h.json $LOGS/*.log bench/trace/traces/*.log > $OUT/floors-$h.md
done

#    The floors with copies ahead, kept first and a look-ahead of 128, with copy-backs charged
#    in full and half (runtime_options::copy_back_charge).
C="--restore-pins yield --offload auto --offload-ahead 32 --dealloc keep --kept first --prefetch 128"
python3 bench/replay/floors.py --replay $BIN --heuristic dtr_eqclass \
    --config "offload 25 GB/s, prefetch 128=$C --offload-bandwidth 25e9" \
    --config "offload 25 GB/s, prefetch 128, charge 0.5=$C --offload-bandwidth 25e9 --copy-back-charge 0.5" \
    --config "offload 50 GB/s, prefetch 128=$C --offload-bandwidth 50e9" \
    --config "offload 50 GB/s, prefetch 128, charge 0.5=$C --offload-bandwidth 50e9 --copy-back-charge 0.5" \
    --json $OUT/floors-charge-dtr_eqclass.json $LOGS/*.log bench/trace/traces/*.log > $OUT/floors-charge-dtr_eqclass.md

# 9. The default (issue 13, item 2): dtr_held_bounded (dtr_held with walks of at most K = 256
#    visits) against dtr_eqclass and dtr_held, slowdowns at 0.5, 0.3 and 0.2 under the runtime's
#    restore (yield) and floors as in section 8; the table of docs/heuristics.md, "The default".
DEFAULT_RUNS="$BIN --heuristic dtr_eqclass --heuristic dtr_held --heuristic dtr_held_bounded \
  --restore-pins yield --ratio 0.5 --ratio 0.3 --ratio 0.2 --jobs 1"
$DEFAULT_RUNS --json $OUT/default-paper.json $LOGS/*.log > /dev/null
$DEFAULT_RUNS --json $OUT/default-traces.json bench/trace/traces/*.log > /dev/null
python3 bench/replay/floors.py --replay $BIN --heuristic dtr_held_bounded \
    --config hold='--restore-pins hold' --config yield='--restore-pins yield' \
    --config 'offload 25 GB/s'='--restore-pins yield --offload auto --offload-bandwidth 25e9' \
    --config 'offload 50 GB/s'='--restore-pins yield --offload auto --offload-bandwidth 50e9' \
    --json $OUT/floors-dtr_held_bounded.json $LOGS/*.log bench/trace/traces/*.log > $OUT/floors-dtr_held_bounded.md
DEFAULT_TABLE="python3 bench/replay/default_table.py --policy dtr_eqclass --policy dtr_held --policy dtr_held_bounded \
  --floors $OUT/floors-dtr_eqclass.json --floors $OUT/floors-dtr_held.json --floors $OUT/floors-dtr_held_bounded.json"
{ echo '## The paper logs'; echo; $DEFAULT_TABLE --cells $OUT/default-paper.json; echo
  echo '## Our traces'; echo; $DEFAULT_TABLE --cells $OUT/default-traces.json; } > $OUT/default.md
build/bench/micro/chain_upkeep --walk-limits 64,256 --json bench/micro/results/chain_upkeep.json > bench/micro/results/chain_upkeep.txt

# 10. Planned restores (restore_pins::planned) against yield_when_full, the default's release
#     (keep-once-bound), on the paper logs and our traces, and with offload at 50 GB/s (copies
#     ahead 32): docs/results.md, "Planned restores".
for p in yield planned; do
  PLANNED="$BIN --heuristic dtr_eqclass --heuristic dtr_held_bounded --restore-pins $p \
    --dealloc keep-once-bound --jobs 1"
  $PLANNED --ratio 0.5 --ratio 0.3 --ratio 0.2 --ratio 0.15 \
      --json $OUT/restore-planned-paper-$p.json $LOGS/*.log > /dev/null
  $PLANNED --ratio 0.5 --ratio 0.3 --ratio 0.2 \
      --json $OUT/restore-planned-traces-$p.json bench/trace/traces/*.log > /dev/null
  $PLANNED --offload auto --offload-bandwidth 50e9 --offload-latency 5000 --offload-ahead 32 \
      --ratio 0.3 --ratio 0.2 --ratio 0.15 --ratio 0.1 \
      --json $OUT/restore-planned-offload50-$p.json $LOGS/*.log > /dev/null
done

# 11. Steps (issue 33): today's default over one step against the step-aware policies over
#     three on the paper logs, Checkmate's graphs over one iteration and two, the overhead rows:
#     docs/results.md, "Steps"; steps.md holds every table.
DTR_SHARED="$DTR_SHARED" python3 bench/replay/steps_table.py --build build --out $OUT > /dev/null

# 12. How far from any schedule (issue 33): dtr-log-bound's floors and lower bounds on the
#     paper logs beside the step replays of section 11 (lower-bound.md holds the tables; its
#     prose quotes this run).
DTR_SHARED="$DTR_SHARED" python3 bench/replay/bound_table.py --build build --out $OUT > $OUT/lower-bound-tables.txt

# 13. Prefetch from the forecast (issue 33): the runtime's own prefetch (--prefetch-ahead)
#     against none and against the program's hints read off the log, three steps, with a tier:
#     docs/results.md, "Prefetch from the forecast"; forecast-prefetch/tables.md.
DTR_SHARED="$DTR_SHARED" python3 bench/replay/forecast_prefetch.py --build build \
    --out $OUT/forecast-prefetch > /dev/null
