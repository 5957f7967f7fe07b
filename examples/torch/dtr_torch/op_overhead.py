# SPDX-License-Identifier: Apache-2.0
"""What the bridge adds per ATen operator with no budget, plain PyTorch beside it in one run.

    python3 -m dtr_torch.op_overhead [--reps 9] [--chain 30] [--chains 100] [--block 4] [--json FILE]

Two workloads where kernels take microseconds, so that what is measured is the per-operator
path, not the arithmetic:

- chain: ``x = relu(x * a + b)`` on tensors of --size floats, chains of --chain operators (a
  third of them each of mul, add, relu) started afresh --chains times, as a step's
  activations are released at its end; the µs per operator of plain PyTorch and under a
  ``dtr_torch.Runtime()`` without a budget (its default policy, or --heuristic), and their
  difference;
- gpt: one training step (forward, backward, SGD with momentum) of a 2-layer GPT, d 64,
  sequence 32, batch 4, vocabulary 512: ms per step, the ATen operators per step (counted
  once with a pass-through TorchDispatchMode, outside the timings) and the µs the bridge adds
  per operator.

Plain and bridged repetitions alternate (plain, bridge, plain, bridge, ...), so that a change of
load on the machine hits both alike, and on a CPU the times are the calling thread's CPU time;
the medians are printed and written as JSON. The
bridged GPT steps are checked bit for bit against the plain ones (``torch.equal`` on the loss,
every gradient and every parameter after the last step): a row that differs says so.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from typing import Callable, List

import torch


def _chain(n: int, chains: int, size: int, device: str) -> Callable[[], float]:
    a = torch.full((size,), 1.0001, device=device)
    b = torch.full((size,), -0.5, device=device)
    x0 = torch.ones(size, device=device)
    k = max(n // 3, 1)

    def run() -> float:
        _sync(device)
        t0 = _now()
        for _ in range(chains):
            x = x0
            for _ in range(k):
                x = torch.relu(x * a + b)
        _sync(device)
        return (_now() - t0) / (3 * k * chains) / 1e3  # µs per operator

    return run


def _now() -> int:
    """The calling thread's CPU time, ns: with one torch thread on a CPU the kernels run on it,
    and other processes on a shared machine do not inflate it (on a GPU: wall time, which
    the synchronizations bound)."""
    return _clock()


_clock = time.thread_time_ns


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


class _Step:
    """A GPT and its optimizer; step() runs one training step and returns its ms."""

    def __init__(self, device: str, seed: int):
        from .models import make_gpt
        torch.manual_seed(seed)
        self.model, (idx,), self.loss_fn = make_gpt(batch=4, layers=2, d_model=64, heads=4, seq=32)
        self.model.to(device)
        self.idx = idx.to(device)
        self.device = device
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.loss = None

    def step(self) -> float:
        _sync(self.device)
        t0 = _now()
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(self.idx))
        loss.backward()
        self.opt.step()
        _sync(self.device)
        dt = (_now() - t0) / 1e6
        self.loss = loss.detach()
        return dt


def _count_ops(fn: Callable[[], object]) -> int:
    """ATen operators one call of ``fn`` dispatches (a mode that only counts and calls)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return Count.n


def main(argv: List[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m dtr_torch.op_overhead", description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=9, help="alternating repetitions of each workload")
    p.add_argument("--chain", type=int, default=30, help="operators in a chain")
    p.add_argument("--chains", type=int, default=100, help="chains in a repetition")
    p.add_argument("--size", type=int, default=4, help="elements of the chain's tensors")
    p.add_argument("--block", type=int, default=4, help="GPT steps of each kind per repetition (the first a warm-up)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--heuristic", default=None,
                   help="the runtime's policy by name (default: dtr_torch.Runtime's)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--json", help="write the figures here")
    a = p.parse_args(argv)
    for name in ("reps", "chain", "chains", "size", "threads"):
        if getattr(a, name) < 1:
            p.error(f"--{name} must be at least 1")
    if a.block < 2:
        p.error("--block must be at least 2 (its first step is a warm-up)")
    torch.set_num_threads(a.threads)
    global _clock
    if not a.device.startswith("cpu"):
        _clock = time.perf_counter_ns
    import dtr_torch

    # --- chain ----------------------------------------------------------------------------
    chain = _chain(a.chain, a.chains, a.size, a.device)
    chain()  # warm-up
    plain_us: List[float] = []
    bridge_us: List[float] = []
    for _ in range(a.reps):
        plain_us.append(chain())
        with dtr_torch.Runtime(device=a.device, heuristic=a.heuristic):
            bridge_us.append(chain())
    cp, cb = statistics.median(plain_us), statistics.median(bridge_us)

    # --- GPT step ---------------------------------------------------------------------------
    plain, bridged = _Step(a.device, 0), _Step(a.device, 0)
    ops = _count_ops(_Step(a.device, 0).step)
    plain_ms: List[float] = []
    bridge_ms: List[float] = []
    # Blocks of --block steps each, plain then bridged in one Runtime context, --reps times;
    # the first step of each block is a warm-up (the bridge adopts the parameters and the
    # optimizer state then, once per context, as a training loop inside one context would).
    for _ in range(a.reps):
        for i in range(a.block):
            t = plain.step()
            if i > 0:
                plain_ms.append(t)
        with dtr_torch.Runtime(device=a.device, heuristic=a.heuristic):
            for i in range(a.block):
                t = bridged.step()
                if i > 0:
                    bridge_ms.append(t)
    identical = _equal_runs(plain, bridged)
    gp, gb = statistics.median(plain_ms), statistics.median(bridge_ms)

    rows = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": a.device,
        "threads": a.threads,
        "clock": "thread_cpu" if _clock is time.thread_time_ns else "wall",
        "chain": {"operators": 3 * max(a.chain // 3, 1), "chains": a.chains, "elements": a.size,
                  "plain_us_per_op": cp, "bridge_us_per_op": cb, "added_us_per_op": cb - cp,
                  "plain_samples": plain_us, "bridge_samples": bridge_us},
        "gpt": {"config": "2 layers, d 64, 4 heads, sequence 32, batch 4, vocabulary 512, SGD momentum 0.9",
                "aten_ops_per_step": ops, "plain_ms": gp, "bridge_ms": gb, "ratio": gb / gp,
                "added_us_per_op": (gb - gp) * 1e3 / ops, "bit_identical": identical,
                "plain_samples": plain_ms, "bridge_samples": bridge_ms},
    }
    clock = "thread CPU time" if _clock is time.thread_time_ns else "wall time"
    print(f"torch {torch.__version__} on {a.device}, {a.threads} thread(s), {clock}; medians of {a.reps} "
          f"chain repetitions and {len(plain_ms)} steps, plain and bridge alternating")
    print(f"{'workload':<44} {'plain':>10} {'bridge':>10} {'added':>12} {'ratio':>7}")
    print(f"{'chain of mul/add/relu, ' + str(a.size) + ' floats (µs/op)':<44} {cp:>10.2f} {cb:>10.2f} "
          f"{cb - cp:>9.2f} µs {cb / cp:>7.2f}")
    print(f"{'GPT step, ' + str(ops) + ' ATen ops (ms/step)':<44} {gp:>10.2f} {gb:>10.2f} "
          f"{(gb - gp) * 1e3 / ops:>6.2f} µs/op {gb / gp:>7.2f}"
          + ("" if identical else "   NOT bit-identical"))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if identical else 1


def _equal_runs(a: _Step, b: _Step) -> bool:
    import dtr_torch
    if not torch.equal(dtr_torch.materialize(a.loss), dtr_torch.materialize(b.loss)):
        return False
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        if not torch.equal(p, q):
            return False
        if (p.grad is None) != (q.grad is None):
            return False
        if p.grad is not None and not torch.equal(p.grad, dtr_torch.materialize(q.grad)):
            return False
    return True


if __name__ == "__main__":
    sys.exit(main())
