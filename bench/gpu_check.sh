#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# gpu_check.sh: the device checks of the CUDA backend, in one run on a machine with a GPU.
#
#   bench/gpu_check.sh OUTDIR          configure, build, test, run; results in OUTDIR
#   bench/gpu_check.sh --pack-deps [DIR]
#                                      on a development machine: copy the Boost and doctest
#                                      headers the CUDA targets and the PyTorch bridge include
#                                      (about 1 MB) into DIR
#                                      (default build-gpu-deps/include), for a GPU machine that
#                                      has neither; carry build-gpu-deps there
#
# Steps, each with its own time limit (total under 8 minutes):
#   1. environment (GPU, driver, nvcc, compilers)            -> env.txt
#   2. configure (Meson) and build only the targets needed;
#      if Meson cannot configure, build them directly          -> build.log      (< 3 min)
#   3. CUDA tests: error mapping, then the device tests      -> cuda_tests.log
#   4. examples/cuda_mlp at three budgets, then the full
#      sweep down to the lowest budget that works            -> cuda_mlp.log
#   5. per-call overhead of runtime::call on the device      -> call_overhead.log
#   gpu_check.log holds everything; summary.txt the verdict of each step.
# Exit status: 0 when every step passed, 1 otherwise (a skipped device test counts as failed:
# this script exists to run them).
#
# Environment: DTR_GPU_BUILD (build folder, default build-gpu; "direct" forces the direct
# build), DTR_GPU_DEPS (header folder from --pack-deps, default build-gpu-deps/include),
# CUDA_HOME (default /usr/local/cuda), DTR_GPU_ARCH (default: read from nvidia-smi, else 90).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cuda_home=${CUDA_HOME:-/usr/local/cuda}

# ---- --pack-deps ------------------------------------------------------------------------
if [[ ${1:-} == --pack-deps ]]; then
    dest=${2:-$root/build-gpu-deps/include}
    mkdir -p "$dest"
    sources=(tests/cuda/test_cuda_backend.cpp tests/cuda/test_cuda_error.cpp tests/cuda/cuda_main.cpp
             tests/doctest_main.cpp examples/cuda_mlp/main.cpp examples/cuda_mlp/call_overhead.cpp)
    cd "$root"
    # the dtr headers the PyTorch bridge includes (gpu_check_torch.sh builds it)
    bridge='#include <dtr/runtime.hpp>
#include <dtr/offload.hpp>
#include <dtr/heuristic/by_name.hpp>
#include <dtr/search/indexed.hpp>'
    headers=$({ for s in "${sources[@]}"; do
                    g++ -std=c++20 -M -Iinclude -Itests -Iexamples/cuda_mlp -I"$cuda_home/include" "$s"
                done
                g++ -std=c++20 -M -Iinclude -x c++ - <<<"$bridge"
              } | tr ' \\' '\n\n' | grep -E '/(boost|doctest)/' | sort -u)
    headers+=$'\n'/usr/include/boost/version.hpp  # Meson's Boost detection reads it
    count=0
    while read -r h; do
        [[ -n $h ]] || continue
        rel=${h#*/include/}
        mkdir -p "$dest/$(dirname "$rel")"
        cp "$h" "$dest/$rel"
        count=$((count + 1))
    done <<<"$headers"
    echo "packed $count headers ($(du -sh "$dest" | cut -f1)) into $dest"
    exit 0
fi

out=${1:?usage: bench/gpu_check.sh OUTDIR | --pack-deps [DIR]}
mkdir -p "$out"
out=$(cd "$out" && pwd)
log=$out/gpu_check.log
: >"$log"
exec > >(tee -a "$log") 2>&1

build=$root/build-gpu
[[ ${DTR_GPU_BUILD:-} == "" || ${DTR_GPU_BUILD:-} == direct ]] || build=$DTR_GPU_BUILD
deps=${DTR_GPU_DEPS:-$root/build-gpu-deps/include}
export LD_LIBRARY_PATH=$cuda_home/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$cuda_home/bin:$PATH
start=$(date +%s)
declare -a summary=()
failed=0

# elapsed, run_step: shared with gpu_check_torch.sh
source "$root/bench/gpu_check_common.sh"

# ---- 1. environment -----------------------------------------------------------------------
{
    echo "date: $(date -u +%FT%TZ)"
    echo "host: $(uname -a)"
    echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | head -1)"
    echo "nvidia-smi:"; nvidia-smi 2>&1 || true
    echo "nvcc:"; nvcc --version 2>&1 || true
    echo "c++: $(c++ --version 2>&1 | head -1)"
    echo "meson: $(meson --version 2>&1 || echo missing)"
    echo "ninja: $(ninja --version 2>&1 || echo missing)"
    echo "git: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?') $(git -C "$root" status --short 2>/dev/null | wc -l) changed files"
} >"$out/env.txt" 2>&1
cat "$out/env.txt"
arch=${DTR_GPU_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ' || true)}
[[ $arch =~ ^[0-9]+$ ]] || arch=90
echo "GPU architecture: sm_$arch"

# ---- 2. configure and build ---------------------------------------------------------------
# The build runs in a child bash (so that `timeout` can bound it): what it needs is exported.
export root cuda_home arch deps build
export bin=${build}-bin # the executables, outside OUTDIR: they are not results
export jobs=$(nproc 2>/dev/null || echo 8)
mkdir -p "$bin"

meson_build() {
    local targets=(tests/cuda/test_cuda_error tests/cuda/test_cuda_backend examples/cuda_mlp/cuda_mlp
                   examples/cuda_mlp/call_overhead)
    local args=(-Dcuda=enabled -Dtests=enabled -Dexamples=enabled -Dbenchmarks=disabled
                -Dbuildtype=release -Dgpu_arch="$arch")
    if [[ -d $deps ]]; then
        # Headers packed by --pack-deps: Boost through BOOST_ROOT, doctest on the include path.
        export BOOST_ROOT=${deps%/include}
        args+=(-Dcpp_args="-isystem$deps")
        echo "using packed headers from $deps"
    fi
    if [[ -d $build/meson-private ]]; then
        timeout 60 meson setup --wipe "$build" "$root" "${args[@]}"
    else
        timeout 60 meson setup "$build" "$root" "${args[@]}"
    fi
    ninja -C "$build" -j "$jobs" "${targets[@]}"
    local t
    for t in "${targets[@]}"; do ln -sf "$build/$t" "$bin/$(basename "$t")"; done
}

direct_build() {
    # The same four programs without Meson: for a machine whose Meson cannot configure the
    # project (a dependency it cannot detect, an option it does not know).
    local inc=(-I"$root/include" -I"$root/tests" -I"$root/examples/cuda_mlp" -isystem "$cuda_home/include")
    if [[ -d $deps ]]; then inc+=(-isystem "$deps"); fi
    local cxx=(c++ -std=c++20 -O2 -DNDEBUG "${inc[@]}")
    local link=(-L"$cuda_home/lib64" -Wl,-rpath,"$cuda_home/lib64" -lcublas -lcudart)
    local gencode=(-gencode="arch=compute_$arch,code=sm_$arch" -gencode="arch=compute_$arch,code=compute_$arch")
    rm -f "$bin"/*
    nvcc -std=c++20 -O3 "${gencode[@]}" -I"$root/examples/cuda_mlp" -c "$root/examples/cuda_mlp/kernels.cu" \
        -o "$bin/kernels.o" &
    "${cxx[@]}" "$root/tests/cuda/test_cuda_error.cpp" "$root/tests/doctest_main.cpp" "${link[@]}" \
        -o "$bin/test_cuda_error" &
    "${cxx[@]}" "$root/tests/cuda/test_cuda_backend.cpp" "$root/tests/cuda/cuda_main.cpp" "${link[@]}" \
        -o "$bin/test_cuda_backend" &
    "${cxx[@]}" -c "$root/examples/cuda_mlp/main.cpp" -o "$bin/main.o" &
    "${cxx[@]}" -c "$root/examples/cuda_mlp/call_overhead.cpp" -o "$bin/call_overhead.o" &
    local ok=0 i
    for i in 1 2 3 4 5; do wait -n || ok=1; done
    [[ $ok == 0 ]] || return 1
    "${cxx[@]}" "$bin/main.o" "$bin/kernels.o" "${link[@]}" -o "$bin/cuda_mlp"
    "${cxx[@]}" "$bin/call_overhead.o" "$bin/kernels.o" "${link[@]}" -o "$bin/call_overhead"
}

build_all() {
    set -euo pipefail
    if [[ ${DTR_GPU_BUILD:-} != direct ]] && command -v meson >/dev/null && command -v ninja >/dev/null; then
        if (meson_build); then return 0; fi
        echo "Meson build failed; building directly instead"
    fi
    direct_build
}
export -f meson_build direct_build build_all

run_step "build" 180 "$out/build.log" bash -c build_all

# ---- 3. CUDA tests ------------------------------------------------------------------------
if [[ -x $bin/test_cuda_backend ]]; then
    run_step "test: cuda_error" 60 "$out/cuda_tests.log" "$bin/test_cuda_error"
    run_step "test: cuda_backend (device)" 240 "$out/cuda_tests.log" "$bin/test_cuda_backend" --duration=true
else
    summary+=("tests: not run (build failed)")
    failed=1
fi

# ---- 4. the example -------------------------------------------------------------------------
if [[ -x $bin/cuda_mlp ]]; then
    run_step "cuda_mlp: 3 budgets" 90 "$out/cuda_mlp.log" "$bin/cuda_mlp" --budgets 1.0,0.6,0.4 --no-bisect
    run_step "cuda_mlp: sweep to the lowest" 150 "$out/cuda_mlp.log" "$bin/cuda_mlp"
else
    summary+=("cuda_mlp: not run (build failed)")
    failed=1
fi

# ---- 5. overhead --------------------------------------------------------------------------
if [[ -x $bin/call_overhead ]]; then
    run_step "call_overhead" 60 "$out/call_overhead.log" "$bin/call_overhead" 20000
else
    summary+=("call_overhead: not run (build failed)")
    failed=1
fi

# ---- summary ------------------------------------------------------------------------------
{
    echo "gpu_check: $(head -c 200 "$out/env.txt" | grep -m1 date || true)"
    grep -m1 "^gpu:" "$out/env.txt" || true
    printf '%s\n' "${summary[@]}"
    echo "total: $(elapsed)s; overall: $([[ $failed == 0 ]] && echo PASS || echo FAIL)"
    echo
    echo "cuda_mlp (3 budgets, then sweep):"
    grep -E "^(unconstrained|budget|bisect|run |lowest|final)" "$out/cuda_mlp.log" 2>/dev/null || echo "  (no output)"
    echo
    echo "call_overhead:"
    grep -E "ns/call" "$out/call_overhead.log" 2>/dev/null || echo "  (no output)"
    echo
    echo "device tests:"
    grep -E "test cases:|assertions:|SKIP|device programs|provisional" "$out/cuda_tests.log" 2>/dev/null || echo "  (no output)"
} >"$out/summary.txt"
echo
echo "================================ summary ================================"
cat "$out/summary.txt"
exit "$failed"
