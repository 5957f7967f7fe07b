# SPDX-License-Identifier: Apache-2.0
"""Train any model under shrinking budgets through dtr_torch and compare with plain PyTorch.

    python3 -m dtr_torch.bench --model SPEC --batch B --steps N --ratios 1,0.5,0.33,0.25
        [--heuristic H] [--find-floor] [--json FILE] [--size S] [--classes C]
        [--cost-clock wall|thread_cpu] [--park-released [off|always|following]]
        [--restore yield_when_full|planned|hold]
        [--host-memory BYTES [--offload-bandwidth BYTES_PER_S]]

SPEC is ``torchvision:NAME`` (any torchvision classifier, random weights, ``--size`` x
``--size`` images, ``--classes`` classes), ``FILE.py:FACTORY`` where ``FACTORY(batch)``
returns ``(module, inputs_tuple, loss_fn)``, or one of the built-in models ``gpt``,
``treelstm``, ``resnet-narrow``, ``dropout-bn`` (dtr_torch.models).

The steps run once in plain PyTorch, once under a runtime without a limit (its peak is the
reference for the ratios), and once per ratio under ``budget = ratio x that peak``, from the
same seed and data. Each row: budget, runtime peak, measured allocator peak (every byte
PyTorch's CPU allocator held, parameters and data included), the plain run's allocator peak,
median step time relative to plain PyTorch (after a warm-up step), recomputations,
evictions, whether loss, gradients and parameters after the last step are bit-identical to
plain PyTorch (``torch.equal``), and the physical floor f = (parameters + optimizer state +
the largest single operator's inputs and outputs) / unlimited peak.

The reference (unlimited) run uses the runtime's defaults but for the heuristic: with
``--park-released`` an unlimited run would keep released storages resident, so its peak would
be no reference; the budgets in bytes are the same with and without the options.

With ``--host-memory`` the budgeted runs have a host tier: victims are copied out to host
memory when two transfers cost less than recomputing them, and three more columns give the
copies out, the copies back and the tier's peak bytes (outside the budget and outside the
allocator peak). The transfer model (bandwidth and latency) is measured once, before the
runs, unless ``--offload-bandwidth`` sets it.

A finished row's JSON also holds every step's CPU time (``step_cpu_s``), and every row in
``per_step`` each step's recomputations, recomputation and victim search time, forecast
calls, withheld steps, divergences and insertions (events the recorded step does not have,
skipped over; a stopped run's last entry: the step it stopped in, up to where it stopped):
which step learned the program, which ran with the forecast, which ran away.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import resource
import statistics
import sys
import time
from typing import Callable, List, Optional, Tuple

import torch

from . import DEFAULT_HEURISTIC, DEFAULT_PARK_RELEASED
from . import models as _models


def _load_factory(spec: str, size: int, classes: int) -> Callable[[int], tuple]:
    if spec.startswith("torchvision:"):
        name = spec.split(":", 1)[1]
        return lambda batch: _models.make_torchvision(name, batch, size, classes)
    builtin = {
        "gpt": lambda b: _models.make_gpt(batch=b),
        "gpt2": lambda b: _models.make_gpt(batch=b, layers=2, seq=512, d_model=128),
        "treelstm": lambda b: _models.make_treelstm(batch=b),
        "resnet-narrow": lambda b: _models.make_resnet(batch=b),
        "dropout-bn": lambda b: _models.make_dropout_bn(batch=b),
    }
    if spec in builtin:
        return builtin[spec]
    if ":" in spec:
        path, factory = spec.rsplit(":", 1)
        if not os.path.isfile(path):
            raise SystemExit(f"dtr_torch.bench: --model {spec}: no file {path}")
        mod_spec = importlib.util.spec_from_file_location("_dtr_bench_model", path)
        mod = importlib.util.module_from_spec(mod_spec)
        mod_spec.loader.exec_module(mod)
        fn = getattr(mod, factory, None)
        if fn is None:
            raise SystemExit(f"dtr_torch.bench: --model {spec}: {path} has no {factory}")
        return fn
    raise SystemExit(f"dtr_torch.bench: --model {spec}: expected torchvision:NAME, FILE.py:FACTORY "
                     f"or one of {', '.join(sorted(builtin))}")


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class _Run:
    """One training run: losses, final state, step times, peaks, runtime stats."""

    def __init__(self):
        self.loss: Optional[torch.Tensor] = None
        self.params: List[torch.Tensor] = []
        self.grads: List[Optional[torch.Tensor]] = []
        self.times: List[float] = []
        self.cpu_times: List[float] = []
        self.alloc_peak = 0
        self.stats: dict = {}
        # under a runtime: after each step, the counters of _STEP_COUNTERS (cumulative)
        self.step_counters: List[dict] = []
        self.state_bytes = 0
        self.param_bytes = 0


# The runtime's counters recorded after every step (a row's "per_step": each step's own
# share), to tell the step that learns, the steps the forecast ran and those the guard
# withheld it from apart.
_STEP_COUNTERS = ("rematerializations", "remat_cost_ns", "forecast_calls", "forecast_withheld",
                  "step_divergences", "step_insertions", "victim_search_ns")


def _train(factory, batch: int, steps: int, seed: int, optimizer: str, runtime=None,
           device: str = "cpu", run: Optional[_Run] = None) -> _Run:
    """Trains `steps` steps (under `runtime` if given) into `run` (a new _Run if None): a run
    that raises keeps, in the `run` passed, the step times and counters of its finished steps."""
    import dtr_torch
    gc.collect()
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    else:
        base = dtr_torch.allocator_stats()["current"]
        dtr_torch.reset_allocator_peak()
    torch.manual_seed(seed)
    if device == "cpu":
        model, inputs, loss_fn = factory(batch)
    else:
        # the model, its inputs and the loss's targets made on the device (PyTorch 2's
        # default-device context)
        with torch.device(device):
            model, inputs, loss_fn = factory(batch)
    model.train()
    params = list(model.parameters())
    if optimizer == "adam":
        opt = torch.optim.Adam(params, lr=1e-4)
    else:
        opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    torch.manual_seed(seed + 1)
    run = _Run() if run is None else run

    def loop():
        for _ in range(steps):
            t0 = time.perf_counter()
            c0 = time.thread_time()
            # set_to_none (PyTorch 2's default): gradients do not occupy memory through the
            # forward pass, in the plain run and under the bridge alike
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(*inputs))
            loss.backward()
            opt.step()
            if cuda:
                torch.cuda.synchronize()
            run.times.append(time.perf_counter() - t0)
            run.cpu_times.append(time.thread_time() - c0)
            run.loss = dtr_torch.materialize(loss.detach())  # as a user logging the loss would
            if runtime is not None:
                st = runtime.stats()
                run.step_counters.append({k: st[k] for k in _STEP_COUNTERS})

    if runtime is None:
        loop()
    else:
        try:
            with runtime:
                loop()
        finally:
            run.stats = runtime.stats()
    run.alloc_peak = (torch.cuda.max_memory_allocated() if cuda else dtr_torch.allocator_stats()["peak"]) - base
    run.loss = dtr_torch.materialize(run.loss)
    run.params = [p.detach().clone() for p in params]
    run.grads = [None if p.grad is None else p.grad.detach().clone() for p in params]
    run.param_bytes = sum(_nbytes(p) for p in params)
    run.state_bytes = sum(_nbytes(v) for s in opt.state.values() for v in s.values()
                          if isinstance(v, torch.Tensor))
    del model, inputs, loss_fn, opt, params
    gc.collect()
    return run


def _identical(a: _Run, b: _Run) -> bool:
    if not torch.equal(a.loss, b.loss):
        return False
    for x, y in zip(a.params, b.params):
        if not torch.equal(x, y):
            return False
    for x, y in zip(a.grads, b.grads):
        if (x is None) != (y is None) or (x is not None and not torch.equal(x, y)):
            return False
    return True


def _median_after_warmup(times: List[float]) -> float:
    return statistics.median(times[1:] if len(times) > 1 else times)


def _mean_after_warmup(times: List[float]) -> float:
    return statistics.fmean(times[1:] if len(times) > 1 else times)


def _per_step(cumulative: List[dict]) -> dict:
    """Each step's share of the counters recorded after every step: {counter: [per step]}."""
    out = {k: [] for k in _STEP_COUNTERS}
    prev = {k: 0 for k in _STEP_COUNTERS}
    for c in cumulative:
        for k in _STEP_COUNTERS:
            out[k].append(c[k] - prev[k])
        prev = c
    return out


def _row(model: str, ratio: float, budget: int, plain: _Run, peak: int, floor,
         run: Optional[_Run], status: str, error: str = "") -> dict:
    row = {"model": model, "ratio": ratio, "budget_bytes": budget, "status": status,
           "bit_identical": None, "step_time_ratio": None, "step_cpu_ratio": None, "runtime_peak_bytes": None,
           "allocator_peak_bytes": None, "plain_peak_bytes": plain.alloc_peak, "remats": None,
           "evictions": None, "physical_floor": floor[0], "physical_floor_with_grads": floor[1]}
    if run is not None and run.stats:
        row["runtime_peak_bytes"] = run.stats["peak_resident_bytes"]
        row["remats"] = run.stats["rematerializations"]
        row["evictions"] = run.stats["evictions"]
        row["eager_evictions"] = run.stats["eager_evictions"]
        row["remat_cost_ns"] = run.stats["remat_cost_ns"]
        row["victim_search_ns"] = run.stats["victim_search_ns"]
        row["heuristic_evaluations"] = run.stats["heuristic_evaluations"]
        # steps: calls that had the forecast, followed steps the guard ran without it
        for k in ("steps_learned", "step_divergences", "forecast_calls", "forecast_withheld"):
            row[k] = run.stats[k]
        # offload (--host-memory): 0 without a host tier
        row["offloads"] = run.stats["offloads"] + run.stats["offloads_clean"]
        row["constant_offloads"] = run.stats["constant_offloads"]  # gradients, optimizer state
        row["copy_backs"] = run.stats["copy_backs"]
        row["host_peak_bytes"] = run.stats["peak_host_bytes"]
        # every step, also in a run that stopped: its last entry is then the step it stopped
        # in, up to where it stopped (which step ran away)
        stopped_in = [{k: run.stats[k] for k in _STEP_COUNTERS}] if status != "ok" else []
        row["per_step"] = _per_step(run.step_counters + stopped_in)
    if status == "ok":
        row["bit_identical"] = _identical(plain, run)
        row["step_time_ratio"] = _median_after_warmup(run.times) / _median_after_warmup(plain.times)
        # the calling thread's CPU time (one torch thread: the kernels run on it, backward
        # included), far less sensitive than wall time to other processes on the machine
        row["step_cpu_ratio"] = _median_after_warmup(run.cpu_times) / _median_after_warmup(plain.cpu_times)
        # the mean counts the odd dear step a median hides (the forecast guard's tries)
        row["step_cpu_ratio_mean"] = _mean_after_warmup(run.cpu_times) / _mean_after_warmup(plain.cpu_times)
        row["step_cpu_s"] = run.cpu_times  # each step's, the first included
        row["allocator_peak_bytes"] = run.alloc_peak
    if error:
        row["error"] = error
    return row


def deterministic_compute(factory, batch: int, steps: int, seed: int, optimizer: str, device: str = "cpu") -> float:
    """What an unlimited run's operators cost under deterministic_costs (their unit: bytes read)."""
    import dtr_torch
    rt = dtr_torch.Runtime(deterministic_costs=True, device=device)
    return float(_train(factory, batch, steps, seed, optimizer, rt, device).stats["compute_cost_ns"])


def _attempt(args, factory, ratio: float, peak: int, plain: _Run, floor: float) -> Tuple[dict, Optional[_Run]]:
    row, run = _attempt_once(args, factory, ratio, peak, plain, floor)
    deterministic = getattr(args, "deterministic_costs", False)
    row.update(heuristic=args.heuristic, device=args.device, cost_clock=args.cost_clock, park_released=args.park_released,
               restore=args.restore, thrash_factor=args.thrash_factor, host_memory=args.host_memory,
               offload_bandwidth=args.offload_bandwidth, offload_latency_ns=args.offload_latency_ns,
               guard_forecast=not args.no_forecast_guard,
               guard_charges_search=not deterministic and not args.guard_recompute_only,
               deterministic_costs=deterministic, repeat_costs=getattr(args, "repeat_costs", "lowest"))
    if getattr(args, "tier_floor", None) is not None:
        row["physical_floor_with_tier"] = args.tier_floor
    return row, run


def _attempt_once(args, factory, ratio: float, peak: int, plain: _Run, floor: float) -> Tuple[dict, Optional[_Run]]:
    import dtr_torch
    budget = max(1, int(ratio * peak))
    deterministic = getattr(args, "deterministic_costs", False)
    if deterministic:
        # costs in the runtime's own unit (the bytes each operator reads): the limit is the
        # same multiple of what the unlimited run computed in that unit
        remat_limit = args.thrash_factor * args.deterministic_compute
    else:
        # the limit on the clock the costs are measured on
        remat_limit = args.thrash_factor * sum(plain.cpu_times if args.cost_clock == "thread_cpu"
                                               else plain.times) * 1e9
    rt = dtr_torch.Runtime(budget=budget, heuristic=args.heuristic, device=args.device,
                           remat_limit=remat_limit,
                           cost_clock=args.cost_clock, park_released=args.park_released,
                           restore=args.restore, host_memory=args.host_memory,
                           offload_bandwidth=args.offload_bandwidth,
                           offload_latency_ns=args.offload_latency_ns,
                           guard_forecast=not args.no_forecast_guard,
                           deterministic_costs=deterministic,
                           # search time is not in the deterministic unit: recomputation only
                           guard_charges_search=None if deterministic else not args.guard_recompute_only,
                           repeat_costs=getattr(args, "repeat_costs", "lowest"))
    run = _Run()
    try:
        _train(factory, args.batch, args.steps, args.seed, args.optimizer, rt, args.device, run)
        return _row(args.model, ratio, budget, plain, peak, floor, run, "ok"), run
    except dtr_torch.OutOfMemoryError as e:
        run.stats = rt.stats()
        return _row(args.model, ratio, budget, plain, peak, floor, run, "oom", str(e)), None
    except dtr_torch.ThrashingError as e:
        run.stats = rt.stats()
        return _row(args.model, ratio, budget, plain, peak, floor, run, "thrash", str(e)), None
    except Exception as e:  # noqa: BLE001 - a row, not a crash: the bench goes on
        run.stats = rt.stats()
        return _row(args.model, ratio, budget, plain, peak, floor, run, "error",
                    f"{type(e).__name__}: {e}"), None


def _fmt_bytes(n) -> str:
    return "-" if n is None else f"{n / 2**20:.1f}M"


def _print_row(r: dict) -> None:
    tr = "-" if r["step_time_ratio"] is None else f"{r['step_time_ratio']:.3f}"
    tc = "-" if r.get("step_cpu_ratio") is None else f"{r['step_cpu_ratio']:.3f}"
    bi = "-" if r["bit_identical"] is None else ("yes" if r["bit_identical"] else "NO")
    tag = " (floor)" if r.get("floor") else ""
    print(f"{r['ratio']:>7.3f}{tag:8} {_fmt_bytes(r['budget_bytes']):>9} {r['status']:>6} "
          f"{_fmt_bytes(r['runtime_peak_bytes']):>9} {_fmt_bytes(r['allocator_peak_bytes']):>9} "
          f"{_fmt_bytes(r['plain_peak_bytes']):>9} {tr:>7} {tc:>7} {str(r['remats']):>7} "
          f"{str(r['evictions']):>7} {bi:>5}"
          + (f" {r['offloads']:>6} {r['constant_offloads']:>6} {r['copy_backs']:>6} "
             f"{_fmt_bytes(r['host_peak_bytes']):>9}"
             if r.get("host_memory") and r.get("offloads") is not None else ""), flush=True)
    if r.get("error"):
        print(f"         {r['status']}: {r['error'][:400]}", flush=True)


def add_park_released(p: argparse.ArgumentParser) -> None:
    """--park-released [off|always|following] (dtr_torch.Runtime park_released): the bench's
    option, also taken by the measuring scripts beside the package."""
    p.add_argument("--park-released", nargs="?", const="always", default=DEFAULT_PARK_RELEASED,
                   choices=("off", "always", "following"),
                   help="released storages that records still read stay resident until evicted: only while the "
                   "policy scores with the forecast (following, the default), in every step (always, the bare "
                   "flag) or never (off) (dtr_torch.Runtime park_released)")


def write_rows(path: Optional[str], rows: list) -> None:
    """Writes `rows` as a JSON list to `path` (--json); nothing when `path` is empty. Shared by
    the bench and the profiling scripts beside it (compare_configs.py, remat_profile.py)."""
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m dtr_torch.bench", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="torchvision:NAME, FILE.py:FACTORY, or a built-in "
                   "(gpt, gpt2, treelstm, resnet-narrow, dropout-bn)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--ratios", default="1,0.5,0.33,0.25")
    p.add_argument("--heuristic", default=DEFAULT_HEURISTIC)
    p.add_argument("--find-floor", action="store_true", help="bisect the lowest ratio that finishes")
    p.add_argument("--floor-iters", type=int, default=6, help="bisection steps for --find-floor")
    p.add_argument("--json", help="write the rows here (a JSON list)")
    p.add_argument("--size", type=int, default=128, help="image size for torchvision models")
    p.add_argument("--classes", type=int, default=10, help="classes for torchvision models")
    p.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd", help="SGD with momentum 0.9, or Adam")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (fixed for comparability)")
    p.add_argument("--device", default="cpu", help="cpu, or cuda (PyTorch 2 with a GPU): where the model, its "
                   "inputs and the runtime's tensors live")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--thrash-factor", type=float, default=4.0,
                   help="status thrash when rematerialization time exceeds this many times the plain run's "
                   "(all its steps; wall time, or CPU time under --cost-clock thread_cpu)")
    p.add_argument("--no-forecast-guard", action="store_true",
                   help="give the forecast to every followed call (dtr_torch.Runtime guard_forecast=False)")
    p.add_argument("--guard-recompute-only", action="store_true",
                   help="the forecast guard compares recomputation only, not the runtime's victim search "
                   "time (dtr_torch.Runtime guard_charges_search=False)")
    p.add_argument("--cost-clock", choices=("wall", "thread_cpu"), default="wall",
                   help="operator costs as wall time or the calling thread's CPU time (dtr_torch.Runtime)")
    p.add_argument("--deterministic-costs", action="store_true",
                   help="operator costs as the bytes they read (dtr_torch.Runtime deterministic_costs): the "
                   "same decisions in every run, so that configurations differ by their policy, not by "
                   "timing noise; the forecast guard then compares recomputation only, and the thrash "
                   "limit is --thrash-factor times the unlimited run's costs in that unit")
    p.add_argument("--repeat-costs", choices=("lowest", "measured"), default="lowest",
                   help="what an operator repeating the recorded step records as its measured cost: the lowest "
                   "time measured at its place in the step, or this call's (dtr_torch.Runtime repeat_costs)")
    add_park_released(p)
    p.add_argument("--restore", choices=("yield_when_full", "planned", "hold"), default="yield_when_full",
                   help="runtime_options::restore")
    p.add_argument("--host-memory", type=int, default=None, metavar="BYTES",
                   help="a host tier of BYTES: victims are copied out to host memory when that is cheaper "
                   "than recomputing them (dtr_torch.Runtime host_memory; gradients and optimizer state may "
                   "leave too, parameters stay)")
    p.add_argument("--offload-bandwidth", type=float, default=None, metavar="BYTES_PER_S",
                   help="the host tier's transfer model (default: measured once, before the runs)")
    a = p.parse_args(argv)
    if a.host_memory is not None and a.host_memory <= 0:
        p.error("--host-memory must be positive")
    if a.offload_bandwidth is not None and (a.host_memory is None or not a.offload_bandwidth > 0):
        p.error("--offload-bandwidth needs --host-memory and must be positive")
    try:
        ratios = [float(x) for x in a.ratios.split(",") if x.strip()]
    except ValueError:
        p.error(f"--ratios {a.ratios!r}: expected a comma-separated list of numbers")
    if any(r <= 0 for r in ratios):
        p.error("--ratios must be positive")
    if a.steps < 1 or a.batch < 1:
        p.error("--steps and --batch must be at least 1")
    if a.device != "cpu":
        if not a.device.startswith("cuda") or not torch.cuda.is_available():
            p.error(f"--device {a.device}: cpu, or cuda with a GPU PyTorch can use")
        if not hasattr(torch.device(a.device), "__enter__"):
            p.error("--device cuda needs PyTorch 2 (the models are made under torch.device)")
        # deterministic kernels, so that the runs under the bridge can be compared bit for bit
        # (cuBLAS needs its workspace fixed before its first use; kernels without a
        # deterministic form warn instead of failing)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_num_threads(a.threads)
    import dtr_torch
    factory = _load_factory(a.model, a.size, a.classes)
    a.offload_latency_ns = 0.0
    if a.host_memory and a.offload_bandwidth is None:
        # measured once, so that every ratio's runtime has the same transfer model
        link = dtr_torch.Runtime(host_memory=a.host_memory, device=a.device).stats()
        a.offload_bandwidth, a.offload_latency_ns = link["offload_bandwidth"], link["offload_latency_ns"]

    plain = _train(factory, a.batch, a.steps, a.seed, a.optimizer, device=a.device)
    ref = dtr_torch.Runtime(heuristic=a.heuristic, device=a.device)
    unlimited = _train(factory, a.batch, a.steps, a.seed, a.optimizer, ref, a.device)
    peak = unlimited.stats["peak_resident_bytes"]
    if a.deterministic_costs:
        a.deterministic_compute = deterministic_compute(factory, a.batch, a.steps, a.seed, a.optimizer, a.device)
    floor_bytes = unlimited.param_bytes + unlimited.state_bytes + unlimited.stats["max_op_bytes"]
    floor = floor_bytes / peak
    # what the last step's end of backward must hold besides: the gradients (f leaves them out)
    floor_grads = (floor_bytes + unlimited.param_bytes) / peak
    print(f"# {a.model} batch {a.batch} steps {a.steps} heuristic {a.heuristic} device {a.device} threads {a.threads} "
          f"optimizer {a.optimizer} cost-clock {a.cost_clock} park-released {a.park_released} "
          f"restore {a.restore} thrash-factor {a.thrash_factor:g}"
          f"{' deterministic-costs' if a.deterministic_costs else ''}"
          f"{' repeat-costs measured' if a.repeat_costs == 'measured' else ''}"
          f"{' no-forecast-guard' if a.no_forecast_guard else ''}"
          f"{' guard-recompute-only' if a.guard_recompute_only else ''}"
          + (f" host-memory {_fmt_bytes(a.host_memory)}" if a.host_memory else ""))
    print(f"# plain: median step {_median_after_warmup(plain.times) * 1e3:.1f} ms "
          f"(CPU {_median_after_warmup(plain.cpu_times) * 1e3:.1f} ms), allocator peak "
          f"{_fmt_bytes(plain.alloc_peak)}; unlimited runtime: peak {_fmt_bytes(peak)}, step "
          f"{_median_after_warmup(unlimited.times) * 1e3:.1f} ms (CPU {_median_after_warmup(unlimited.cpu_times) * 1e3:.1f} ms), "
          f"allocator peak {_fmt_bytes(unlimited.alloc_peak)}, "
          f"bit-identical {'yes' if _identical(plain, unlimited) else 'NO'}")
    print(f"# physical floor f = (params {_fmt_bytes(unlimited.param_bytes)} + optimizer state "
          f"{_fmt_bytes(unlimited.state_bytes)} + largest operator {_fmt_bytes(unlimited.stats['max_op_bytes'])}) "
          f"/ peak = {floor:.3f}; with the gradients {floor_grads:.3f}")
    a.tier_floor = None
    if a.host_memory:
        # Gradients and optimizer state may leave for the tier (parameters stay: PyTorch holds
        # them), so the floor that binds a run with the tier is below f. What must stay
        # besides the parameters is the largest operator's inputs and outputs other than
        # parameters, the optimizer's in-place updates included (a gradient and a state
        # tensor at once).
        tier_op = unlimited.stats["max_tier_op_bytes"]
        a.tier_floor = (unlimited.param_bytes + tier_op) / peak
        print(f"# with the host tier, gradients and optimizer state may leave: (params + largest "
              f"operator without them {_fmt_bytes(tier_op)}, {unlimited.stats['max_tier_op']}) / peak "
              f"= {a.tier_floor:.3f}")
    print(f"{'ratio':>7}{'':8} {'budget':>9} {'status':>6} {'rt peak':>9} {'alloc pk':>9} {'plain pk':>9} "
          f"{'time x':>7} {'cpu x':>7} {'remats':>7} {'evicts':>7} {'equal':>5}"
          + (f" {'out':>6} {'state':>6} {'back':>6} {'host pk':>9}" if a.host_memory else ""))
    rows = []
    for r in ratios:
        row, _ = _attempt(a, factory, r, peak, plain, (floor, floor_grads))
        rows.append(row)
        _print_row(row)
    if a.find_floor:
        ok = [r["ratio"] for r in rows if r["status"] == "ok"]
        bad = [r["ratio"] for r in rows if r["status"] != "ok"]
        hi = min(ok) if ok else 1.0
        lo = max([x for x in bad if x < hi], default=0.0)
        best = None
        failed = next((r for r in rows if r["ratio"] == lo and r["status"] != "ok"), None)
        for _ in range(a.floor_iters):
            mid = (lo + hi) / 2
            row, _ = _attempt(a, factory, mid, peak, plain, (floor, floor_grads))
            if row["status"] == "ok":
                hi, best = mid, row
            else:
                lo, failed = mid, row
                _print_row(row)
        if best is None:
            best = next((r for r in rows if r["status"] == "ok" and r["ratio"] == hi), None)
        if best is None:
            row, _ = _attempt(a, factory, hi, peak, plain, (floor, floor_grads))
            best = row
        best = dict(best)
        best["floor"] = True
        best["floor_lower_bound"] = lo
        if failed is not None:  # what stopped the highest ratio that failed: the floor's reason
            best["floor_failure"] = {"ratio": failed["ratio"], "status": failed["status"],
                                     "error": failed.get("error", "")}
        rows.append(best)
        _print_row(best)
        print(f"# floor: lowest ratio that finished {hi:.3f} (failed at {lo:.3f}); physical floor {floor:.3f}; "
              f"floor / f = {hi / floor:.2f}")
    print(f"# load average {os.getloadavg()[0]:.2f} at the end (a 2-core machine shared with other jobs: "
          f"compare the CPU-time column)")
    print(f"# process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    write_rows(a.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
