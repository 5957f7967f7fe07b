#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Where a bridged training step's time goes, per budget: the thread's CPU time of the timed
steps (after one warm-up) split into the kernels' first runs, the recomputations' kernels,
the runtime's own work (bookkeeping, victim search, the policy's hooks), the bridge's C++
around the runtime and the Python side; and the ATen operators recomputed, with their
count and CPU time. The extension's counters run on the thread's CPU clock here
(_dtr_torch.profile_ops(True)), so every figure is comparable with the bench's
step_cpu_ratio; the plain run is timed the same way (one torch thread).

    python3 examples/torch/remat_profile.py --model torchvision:densenet121 --batch 16 \\
        --size 128 --steps 3 --ratios 1,0.33 [--heuristic H] [--cost-clock thread_cpu] \\
        [--park-released] [--restore hold] [--json FILE]

Budgets are ratio x the unlimited runtime peak of the same steps (as in dtr_torch.bench,
whose reference run this repeats).
"""

import argparse
import gc
import statistics
import sys
import time

import torch

import dtr_torch
from dtr_torch._bridge import _ext
from dtr_torch.bench import _load_factory, add_park_released, write_rows

_STATS = ("rematerializations", "evictions", "eager_evictions", "victim_searches", "victim_search_ns",
          "heuristic_evaluations", "remat_cost_ns", "compute_cost_ns", "pin_yields", "parked_total",
          "calls", "operators_run")
_PROF = ("dispatch_ns", "kernel_ns", "runtime_call_ns", "recipe_ns", "recipe_kernel_ns",
         "remat_recipe_ns", "remat_kernel_ns", "stack_ns", "wrap_ns", "promote_ns", "follow_ns")


def train(factory, batch, steps, seed, runtime=None):
    """Steps as dtr_torch.bench trains them; per timed step the CPU time and, under a
    runtime, the deltas of its counters, the extension's profile and the per-operator one."""
    gc.collect()
    torch.manual_seed(seed)
    model, inputs, loss_fn = factory(batch)
    model.train()
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    torch.manual_seed(seed + 1)
    out = {"cpu": [], "wall": [], "stats": [], "prof": [], "ops": []}
    loss = None

    def step():
        nonlocal loss
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(*inputs))
        loss.backward()
        opt.step()

    def loop():
        for i in range(steps):
            s0 = runtime.stats() if runtime is not None else None
            _ext.reset_profile()
            t0, c0 = time.perf_counter(), time.thread_time()
            step()
            c1, t1 = time.thread_time(), time.perf_counter()
            out["cpu"].append(c1 - c0)
            out["wall"].append(t1 - t0)
            if runtime is not None:
                s1 = runtime.stats()
                out["stats"].append({k: s1[k] - s0[k] for k in _STATS})
                p = _ext.profile()
                out["prof"].append({k: p[k] for k in _PROF})
                out["ops"].append(_ext.profile_by_op())
            dtr_torch.materialize(loss.detach())

    _ext.profile_ops(True)
    try:
        if runtime is None:
            loop()
        else:
            with runtime:
                loop()
            out["peak"] = runtime.stats()["peak_resident_bytes"]
    finally:
        _ext.profile_ops(False)
    out["params"] = [p.detach().clone() for p in params]
    out["loss"] = dtr_torch.materialize(loss.detach())
    del model, inputs, loss_fn, opt, params, loss
    gc.collect()
    return out


def med(xs):
    xs = xs[1:] if len(xs) > 1 else xs
    return statistics.median(xs)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="torchvision:densenet121")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--ratios", default="1,0.33")
    p.add_argument("--heuristic", default="dtr_eqclass")
    p.add_argument("--cost-clock", choices=("wall", "thread_cpu", "bytes"), default="wall",
                   help="bytes: Runtime(deterministic_costs=True), the bytes an operator reads")
    add_park_released(p)
    p.add_argument("--restore", choices=("yield_when_full", "planned", "hold"), default="yield_when_full")
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json")
    a = p.parse_args()
    torch.set_num_threads(1)
    factory = _load_factory(a.model, a.size, a.classes)

    plain = train(factory, a.batch, a.steps, a.seed)
    ref = train(factory, a.batch, a.steps, a.seed, dtr_torch.Runtime(heuristic=a.heuristic))
    peak = ref["peak"]
    plain_cpu = med(plain["cpu"])
    print(f"# {a.model} batch {a.batch} steps {a.steps} heuristic {a.heuristic} cost-clock {a.cost_clock} "
          f"park-released {a.park_released} restore {a.restore}; one torch thread; "
          f"figures per timed step (median of steps 2..{a.steps}), thread CPU ms")
    print(f"# plain: {plain_cpu * 1e3:.1f} ms CPU ({med(plain['wall']) * 1e3:.1f} ms wall); unlimited runtime "
          f"peak {peak / 2**20:.1f} MiB")
    rows = []
    for ratio in [float(x) for x in a.ratios.split(",")]:
        rt = dtr_torch.Runtime(budget=int(ratio * peak), heuristic=a.heuristic,
                               cost_clock="wall" if a.cost_clock == "bytes" else a.cost_clock,
                               deterministic_costs=a.cost_clock == "bytes",
                               park_released=a.park_released, restore=a.restore)
        try:
            r = train(factory, a.batch, a.steps, a.seed, rt)
        except (dtr_torch.OutOfMemoryError, dtr_torch.ThrashingError) as e:
            print(f"ratio {ratio}: {type(e).__name__}: {e}")
            continue
        same = torch.equal(r["loss"], plain["loss"]) and all(
            torch.equal(x, y) for x, y in zip(r["params"], plain["params"]))
        # the timed step whose CPU time is the median
        timed = list(range(1, a.steps)) if a.steps > 1 else [0]
        i = sorted(timed, key=lambda k: r["cpu"][k])[len(timed) // 2]
        cpu, pr, st, ops = r["cpu"][i], r["prof"][i], r["stats"][i], r["ops"][i]
        ms = lambda ns: ns / 1e6  # noqa: E731
        first_kernels = pr["kernel_ns"] - pr["remat_kernel_ns"]
        remat_wrap = pr["remat_recipe_ns"] - pr["remat_kernel_ns"]
        recipe_wrap = pr["recipe_ns"] - pr["recipe_kernel_ns"]
        runtime_own = pr["runtime_call_ns"] - pr["recipe_ns"] - pr["remat_recipe_ns"]
        bridge_cpp = pr["dispatch_ns"] - pr["runtime_call_ns"] - (pr["kernel_ns"] - pr["recipe_kernel_ns"]
                                                                  - pr["remat_kernel_ns"])
        python_side = cpu * 1e9 - pr["dispatch_ns"]
        parts = [("kernels, first runs", first_kernels), ("kernels, recomputations", pr["remat_kernel_ns"]),
                 ("recipe wrapping, first runs", recipe_wrap), ("recipe wrapping, recomputations", remat_wrap),
                 ("runtime's own work (bookkeeping, policy hooks, victim search)", runtime_own),
                 ("bridge C++ outside the runtime (stack, wrap, promote, views)", bridge_cpp),
                 ("Python side (mode, autograd, wrappers, optimizer loop)", python_side)]
        print(f"\n## ratio {ratio:.3f}: budget {int(ratio * peak) / 2**20:.1f} MiB, step {cpu * 1e3:.1f} ms CPU = "
              f"{cpu / plain_cpu:.3f} x plain (this step; steps {', '.join(f'{c / plain_cpu:.3f}' for c in r['cpu'])}), "
              f"bit-identical {'yes' if same else 'NO'}")
        for name, ns in parts:
            print(f"  {name:66} {ms(ns):8.1f} ms  {ns / (plain_cpu * 1e9):6.3f} x plain")
        print(f"  victim search (wall, inside the runtime's own work)                {ms(st['victim_search_ns']):8.1f} ms  "
              f"({st['victim_searches']} searches, {st['heuristic_evaluations']} scores)")
        print(f"  remats {st['rematerializations']}, evictions {st['evictions']} (eager {st['eager_evictions']}), "
              f"recorded remat cost {ms(st['remat_cost_ns']):.1f} ms, pin yields {st['pin_yields']}, "
              f"parked {st['parked_total']}, runtime calls {st['calls']}")
        by = sorted(((k, v) for k, v in ops.items() if v[2]), key=lambda kv: -kv[1][3])
        tot = sum(v[3] for _, v in by)
        print(f"  recomputed operators (count this step / first runs, CPU ms, share of recomputation CPU):")
        for k, v in by[:a.top]:
            print(f"    {k:44} {v[2]:5d} / {v[0] - v[2]:5d}  {ms(v[3]):8.1f} ms  {v[3] / max(tot, 1):6.1%}")
        rows.append({"model": a.model, "ratio": ratio, "heuristic": a.heuristic, "cost_clock": a.cost_clock,
                     "park_released": a.park_released, "restore": a.restore, "plain_cpu_s": plain_cpu,
                     "step_cpu_s": cpu, "step_cpu_ratio": cpu / plain_cpu, "bit_identical": same,
                     "parts_ns": dict(parts), "stats": st, "profile": pr,
                     "recomputed": {k: {"remats": v[2], "remat_ns": v[3], "calls": v[0]} for k, v in by}})
        del r
    write_rows(a.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
