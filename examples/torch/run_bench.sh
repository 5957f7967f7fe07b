#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The measurements in docs/torch.md and docs/results.md: every model of issue 12 through
# python3 -m dtr_torch.bench, one torch thread, results as JSON in examples/torch/results/.
# Usage: examples/torch/run_bench.sh BUILD_DIR [STEPS]   (BUILD_DIR configured with -Dtorch=enabled)
set -eu
build=${1:?usage: run_bench.sh BUILD_DIR [STEPS]}
steps=${2:-2}
here=$(cd "$(dirname "$0")" && pwd)
out="$here/results"
mkdir -p "$out"
export PYTHONPATH="$here:$(cd "$build" && pwd)/examples/torch${PYTHONPATH:+:$PYTHONPATH}"
py=${PYTHON:-python3}
b() { name=$1; shift; "$py" -W ignore -m dtr_torch.bench --threads 1 --steps "$steps" --json "$out/$name.json" "$@" | tee "$out/$name.txt"; }
b resnet50-b16 --model torchvision:resnet50 --batch 16 --size 128 --ratios 1,0.5,0.33,0.25 --find-floor --floor-iters 3
b densenet121-b16 --model torchvision:densenet121 --batch 16 --size 128 --ratios 1,0.5,0.33,0.25 --find-floor --floor-iters 3
b mobilenet_v2-b16 --model torchvision:mobilenet_v2 --batch 16 --size 128 --ratios 1,0.5,0.33,0.25 --find-floor --floor-iters 3
b gpt-6x256-b8 --model gpt --batch 8 --ratios 1,0.5,0.33,0.25 --find-floor --floor-iters 3
b treelstm-b4 --model treelstm --batch 4 --ratios 1,0.5,0.33,0.25 --find-floor --floor-iters 3
b vgg16-b16 --model torchvision:vgg16 --batch 16 --size 128 --ratios 1,0.8,0.66 --find-floor --floor-iters 3
b resnet50-b32-overhead --model torchvision:resnet50 --batch 32 --size 128 --ratios 1
