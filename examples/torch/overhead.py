#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Overhead at ratio 1.0 on a loaded machine: plain PyTorch and the bridge alternate step by
step (same model, same data, separate copies), so that load changes hit both alike; prints
each pair's wall-time and thread-CPU-time ratios and their medians (with one torch thread the
kernels run on the calling thread: the CPU ratio is the one to read on a loaded machine).

    python3 examples/torch/overhead.py --model torchvision:resnet50 --batch 32 --size 128 --pairs 4
"""

import argparse
import statistics
import sys
import time

import torch

import dtr_torch
from dtr_torch.bench import _load_factory


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="torchvision:resnet50")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--pairs", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    factory = _load_factory(a.model, a.size, a.classes)

    def setup():
        torch.manual_seed(0)
        m, inputs, loss_fn = factory(a.batch)
        return m, inputs, loss_fn, torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)

    plain, bridged = setup(), setup()
    rt = dtr_torch.Runtime()

    def step(s):
        m, inputs, loss_fn, opt = s
        t0, c0 = time.perf_counter(), time.thread_time()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(m(*inputs))
        loss.backward()
        opt.step()
        return time.perf_counter() - t0, time.thread_time() - c0

    from dtr_torch._bridge import _outside, _ext

    class plain_pytorch:  # the mode popped and the bridge's allocator cache paused
        def __enter__(self):
            _ext.pause_allocator_cache(True)
            self.o = _outside()
            self.o.__enter__()

        def __exit__(self, *exc):
            self.o.__exit__(*exc)
            _ext.pause_allocator_cache(False)
    ratios, cpu_ratios = [], []
    with rt:  # one context; the plain steps run with the bridge's mode popped
        with plain_pytorch():
            step(plain)  # warm-up
        step(bridged)
        for i in range(a.pairs):
            with plain_pytorch():
                tp, cp = step(plain)
            tb, cb = step(bridged)
            ratios.append(tb / tp)
            cpu_ratios.append(cb / cp)
            print(f"pair {i}: plain {tp * 1e3:.0f} ms (CPU {cp * 1e3:.0f}), bridge {tb * 1e3:.0f} ms "
                  f"(CPU {cb * 1e3:.0f}), ratio {tb / tp:.3f} (CPU {cb / cp:.3f})", flush=True)
    same = all(torch.equal(x, y) for x, y in zip(plain[0].parameters(), bridged[0].parameters()))
    print(f"{a.model} batch {a.batch}: median ratio {statistics.median(ratios):.3f} "
          f"(CPU {statistics.median(cpu_ratios):.3f}) over {a.pairs} pairs; "
          f"parameters bit-identical after {a.pairs + 1} steps: {same}; calls {rt.stats()['calls']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
