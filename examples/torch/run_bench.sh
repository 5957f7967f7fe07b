#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The measurements in docs/torch.md and docs/results.md: the six models of issue 12 through
# python3 -m dtr_torch.bench, one torch thread, results as JSON and printed tables in
# examples/torch/results/.
# Usage: examples/torch/run_bench.sh BUILD_DIR [STEPS]   (BUILD_DIR configured with -Dtorch=enabled)
# STEPS (default 3) for the convolutional nets and the TreeLSTM; the GPT and vgg16 run 2
# steps (one warm-up, one timed: their steps take tens of seconds on one thread here).
set -eu
build=${1:?usage: run_bench.sh BUILD_DIR [STEPS]}
steps=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
out="$here/results"
mkdir -p "$out"
export PYTHONPATH="$here:$(cd "$build" && pwd)/examples/torch${PYTHONPATH:+:$PYTHONPATH}"
py=${PYTHON:-python3}
b() { name=$1; shift; "$py" -W ignore -m dtr_torch.bench --threads 1 --json "$out/$name.json" "$@" | tee "$out/$name.txt"; }
all=1,0.5,0.33,0.25
b resnet50-b32-overhead --model torchvision:resnet50 --batch 32 --size 128 --steps 4 --ratios 1
b treelstm-b4 --model treelstm --batch 4 --steps "$steps" --ratios $all --find-floor --floor-iters 4
b mobilenet_v2-b16 --model torchvision:mobilenet_v2 --batch 16 --size 128 --steps "$steps" --ratios $all --find-floor --floor-iters 4
b resnet50-b16 --model torchvision:resnet50 --batch 16 --size 128 --steps "$steps" --ratios $all --find-floor --floor-iters 4
b densenet121-b16 --model torchvision:densenet121 --batch 16 --size 128 --steps "$steps" --ratios $all --find-floor --floor-iters 4
b vgg16-b16 --model torchvision:vgg16 --batch 16 --size 128 --steps 2 --ratios $all --find-floor --floor-iters 4
b gpt-6x256-b8 --model gpt --batch 8 --steps 2 --ratios $all --find-floor --floor-iters 3
# The issue's second target ratio, max(0.33, 2f), where it is above 0.33 (f from the runs above).
b resnet50-b16-2f --model torchvision:resnet50 --batch 16 --size 128 --steps "$steps" --ratios 1,0.7
b gpt-6x256-b8-2f --model gpt --batch 8 --steps 2 --ratios 1,0.42
# densenet121 at 0.33 under dtr_held, the policy that recomputes least on the replayed logs.
b densenet121-b16-dtr_held --model torchvision:densenet121 --batch 16 --size 128 --steps "$steps" --ratios 1,0.33 --heuristic dtr_held
# Issue 12 item 3, densenet121 b16 at 0.33: where the time goes (the default configuration and
# parked released storages with dtr_held_bounded and CPU-clock costs), the two configurations
# against one plain run, interleaved with plain steps, and the bench with the parked one.
park="--cost-clock thread_cpu --park-released --heuristic dtr_held_bounded"
dn="--model torchvision:densenet121 --batch 16 --size 128"
"$py" -W ignore "$here/remat_profile.py" $dn --steps 3 --ratios 1,0.33 --json "$out/densenet121-b16-profile-default.json" | tee "$out/densenet121-b16-profile-default.txt"
"$py" -W ignore "$here/remat_profile.py" $dn --steps 3 --ratios 1,0.33 $park --json "$out/densenet121-b16-profile-parked.json" | tee "$out/densenet121-b16-profile-parked.txt"
"$py" -W ignore "$here/overhead.py" $dn --pairs 4 --ratio 0.33 | tee "$out/densenet121-b16-0.33-interleaved-default.txt"
"$py" -W ignore "$here/overhead.py" $dn --pairs 4 --ratio 0.33 $park | tee "$out/densenet121-b16-0.33-interleaved-parked.txt"
"$py" -W ignore "$here/compare_configs.py" $dn --steps 3 --ratios 1,0.33,0.25 --rounds 1 --config "default:" \
    --config "parked:$park" --json "$out/densenet121-b16-compare.json" | tee "$out/densenet121-b16-compare.txt"
# The levers table of docs/results.md (densenet121-b16-0.33-levers-interleaved-*.txt): the same
# overhead.py line with the flags each "###" line names, one run each, before parking was gated
# on the budget having bound; densenet121-b16-profile-parked-in-backward-eqclass.txt: remat_profile.py
# --ratios 0.33 --park-released with an extension that also parked backward's releases.
b densenet121-b16-parked $dn --steps "$steps" --ratios $all --find-floor --floor-iters 4 $park
b treelstm-b4-parked --model treelstm --batch 4 --steps "$steps" --ratios 1,0.906 --find-floor --floor-iters 3 $park
b resnet50-b16-parked --model torchvision:resnet50 --batch 16 --size 128 --steps "$steps" --ratios 1,0.531 $park
# The floors with a remat-time limit of 50x the plain run's CPU time (the default policy), at
# 1.25 f and near the floors above; the GPT also with one step (its own f: another peak).
tf50="--thrash-factor 50 --cost-clock thread_cpu"
b treelstm-b4-tf50 --model treelstm --batch 4 --steps 3 --ratios 0.84,0.875,0.906 $tf50
b resnet50-b16-tf50 --model torchvision:resnet50 --batch 16 --size 128 --steps 2 --ratios 0.435,0.5 $tf50
b densenet121-b16-tf50 $dn --steps 2 --ratios 0.179,0.219 $tf50
b gpt-6x256-b8-1step-tf50 --model gpt --batch 8 --steps 1 --ratios 0.2625 $tf50
# (run once here and stopped by hand after 11 minutes of CPU: gpt-6x256-b8-tf50-unfinished.txt)
b gpt-6x256-b8-tf50 --model gpt --batch 8 --steps 2 --ratios 0.2625 $tf50
# Offload to host memory (docs/torch.md, "Offload to host memory"): the six models with a host
# tier of 16 GB, the link measured once by the bench, CPU-clock costs; gradients and optimizer
# state may leave for the tier, parameters stay. mobilenet_v2 at batch 8, 96x96 with and
# without the tier (the first comparison made), the others as in the table above.
host="--cost-clock thread_cpu --host-memory 16000000000"
mkdir -p "$out/offload"
b offload/mobilenet_v2-none --model torchvision:mobilenet_v2 --batch 8 --size 96 --steps "$steps" --ratios 0.5,0.33,0.25 --cost-clock thread_cpu
b offload/mobilenet_v2-host --model torchvision:mobilenet_v2 --batch 8 --size 96 --steps "$steps" --ratios 0.5,0.33,0.25 --find-floor --floor-iters 4 $host
b offload/mobilenet_v2-b16-host --model torchvision:mobilenet_v2 --batch 16 --size 128 --steps "$steps" --ratios $all --find-floor --floor-iters 4 $host
b offload/resnet50-b16-host --model torchvision:resnet50 --batch 16 --size 128 --steps "$steps" --ratios $all --find-floor --floor-iters 4 $host
b offload/densenet121-b16-host $dn --steps "$steps" --ratios $all --find-floor --floor-iters 4 $host
b offload/treelstm-b4-host --model treelstm --batch 4 --steps "$steps" --ratios $all --find-floor --floor-iters 4 $host
b offload/vgg16-b16-host --model torchvision:vgg16 --batch 16 --size 128 --steps 2 --ratios $all --find-floor --floor-iters 4 $host
b offload/gpt-6x256-b8-host --model gpt --batch 8 --steps 2 --ratios $all --find-floor --floor-iters 3 $host
# The tier bound the bench prints since a81013e (the optimizer's in-place updates counted), from
# ratio-1 runs of the same configurations (tier-bounds-a81013e.txt).
{
    for m in "--model torchvision:resnet50 --batch 16 --size 128 --steps $steps" "$dn --steps $steps" \
        "--model torchvision:mobilenet_v2 --batch 8 --size 96 --steps $steps" \
        "--model treelstm --batch 4 --steps $steps" "--model gpt --batch 8 --steps 2" \
        "--model torchvision:vgg16 --batch 16 --size 128 --steps 2"; do
        # shellcheck disable=SC2086
        "$py" -W ignore -m dtr_torch.bench --threads 1 --ratios 1 $m $host --offload-bandwidth 2e10
        echo
    done
} | tee "$out/offload/tier-bounds-a81013e.txt"
# Interleaved at 0.33 with and without the tier, and at 1.0 (docs/results.md, "At 0.33 and at
# 1.0, interleaved, at c1a5d8f"): files named after the commit measured.
rev=${REV:-$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo local)}
ov() { name=$1; shift; "$py" -W ignore "$here/overhead.py" "$@" | tee "$out/$name-$rev.txt"; }
ov densenet121-b16-0.33-interleaved-default $dn --ratio 0.33 --pairs 4
ov offload/densenet121-b16-0.33-interleaved-host $dn --ratio 0.33 --pairs 4 $host
ov offload/resnet50-b16-0.33-interleaved-host --model torchvision:resnet50 --batch 16 --size 128 --ratio 0.33 --pairs 4 $host
ov offload/gpt-6x256-b8-0.33-interleaved-host --model gpt --batch 8 --ratio 0.33 --pairs 2 $host
ov gpt-6x256-b8-0.33-interleaved-default --model gpt --batch 8 --ratio 0.33 --pairs 2
ov resnet50-b32-overhead-interleaved --model torchvision:resnet50 --batch 32 --size 128 --pairs 4
ov gpt-6x256-b8-overhead-interleaved --model gpt --batch 8 --pairs 3
# The default's table on the bridge (docs/heuristics.md, "The default", "On the PyTorch bridge"):
# three policies at 0.5, 0.3 and 0.2, each model's runs against one plain run.
mkdir -p "$out/policies"
pol() { name=$1; shift; "$py" -W ignore "$here/compare_configs.py" --ratios 0.5,0.3,0.2 --rounds 1 \
    --config "dtr_eqclass:--heuristic dtr_eqclass" --config "dtr_held_bounded:--heuristic dtr_held_bounded" \
    --config "dtr_held:--heuristic dtr_held" --json "$out/policies/$name.json" "$@" | tee "$out/policies/$name.txt"; }
pol mobilenet_v2-b16 --model torchvision:mobilenet_v2 --batch 16 --size 128 --steps "$steps"
pol densenet121-b16 $dn --steps "$steps"
pol resnet50-b16 --model torchvision:resnet50 --batch 16 --size 128 --steps "$steps"
pol treelstm-b4 --model treelstm --batch 4 --steps "$steps"
pol vgg16-b16 --model torchvision:vgg16 --batch 16 --size 128 --steps 2
pol gpt-6x256-b8 --model gpt --batch 8 --steps 2
# Issue 33, the steady state: the bridge's default (indexed:dtr_next_use, repeat_costs="lowest")
# over 8 steps (the GPT 6, vgg16 4), costs on the thread's CPU clock, each model at
# max(0.33, 2f) and at ratios down to below its floor (the last ratio of each row list did not
# finish when measured: docs/results.md, "The bridge in the steady state"). The median of steps
# 2 and later is what a training loop repeats once the step is learned; each row's "per_step"
# holds every step's recomputations, forecast calls, insertions and withheld steps.
mkdir -p "$out/steady-state"
ss() { name=$1; shift; "$py" -W ignore -m dtr_torch.bench --threads 1 --cost-clock thread_cpu \
    --json "$out/steady-state/$name.json" "$@" | tee "$out/steady-state/$name.txt"; }
ss resnet50-b16 --model torchvision:resnet50 --batch 16 --size 128 --steps 8 --ratios 0.7,0.56,0.545,0.53
ss densenet121-b16 $dn --steps 8 --ratios 0.33,0.25,0.22,0.21
ss mobilenet_v2-b16 --model torchvision:mobilenet_v2 --batch 16 --size 128 --steps 8 --ratios 0.33,0.25,0.234
ss treelstm-b4 --model treelstm --batch 4 --steps 8 --ratios 1,0.94,0.9
ss gpt-6x256-b8 --model gpt --batch 8 --steps 6 --ratios 0.42,0.33,0.29,0.26
ss vgg16-b16 --model torchvision:vgg16 --batch 16 --size 128 --steps 4 --ratios 1,0.925,0.913
# The TreeLSTM over 320 steps, the default against its online policy alone, both at once (so
# that they share the machine's load): the forecast's tries (steps 2 and 287 when measured)
# against the online steps between them (docs/results.md, "The bridge in the steady state").
for h in dtr_next_use dtr_eqclass; do
    ss treelstm-b4-320steps-$h --model treelstm --batch 4 --steps 320 --ratios 0.94 \
        --heuristic indexed:$h > /dev/null &
done
wait
# The release modes side by side (docs/torch.md, park_released; docs/results.md, "The bridge on
# a quiet machine"): the bridge's default parks released storages only while the policy scores
# with the forecast ("following"), against never ("off") and in every step ("always").
mkdir -p "$out/steady-state-quiet"
pm() { name=$1; shift; "$py" -W ignore "$here/compare_configs.py" --rounds 1 \
    --config "off:--cost-clock thread_cpu --park-released off" \
    --config "always:--cost-clock thread_cpu --park-released always" \
    --config "following:--cost-clock thread_cpu --park-released following" \
    --json "$out/steady-state-quiet/$name-park-modes.json" "$@" | tee "$out/steady-state-quiet/$name-park-modes.txt"; }
pm treelstm-b4 --model treelstm --batch 4 --steps 8 --ratios 1,0.94
pm densenet121-b16 $dn --steps 6 --ratios 0.33,0.25,0.22
pm mobilenet_v2-b16 --model torchvision:mobilenet_v2 --batch 16 --size 128 --steps 6 --ratios 0.33,0.25
pm resnet50-b16 --model torchvision:resnet50 --batch 16 --size 128 --steps 6 --ratios 0.7,0.545
pm gpt-6x256-b8 --model gpt --batch 8 --steps 6 --ratios 0.42,0.33
pm vgg16-b16 --model torchvision:vgg16 --batch 16 --size 128 --steps 4 --ratios 0.925
# The bench's default (parking "following") at each model's max(0.33, 2f) and below, 8 steps
# (the GPT 6, vgg16 4), on a machine otherwise idle (docs/results.md, "The bridge on a quiet
# machine"); steady-state-quiet/*.json without the -park-modes suffix are the same runs with
# parking off, the default before.
mkdir -p "$out/steady-state-quiet/default"
qd() { name=$1; shift; "$py" -W ignore -m dtr_torch.bench --threads 1 --cost-clock thread_cpu \
    --json "$out/steady-state-quiet/default/$name.json" "$@" | tee "$out/steady-state-quiet/default/$name.txt"; }
qd densenet121-b16 $dn --steps 8 --ratios 0.33,0.25,0.22
qd mobilenet_v2-b16 --model torchvision:mobilenet_v2 --batch 16 --size 128 --steps 8 --ratios 0.33,0.25
qd resnet50-b16 --model torchvision:resnet50 --batch 16 --size 128 --steps 8 --ratios 0.7,0.545
qd gpt-6x256-b8 --model gpt --batch 8 --steps 6 --ratios 0.42,0.33
qd treelstm-b4 --model treelstm --batch 4 --steps 8 --ratios 1,0.94
qd vgg16-b16 --model torchvision:vgg16 --batch 16 --size 128 --steps 4 --ratios 1,0.925
