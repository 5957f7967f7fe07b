#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runtime configurations side by side in one process, as dtr_torch.bench runs one: the plain
steps and the unlimited reference run once, then each configuration at each ratio, in turn,
for --rounds rounds (A, B, A, B, ...), every row against the same plain run.

    python3 examples/torch/compare_configs.py --model torchvision:densenet121 --batch 16 \\
        --size 128 --steps 3 --ratios 0.33 --rounds 2 \\
        --config "default:" \\
        --config "parked:--cost-clock thread_cpu --park-released --heuristic dtr_held_bounded"

A configuration is NAME:OPTIONS with the bench's runtime options (--heuristic, --cost-clock,
--park-released, --restore, --thrash-factor, --no-forecast-guard, --guard-recompute-only,
--deterministic-costs, --repeat-costs). Prints
the bench's table with a configuration column; --json writes the rows (each with "config").
"""

import argparse
import os
import shlex
import sys

import torch

import dtr_torch
from dtr_torch import bench as B


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--ratios", default="0.33")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    p.add_argument("--config", action="append", required=True, help="NAME:OPTIONS")
    p.add_argument("--json")
    a = p.parse_args()
    cp = argparse.ArgumentParser(prog="--config")
    cp.add_argument("--heuristic", default=dtr_torch.DEFAULT_HEURISTIC)
    cp.add_argument("--cost-clock", choices=("wall", "thread_cpu"), default="wall")
    B.add_park_released(cp)
    cp.add_argument("--restore", choices=("yield_when_full", "planned", "hold"), default="yield_when_full")
    cp.add_argument("--thrash-factor", type=float, default=4.0)
    cp.add_argument("--no-forecast-guard", action="store_true")
    cp.add_argument("--guard-recompute-only", action="store_true")
    cp.add_argument("--deterministic-costs", action="store_true")
    cp.add_argument("--repeat-costs", choices=("lowest", "measured"), default="lowest")
    configs = []
    for c in a.config:
        name, _, opts = c.partition(":")
        ns = cp.parse_args(shlex.split(opts))
        for k in ("model", "batch", "steps", "seed", "optimizer"):
            setattr(ns, k, getattr(a, k))
        # the bench's runs read these too: no host tier in a compared configuration
        ns.host_memory, ns.offload_bandwidth, ns.offload_latency_ns = None, None, 0.0
        ns.device = "cpu"
        configs.append((name, ns))
    torch.set_num_threads(1)
    factory = B._load_factory(a.model, a.size, a.classes)
    plain = B._train(factory, a.batch, a.steps, a.seed, a.optimizer)
    ref = dtr_torch.Runtime()
    unlimited = B._train(factory, a.batch, a.steps, a.seed, a.optimizer, ref)
    peak = unlimited.stats["peak_resident_bytes"]
    floor_bytes = unlimited.param_bytes + unlimited.state_bytes + unlimited.stats["max_op_bytes"]
    floor = (floor_bytes / peak, (floor_bytes + unlimited.param_bytes) / peak)
    if any(ns.deterministic_costs for _, ns in configs):
        det = B.deterministic_compute(factory, a.batch, a.steps, a.seed, a.optimizer)
        for _, ns in configs:
            ns.deterministic_compute = det
    print(f"# {a.model} batch {a.batch} steps {a.steps}, one torch thread; plain: median step "
          f"{B._median_after_warmup(plain.times) * 1e3:.1f} ms (CPU "
          f"{B._median_after_warmup(plain.cpu_times) * 1e3:.1f} ms); unlimited runtime peak {B._fmt_bytes(peak)}")
    for name, ns in configs:
        print(f"# config {name}: heuristic {ns.heuristic}, cost clock {ns.cost_clock}, park released "
              f"{ns.park_released}, restore {ns.restore}, thrash factor {ns.thrash_factor:g}"
              f"{', deterministic costs' if ns.deterministic_costs else ''}"
              f"{', measured costs in repeated steps' if ns.repeat_costs == 'measured' else ''}"
              f"{', forecast unguarded' if ns.no_forecast_guard else ''}"
              f"{', guard on recomputation only' if ns.guard_recompute_only else ''}")
    print(f"{'config':>10} {'round':>5} {'ratio':>7} {'budget':>9} {'status':>6} {'rt peak':>9} {'alloc pk':>9} "
          f"{'time x':>7} {'cpu x':>7} {'remats':>7} {'evicts':>7} {'equal':>5}")
    rows = []
    for rnd in range(a.rounds):
        for r in [float(x) for x in a.ratios.split(",")]:
            for name, ns in configs:
                row, _ = B._attempt(ns, factory, r, peak, plain, floor)
                row["config"], row["round"] = name, rnd
                rows.append(row)
                f = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
                bi = "-" if row["bit_identical"] is None else ("yes" if row["bit_identical"] else "NO")
                print(f"{name:>10} {rnd:>5} {r:>7.3f} {B._fmt_bytes(row['budget_bytes']):>9} {row['status']:>6} "
                      f"{B._fmt_bytes(row['runtime_peak_bytes']):>9} {B._fmt_bytes(row['allocator_peak_bytes']):>9} "
                      f"{f(row['step_time_ratio']):>7} {f(row['step_cpu_ratio']):>7} {str(row['remats']):>7} "
                      f"{str(row['evictions']):>7} {bi:>5}", flush=True)
                if row.get("error"):
                    print(f"           {row['status']}: {row['error'][:400]}", flush=True)
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")
    B.write_rows(a.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
