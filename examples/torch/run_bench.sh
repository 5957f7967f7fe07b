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
