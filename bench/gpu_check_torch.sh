#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# gpu_check_torch.sh: the PyTorch bridge on a GPU, in one run, against that machine's own PyTorch.
#
#   bench/gpu_check_torch.sh OUTDIR    build, test, measure; results in OUTDIR
#
# Carry the Boost headers to a machine without them first: `bench/gpu_check.sh --pack-deps`
# here (build-gpu-deps/include; this script finds them there, or in $DTR_GPU_DEPS).
#
# Steps, each with its own time limit (total under 9 minutes):
#   1. environment (GPU, PyTorch, its CUDA)                             -> env.txt
#   2. build the extension with pip (setup.py, PyTorch's extension
#      builder, all cores) into a folder outside the checkout          -> build.log      (< 4 min)
#   3. the bridge's CUDA test (a CNN under a budget, bit-identical)     -> test_cuda.log
#   4. the per-operator overhead bench on CUDA (elementwise chain,
#      GPT step; plain PyTorch beside it)                               -> overhead.json/.log
#   5. the bench on resnet50 and the GPT at ratios 1, 0.5, 0.33,
#      every row checked bit for bit                                     -> resnet50.json, gpt.json, bench.log
#   gpu_check_torch.log holds everything; summary.txt the verdict of each step and the tables.
# Exit status: 0 when every step passed, 1 otherwise (a skipped CUDA test counts as failed).
#
# Environment: DTR_GPU_DEPS (header folder, default build-gpu-deps/include), DTR_TORCH_TARGET
# (where the package is built, default build-gpu-torch), PYTHON (default python3).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:?usage: bench/gpu_check_torch.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/gpu_check_torch.log
: >"$log"
exec > >(tee -a "$log") 2>&1

python=${PYTHON:-python3}
deps=${DTR_GPU_DEPS:-$root/build-gpu-deps/include}
target=${DTR_TORCH_TARGET:-$root/build-gpu-torch}
start=$(date +%s)
declare -a summary=()
failed=0
source "$root/bench/gpu_check_common.sh"

# ---- 1. environment -----------------------------------------------------------------------
{
    echo "date: $(date -u +%FT%TZ)"
    echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | head -1)"
    "$python" -c 'import sys, torch; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1
    echo "c++: $(c++ --version 2>&1 | head -1)"
    echo "ninja: $(ninja --version 2>&1 || echo missing)"
    echo "git: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
} >"$out/env.txt" 2>&1
cat "$out/env.txt"

# ---- 2. build -----------------------------------------------------------------------------
build_bridge() {
    set -euo pipefail
    rm -rf "$target"
    if [[ -d $deps ]]; then
        export BOOST_INCLUDEDIR=$deps
        echo "using packed headers from $deps"
    fi
    export MAX_JOBS=$(nproc 2>/dev/null || echo 8)
    # against the torch installed there; --target: nothing is installed into the system
    "$python" -m pip install --no-build-isolation --no-deps --no-compile --target "$target" \
        "$root/examples/torch"
}
export root deps target python
export -f build_bridge
run_step "build (pip, setup.py)" 240 "$out/build.log" bash -c build_bridge

# The package as pip built it; the tests' helpers from the checkout.
export PYTHONPATH=$target
export DTR_TORCH_THREADS=1

if [[ -f $target/dtr_torch/__init__.py ]]; then
    # ---- 3. the CUDA test -------------------------------------------------------------------
    run_step "test_cuda.py" 120 "$out/test_cuda.log" \
        bash -c "cd '$root/examples/torch/tests' && exec '$python' test_cuda.py"

    # ---- 4. per-operator overhead -----------------------------------------------------------
    run_step "op_overhead (cuda)" 90 "$out/overhead.log" \
        "$python" -m dtr_torch.op_overhead --device cuda --reps 7 --json "$out/overhead.json"

    # ---- 5. resnet50 and the GPT under budgets ----------------------------------------------
    run_step "bench resnet50 (cuda)" 150 "$out/bench.log" \
        "$python" -m dtr_torch.bench --device cuda --model torchvision:resnet50 --batch 32 --size 224 \
        --steps 4 --ratios 1,0.5,0.33 --json "$out/resnet50.json"
    run_step "bench GPT 6x256 (cuda)" 120 "$out/bench.log" \
        "$python" -m dtr_torch.bench --device cuda --model gpt --batch 8 --steps 4 --ratios 1,0.5,0.33 \
        --json "$out/gpt.json"
else
    summary+=("tests and benches: not run (build failed)")
    failed=1
fi

# ---- summary ------------------------------------------------------------------------------
{
    echo "gpu_check_torch: $(grep -m1 '^date' "$out/env.txt" || true)"
    grep -m1 "^gpu:" "$out/env.txt" || true
    grep -m1 "^torch" "$out/env.txt" || true
    printf '%s\n' "${summary[@]}"
    echo "total: $(elapsed)s; overall: $([[ $failed == 0 ]] && echo PASS || echo FAIL)"
    echo
    echo "per-operator overhead:"
    grep -E "µs|ms/step|workload" "$out/overhead.log" 2>/dev/null || echo "  (no output)"
    echo
    echo "bench (step time x plain PyTorch, bit-identical):"
    grep -E "^ *(ratio|[0-9]\.[0-9]+)|^# (plain|physical|cuda|torchvision|gpt)" "$out/bench.log" 2>/dev/null \
        || echo "  (no output)"
} >"$out/summary.txt"
echo
echo "================================ summary ================================"
cat "$out/summary.txt"
exit "$failed"
