#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Overhead at ratio 1.0 on a loaded machine: plain PyTorch and the bridge alternate step by
step (same model, same data, separate copies), so that load changes hit both alike; prints
each pair's wall-time and thread-CPU-time ratios and their medians (with one torch thread the
kernels run on the calling thread: the CPU ratio is the one to read on a loaded machine).

    python3 examples/torch/overhead.py --model torchvision:resnet50 --batch 32 --size 128 --pairs 4

With --ratio R < 1 the bridged copy trains under a budget of R x the runtime peak of an
unlimited run of --ref-steps steps first (dtr_torch.bench's reference: 3 steps), with the
runtime options given (--heuristic, --cost-clock, --park-released, --restore, --host-memory):
the same interleaving for a budgeted run, whose CPU ratio is then compared with plain
PyTorch's neighbouring steps rather than with a plain run minutes earlier.

With --passthrough a third copy steps under a TorchDispatchMode that only calls each operator
(PyTorch's own mode machinery and nothing of the bridge), interleaved with the other two: the
part of the bridge's overhead that any dispatch-mode integration pays on this PyTorch, and
the part that is the bridge's own (its ratio to the pass-through steps).

With --alone plain (or bridge) only that copy steps, 1 + --pairs times, and the median step
time is printed: run each in its own process to compare them as a user's separate runs do.
The interleaved plain steps share one heap with the bridged copy; a process of plain PyTorch
alone can be slower on CPU, where glibc gives freed memory back and faults it in again
(examples/torch/results/overhead/plain-heap/).
"""

import argparse
import contextlib
import statistics
import sys
import time

import torch

import dtr_torch
from dtr_torch.bench import _load_factory, add_park_released


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="torchvision:resnet50")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--pairs", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--ratio", type=float, default=1.0)
    p.add_argument("--ref-steps", type=int, default=3)
    p.add_argument("--heuristic", default=dtr_torch.DEFAULT_HEURISTIC)
    p.add_argument("--cost-clock", choices=("wall", "thread_cpu"), default="wall")
    add_park_released(p)
    p.add_argument("--restore", choices=("yield_when_full", "planned", "hold"), default="yield_when_full")
    p.add_argument("--host-memory", type=int, default=None, metavar="BYTES",
                   help="give the bridged runtime a host tier of BYTES (dtr_torch.Runtime host_memory; "
                   "the link is measured unless --offload-bandwidth sets it)")
    p.add_argument("--offload-bandwidth", type=float, default=None, metavar="BYTES_PER_S")
    p.add_argument("--passthrough", action="store_true",
                   help="also step a copy under a pass-through TorchDispatchMode")
    p.add_argument("--alone", choices=("plain", "bridge"), default=None,
                   help="step only this copy (no pairs, no ratio): the median step time")
    a = p.parse_args()
    if a.alone is not None and (a.passthrough or a.ratio < 1.0):
        p.error("--alone measures one copy at ratio 1.0, without --passthrough")
    if a.host_memory is not None and a.host_memory <= 0:
        p.error("--host-memory must be positive")
    if a.offload_bandwidth is not None and (a.host_memory is None or not a.offload_bandwidth > 0):
        p.error("--offload-bandwidth needs --host-memory and must be positive")
    torch.set_num_threads(a.threads)
    factory = _load_factory(a.model, a.size, a.classes)

    # Each copy draws from its own random stream (dropout), as if it ran alone: interleaved
    # steps on the one global generator would give the copies different masks, and the
    # bit-identity check below would compare different computations.
    rng = {}

    def setup():
        torch.manual_seed(0)
        m, inputs, loss_fn = factory(a.batch)
        s = m, inputs, loss_fn, torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        rng[id(s)] = torch.get_rng_state()  # the same for every copy: seeded, then built alike
        return s

    budget = None
    if a.ratio < 1.0:
        ref_rt = dtr_torch.Runtime(heuristic=a.heuristic)
        ref = setup()
        with ref_rt:
            for _ in range(a.ref_steps):
                m, inputs, loss_fn, opt = ref
                opt.zero_grad(set_to_none=True)
                loss_fn(m(*inputs)).backward()
                opt.step()
        peak = ref_rt.stats()["peak_resident_bytes"]
        del ref, ref_rt
        budget = int(a.ratio * peak)
        print(f"unlimited runtime peak over {a.ref_steps} steps {peak / 2**20:.1f} MiB; budget "
              f"{a.ratio} x that = {budget / 2**20:.1f} MiB; heuristic {a.heuristic}, cost clock "
              f"{a.cost_clock}, park released {a.park_released}, restore {a.restore}", flush=True)
    tier = {}
    if a.host_memory is not None:
        tier["host_memory"] = a.host_memory
        if a.offload_bandwidth is not None:
            tier["offload_bandwidth"] = a.offload_bandwidth
    rt = dtr_torch.Runtime(budget=budget, heuristic=a.heuristic, cost_clock=a.cost_clock,
                           park_released=a.park_released, restore=a.restore, **tier)

    def step(s):
        m, inputs, loss_fn, opt = s
        torch.set_rng_state(rng[id(s)])
        t0, c0 = time.perf_counter(), time.thread_time()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(m(*inputs))
        loss.backward()
        opt.step()
        elapsed = time.perf_counter() - t0, time.thread_time() - c0
        rng[id(s)] = torch.get_rng_state()
        return elapsed

    if a.alone is not None:
        return alone(a, step, setup(), rt)
    plain, bridged = setup(), setup()
    through = setup() if a.passthrough else None

    from dtr_torch._bridge import _ext, outside

    class plain_pytorch:  # the mode popped and the bridge's allocator cache paused
        def __enter__(self):
            _ext.pause_allocator_cache(True)
            self.o = outside()
            self.o.__enter__()

        def __exit__(self, *exc):
            self.o.__exit__(*exc)
            _ext.pause_allocator_cache(False)
    from torch.utils._python_dispatch import TorchDispatchMode

    class PassThrough(TorchDispatchMode):
        ops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            PassThrough.ops += 1
            return func(*args, **(kwargs or {}))

    def step_through():
        with plain_pytorch(), PassThrough():
            return step(through)

    ratios, cpu_ratios = [], []
    plain_t, mode_t, bridge_t = [], [], []  # --passthrough: CPU seconds of each pair's steps
    with rt:  # one context; the plain steps run with the bridge's mode popped
        with plain_pytorch():
            step(plain)  # warm-up
        step(bridged)
        if through is not None:
            step_through()
        for i in range(a.pairs):
            with plain_pytorch():
                tp, cp = step(plain)
            tb, cb = step(bridged)
            ratios.append(tb / tp)
            cpu_ratios.append(cb / cp)
            line = (f"pair {i}: plain {tp * 1e3:.0f} ms (CPU {cp * 1e3:.0f}), bridge {tb * 1e3:.0f} ms "
                    f"(CPU {cb * 1e3:.0f}), ratio {tb / tp:.3f} (CPU {cb / cp:.3f})")
            if through is not None:
                PassThrough.ops = 0
                tm, cm = step_through()
                plain_t.append(cp)
                mode_t.append(cm)
                bridge_t.append(cb)
                line += (f"; pass-through mode {tm * 1e3:.0f} ms (CPU {cm * 1e3:.0f}), CPU x plain "
                         f"{cm / cp:.3f}, bridge CPU x pass-through {cb / cm:.3f}")
            print(line, flush=True)
    same = all(torch.equal(x, y) for x, y in zip(plain[0].parameters(), bridged[0].parameters()))
    if through is not None:  # as many steps as the others (one warm-up, then one a pair)
        same = same and all(torch.equal(x, y) for x, y in
                            zip(plain[0].parameters(), through[0].parameters()))
    st = rt.stats()
    print(f"{a.model} batch {a.batch} ratio {a.ratio}: median ratio {statistics.median(ratios):.3f} "
          f"(CPU {statistics.median(cpu_ratios):.3f}) over {a.pairs} pairs; "
          f"parameters bit-identical after {a.pairs + 1} steps: {same}; calls {st['calls']}, "
          f"remats {st['rematerializations']}, evictions {st['evictions']}, runtime peak "
          f"{st['peak_resident_bytes'] / 2**20:.1f} MiB"
          + (f"; host tier at {st['offload_bandwidth'] / 1e9:.1f} GB/s: {st['offloads']} copies out "
             f"({st['constant_offloads']} gradients or state), {st['copy_backs']} back, host peak "
             f"{st['peak_host_bytes'] / 2**20:.1f} MiB" if a.host_memory is not None else ""))
    if through is not None:
        mode_cpu = [m / p for m, p in zip(mode_t, plain_t)]
        own_cpu = [b / m for b, m in zip(bridge_t, mode_t)]
        ops = max(PassThrough.ops, 1)
        mode_us = (statistics.median(mode_t) - statistics.median(plain_t)) / ops * 1e6
        own_us = (statistics.median(bridge_t) - statistics.median(mode_t)) / ops * 1e6
        print(f"pass-through TorchDispatchMode: median CPU x plain {statistics.median(mode_cpu):.3f}, "
              f"the bridge's CPU x pass-through {statistics.median(own_cpu):.3f}; {PassThrough.ops} "
              f"operators a step: the mode machinery {mode_us:.1f} us CPU an operator, the bridge's "
              f"own work {own_us:.1f} us")
    return 0


def alone(a, step, copy, rt):
    """--alone: 1 + a.pairs steps of `copy` by `step`, inside `rt` for the bridge; prints each
    step and the median."""
    with rt if a.alone == "bridge" else contextlib.nullcontext():
        step(copy)  # warm-up
        times = [step(copy) for _ in range(a.pairs)]
    wall = statistics.median(t for t, _ in times)
    cpu = statistics.median(c for _, c in times)
    print(f"{a.model} batch {a.batch}, {a.alone} alone: steps (CPU ms) "
          f"{[round(c * 1e3, 1) for _, c in times]}; median {wall * 1e3:.1f} ms (CPU {cpu * 1e3:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
