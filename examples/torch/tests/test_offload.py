# SPDX-License-Identifier: Apache-2.0
"""Offload to host memory (Runtime(host_memory=...)): victims copied out to a host tier and
back instead of recomputed, bit-identical to plain PyTorch; nothing copied where the budget
never binds; a budget below what recomputation alone can meet finishes with the tier, and one
below the physical floor where gradients and optimizer state leave too; a tier too small for
anything falls back to recomputation; misuse of the options is refused.

Costs are deterministic and the transfer model fixed, so the runtime's choices are the same
on every machine."""

import sys

import dtr_torch
from _common import assert_identical, peak_of, refused, train
from dtr_torch import models

# Two transfers of n bytes cost n / 2 ns: below the deterministic cost of recomputing an
# operator (the bytes it reads), so most victims leave by copy.
BANDWIDTH = 4e9


def run(make, budget, steps=2, **options):
    rt = dtr_torch.Runtime(budget=budget, deterministic_costs=True, **options)
    got = train(make, steps, rt)
    st = rt.stats()
    assert st["peak_resident_bytes"] <= budget, st
    return got, st


def check(name, make, multiples):
    ref = train(make, 2)
    peak, floor = peak_of(make, 2)
    print(f"{name}: peak {peak}, physical floor {floor} = {floor / peak:.2f} of the peak")
    _, st = run(make, peak, host_memory=1 << 32, offload_bandwidth=BANDWIDTH)
    assert st["offloads"] == 0 and st["copy_backs"] == 0 and st["peak_host_bytes"] == 0, st
    for m in multiples:
        budget = int(m * floor)
        got, st = run(make, budget, host_memory=1 << 32, offload_bandwidth=BANDWIDTH)
        assert_identical(ref, got, f"{name} at {m}f with offload")
        assert st["offloads"] > 0 and st["copy_backs"] > 0, st
        assert st["bytes_copied_back"] <= st["bytes_offloaded"] + st["peak_host_bytes"], st
        print(f"  {m}f: bit-identical, {st['offloads']} + {st['offloads_clean']} copies out, "
              f"{st['copy_backs']} back, {st['rematerializations']} remats, host peak "
              f"{st['peak_host_bytes']}", flush=True)
    return ref, peak, floor


def main():
    make = lambda: models.make_resnet(batch=4, size=32, width=8, blocks=4)  # noqa: E731
    ref, peak, floor = check("narrow resnet", make, (2.2, 1.25))
    # 1.25 f is below what recomputation alone reaches here: the tier is what lets it finish
    try:
        run(make, int(1.25 * floor))
    except dtr_torch.OutOfMemoryError as e:
        print(f"  1.25f without a host tier: out of memory ({str(e)[:60]}...)")
    else:
        raise AssertionError("1.25 f without offload finished: the case no longer shows the tier")
    # a tier too small for the activations: they are dropped and recomputed, as without one
    # (only scalars fit)
    got, st = run(make, int(2.2 * floor), host_memory=64, offload_bandwidth=BANDWIDTH)
    assert_identical(ref, got, "narrow resnet with a 64-byte tier")
    assert st["peak_host_bytes"] <= 64 and st["rematerializations"] > 0, st
    print(f"  64-byte tier: {st['rematerializations']} remats, {st['offloads']} copies out "
          f"of {st['bytes_offloaded']} bytes")

    # random operators and batch norm's running statistics through the tier
    drop = lambda: models.make_dropout_bn(batch=512, features=32, hidden=128, layers=4)  # noqa: E731
    check("dropout + batch norm", drop, (1.5,))

    # Below the physical floor f (parameters + optimizer state + the largest operator), where
    # parameters and state outweigh activations: gradients and optimizer state are the
    # bridge's own constants and leave for the tier (parameters stay, PyTorch holds them).
    # Without the tier this budget cannot fit.
    mlp = lambda: models.make_dropout_bn(batch=8, features=128, hidden=256, layers=3)  # noqa: E731
    for opt, m in (("sgd", 0.9), ("adam", 0.8)):
        ref = train(mlp, 2, opt=opt)
        peak, floor = peak_of(mlp, 2, opt)
        budget = int(m * floor)
        rt = dtr_torch.Runtime(budget=budget, deterministic_costs=True, host_memory=1 << 32,
                               offload_bandwidth=BANDWIDTH)
        got = train(mlp, 2, rt, opt=opt)
        st = rt.stats()
        assert_identical(ref, got, f"mlp ({opt}) at {m}f with offload")
        assert st["peak_resident_bytes"] <= budget and st["constant_offloads"] > 0, st
        # The tier's bound counts the optimizer's in-place updates, which run outside the
        # runtime: SGD's momentum.add_(grad) and Adam's moments hold a gradient and state
        # of the largest layer at once (more than any recorded operator here needs).
        largest = max(p.numel() * p.element_size() for p in got[1].parameters())
        assert st["max_tier_op_bytes"] >= 2 * largest > st["max_op_bytes"], st
        # The bench takes the bound from its unlimited run, without a tier: the same figure
        # there (parameters never count, with or without a tier: Adam's update of a
        # parameter from its two moments counts the moments only).
        plain_rt = dtr_torch.Runtime(deterministic_costs=True)
        train(mlp, 2, plain_rt, opt=opt)
        assert plain_rt.stats()["max_tier_op_bytes"] == st["max_tier_op_bytes"], \
            (plain_rt.stats()["max_tier_op_bytes"], st["max_tier_op_bytes"])
        print(f"  mlp ({opt}) at {m}f = {budget / peak:.2f} of the peak: bit-identical, "
              f"{st['constant_offloads']} of {st['offloads'] + st['offloads_clean']} copies out "
              f"were gradients or optimizer state")
        try:
            train(mlp, 2, dtr_torch.Runtime(budget=budget, deterministic_costs=True), opt=opt)
        except dtr_torch.OutOfMemoryError:
            pass
        else:
            raise AssertionError(f"mlp ({opt}) at {m}f finished without a tier")

    # the measured transfer model is reported
    rt = dtr_torch.Runtime(host_memory=1 << 20)
    st = rt.stats()
    assert st["offload_bandwidth"] > 0 and st["offload_latency_ns"] >= 0, st
    print(f"  measured link: {st['offload_bandwidth'] / 1e9:.1f} GB/s, {st['offload_latency_ns']} ns")

    refused(("host_memory must be positive",), host_memory=0)
    refused(("offload_bandwidth needs host_memory",), offload_bandwidth=1e9)
    refused(("offload_bandwidth must be positive",), host_memory=1 << 20, offload_bandwidth=-1.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
