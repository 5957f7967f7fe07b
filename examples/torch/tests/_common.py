# SPDX-License-Identifier: Apache-2.0
"""Helpers for the bridge's tests: skip (exit 77) without torch or the extension, run the
same training steps in plain PyTorch and under a dtr_torch.Runtime, compare bit for bit."""

import copy
import os
import sys

try:
    import torch
except ImportError:  # pragma: no cover
    print("SKIP: torch is not importable by", sys.executable)
    sys.exit(77)

try:
    import dtr_torch
    dtr_torch.Runtime  # imports the extension
except ImportError as e:  # pragma: no cover
    print("SKIP: the dtr_torch extension is not importable:", e)
    sys.exit(77)

torch.set_num_threads(int(os.environ.get("DTR_TORCH_THREADS", "1")))


def train(make, steps, runtime=None, opt="sgd", seed=0):
    """Build (model, inputs, loss_fn) with make(), train `steps` steps, return the losses,
    the model and the stats. With `runtime`, the steps run inside it."""
    torch.manual_seed(seed)
    model, inputs, loss_fn = make()
    params = list(model.parameters())
    if opt == "sgd":
        o = torch.optim.SGD(params, lr=0.05, momentum=0.9)
    elif opt == "adam":
        o = torch.optim.Adam(params, lr=1e-3)
    else:
        o = torch.optim.SGD(params, lr=0.05)
    losses = []
    torch.manual_seed(seed + 1)

    def steps_():
        for _ in range(steps):
            o.zero_grad()
            loss = loss_fn(model(*inputs))
            loss.backward()
            o.step()
            # a plain copy: a kept DTRTensor would keep the step's lineage (and the
            # parameter versions it read) alive
            losses.append(dtr_torch.materialize(loss.detach()))

    if runtime is None:
        # The reference must not depend on what the heap held before: PyTorch 2.x's oneDNN
        # convolutions read uninitialized padding (NaN when the garbage decodes as NaN; the
        # bridge zero-fills inside them, docs/torch.md "PyTorch 2.x"), so its allocations are
        # zero-filled.
        from dtr_torch._bridge import _ext
        _ext.set_zero_fill(True)
        try:
            steps_()
        finally:
            _ext.set_zero_fill(False)
    else:
        with runtime:
            steps_()
    losses = [dtr_torch.materialize(l) for l in losses]
    return losses, model, o


def assert_identical(a, b, what=""):
    (la, ma, oa), (lb, mb, ob) = a, b
    assert len(la) == len(lb)
    for i, (x, y) in enumerate(zip(la, lb)):
        assert torch.equal(x, y), f"{what}: loss {i} differs: {x} vs {y}"
    for (n, p), (_, q) in zip(ma.named_parameters(), mb.named_parameters()):
        assert type(p.data) is torch.Tensor or isinstance(p, torch.nn.Parameter), type(p)
        assert torch.equal(p.detach(), q.detach()), f"{what}: parameter {n} differs"
        if p.grad is None or q.grad is None:
            assert p.grad is None and q.grad is None, f"{what}: grad of {n}: one is None"
        else:
            assert not isinstance(q.grad, dtr_torch.DTRTensor), f"{what}: grad of {n} not given back"
            assert torch.equal(p.grad, q.grad), f"{what}: grad of {n} differs"
    for (n, b1), (_, b2) in zip(ma.named_buffers(), mb.named_buffers()):
        assert torch.equal(b1, b2), f"{what}: buffer {n} differs"
    for s1, s2 in zip(oa.state.values(), ob.state.values()):
        for k in s1:
            v1, v2 = s1[k], s2[k]
            if isinstance(v1, torch.Tensor):
                assert not isinstance(v2, dtr_torch.DTRTensor), f"{what}: optimizer state {k} not given back"
                assert torch.equal(v1, v2), f"{what}: optimizer state {k} differs"


def nbytes(t):
    return t.numel() * t.element_size()


def refused(words, **options):
    """dtr_torch.Runtime(**options) raises a ValueError whose text names every one of `words`."""
    try:
        dtr_torch.Runtime(**options)
    except ValueError as e:
        assert all(w in str(e) for w in words), (options, e)
    else:
        raise AssertionError(f"Runtime({options}) was accepted")


def peak_of(make, steps, opt="sgd"):
    """(runtime peak, physical floor in bytes) of an unlimited run. The floor: parameters +
    optimizer state + the largest single operator's inputs and outputs."""
    rt = dtr_torch.Runtime()
    _, model, o = train(make, steps, rt, opt)
    st = rt.stats()
    state = sum(nbytes(v) for s in o.state.values() for v in s.values() if isinstance(v, torch.Tensor))
    params = sum(nbytes(p) for p in model.parameters())
    return st["peak_resident_bytes"], params + state + st["max_op_bytes"]


def check_model(name, make, steps=2, opt="sgd", floor_multiples=(2.8, 2.2), heuristic="dtr_eqclass",
                **runtime_options):
    """Train `make` in plain PyTorch, then through the bridge at ratio 1.0 and at budgets of
    the given multiples of the physical floor; every run must be bit-identical, stay under its
    budget, and (below the peak) evict and recompute. `runtime_options` go to dtr_torch.Runtime
    (deterministic costs unless they say otherwise)."""
    import time
    t0 = time.time()
    ref = train(make, steps, opt=opt)
    peak, floor = peak_of(make, steps, opt)
    budgets = [("1.0", peak)] + [(f"{m}f", int(m * floor)) for m in floor_multiples]
    print(f"{name} ({opt}): peak {peak}, physical floor {floor} = {floor / peak:.2f} of the peak")
    for label, budget in budgets:
        assert budget <= peak, f"{name}: {label} = {budget} is above the peak {peak}: activations do not dominate"
        rt = dtr_torch.Runtime(budget=budget, **{"deterministic_costs": True, "heuristic": heuristic,
                                                 **runtime_options})
        got = train(make, steps, rt, opt=opt)
        st = rt.stats()
        assert_identical(ref, got, f"{name} at {label}")
        assert st["peak_resident_bytes"] <= budget, st
        if label != "1.0":
            assert st["evictions"] > 0 and st["rematerializations"] > 0, (label, st)
        print(f"  {label} (ratio {budget / peak:.2f}): bit-identical, runtime peak {st['peak_resident_bytes']}, "
              f"evictions {st['evictions']}, remats {st['rematerializations']}", flush=True)
    print(f"  {name}: {time.time() - t0:.1f} s")
