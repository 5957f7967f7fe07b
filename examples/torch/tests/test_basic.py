# SPDX-License-Identifier: Apache-2.0
"""A small MLP and a small CNN: forward, backward and an SGD step with momentum through the
bridge, bit-identical to plain PyTorch with no budget and under budgets that force
evictions and recomputations."""

import sys

from _common import torch, dtr_torch, train, assert_identical, peak_of

F = torch.nn.functional


def mlp():
    m = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                            torch.nn.Tanh(), torch.nn.Linear(256, 10))
    x = torch.randn(2048, 64)
    y = torch.randint(0, 10, (2048,))
    return m, (x,), lambda out: F.cross_entropy(out, y)


def cnn():
    m = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(inplace=True), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(inplace=True),
        torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10))
    x = torch.randn(16, 3, 32, 32)
    y = torch.randint(0, 10, (16,))
    return m, (x,), lambda out: F.cross_entropy(out, y)


def threads():
    """Tensors made on one thread and freed on another, as CUDA's backward does on autograd's
    device threads: a worker thread exits with the tensors it made still alive, which are then
    read (recomputed) and freed on the main thread; another frees tensors the main thread made.
    Each value is checked against plain PyTorch, under a budget that evicts and recomputes."""
    import threading

    torch.manual_seed(0)
    w = torch.randn(64, 64) / 8
    x0 = torch.randn(32, 64)

    def chain(x, n):
        out = []
        for _ in range(n):
            x = torch.tanh(x @ w)
            out.append(x)
        return out

    ref = chain(x0, 40)
    rt = dtr_torch.Runtime(deterministic_costs=True, budget=12 * 32 * 64 * 4)
    with rt:
        made = []
        worker = threading.Thread(target=lambda: made.extend(chain(x0, 40)))
        worker.start()
        worker.join()
        # made on the worker, which has exited; read (recomputed) and freed here
        for i in (39, 0, 20):
            assert torch.equal(dtr_torch.materialize(made[i]), ref[i]), f"threads: value {i}"
        made.clear()
        # made here, freed on a worker
        mine = chain(x0, 40)
        assert torch.equal(dtr_torch.materialize(mine[39]), ref[39]), "threads: value 39"
        freer = threading.Thread(target=mine.clear)
        freer.start()
        freer.join()
        assert not mine
        again = chain(x0, 40)
        for i in (0, 39):
            assert torch.equal(dtr_torch.materialize(again[i]), ref[i]), f"threads: again {i}"
        del again
    st = rt.stats()
    assert st["evictions"] > 0 and st["rematerializations"] > 0, st
    print(f"threads: identical; evictions {st['evictions']}, remats {st['rematerializations']}")


def main():
    threads()
    for name, make in (("mlp", mlp), ("cnn", cnn)):
        ref = train(make, 3)
        peak, floor = peak_of(make, 3)
        print(f"{name}: peak {peak}, physical floor {floor} ({floor / peak:.2f})")
        for ratio in (None, 1.0, 0.9, max(0.5, 1.2 * floor / peak)):
            rt = dtr_torch.Runtime(deterministic_costs=True, budget=None if ratio is None else int(peak * ratio))
            got = train(make, 3, rt)
            st = rt.stats()
            assert_identical(ref, got, f"{name} ratio {ratio}")
            assert st["peak_resident_bytes"] <= rt.budget
            print(f"{name} ratio {ratio}: identical; peak {st['peak_resident_bytes']} of {peak}, "
                  f"evictions {st['evictions']}, remats {st['rematerializations']}, "
                  f"promotions {st['promotions']}, adopted outputs {st['adopted_outputs']}")
            if ratio is not None and ratio < 1:
                assert st["evictions"] > 0 and st["rematerializations"] > 0, st
    return 0


if __name__ == "__main__":
    sys.exit(main())
