# SPDX-License-Identifier: Apache-2.0
"""A budget that cannot fit raises dtr_torch.OutOfMemoryError (a MemoryError) with the
runtime's out_of_memory text naming the ATen operator; the runtime and the model stay usable:
raising the budget and running the step again gives plain PyTorch's loss, gradients and
parameters, bit for bit."""

import sys

from _common import torch, dtr_torch, peak_of, train
from dtr_torch import models


def make():
    return models.make_resnet(batch=4, size=32, width=8, blocks=3)


def main():
    ref_losses, ref_model, _ = train(make, 2)
    peak, floor = peak_of(make, 2)
    torch.manual_seed(0)
    model, inputs, loss_fn = make()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    torch.manual_seed(1)
    rt = dtr_torch.Runtime(deterministic_costs=True, budget=floor // 3)
    losses = []
    with rt:
        try:
            opt.zero_grad()
            loss_fn(model(*inputs)).backward()
        except dtr_torch.OutOfMemoryError as e:
            assert isinstance(e, MemoryError)
            msg = str(e)
            assert msg.startswith("aten::") and "out of memory" in msg and "budget" in msg, msg
            print("raised as expected:", msg[:200])
        else:
            raise AssertionError("a budget of a third of the floor must not fit")
        rt.check_invariants()
        rt.set_budget(int(0.6 * peak))
        for _ in range(2):
            opt.zero_grad()
            loss = loss_fn(model(*inputs))
            loss.backward()
            opt.step()
            losses.append(dtr_torch.materialize(loss.detach()))
        rt.check_invariants()
    for a, b in zip(ref_losses, losses):
        assert torch.equal(a, b), (a, b)
    for (n, p), (_, q) in zip(ref_model.named_parameters(), model.named_parameters()):
        assert torch.equal(p, q) and torch.equal(p.grad, q.grad), n
    # a budget that cannot be met by evicting is refused and leaves the old one
    rt2 = dtr_torch.Runtime()
    ones = torch.ones(1000)
    with rt2:
        x = ones * 2  # `ones` becomes a constant of the runtime: never evicted
        try:
            rt2.set_budget(100)
        except ValueError as e:
            assert "out of memory" in str(e)
        else:
            raise AssertionError("set_budget below what is pinned must fail")
        assert rt2.budget > 100 and x.sum().item() == 2000.0
    print("out of memory then retry: identical to plain PyTorch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
