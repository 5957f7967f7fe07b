# SPDX-License-Identifier: Apache-2.0
"""The bridge's runtime options on the narrow residual network, each at ratio 1.0 and two
budgets in multiples of its physical floor, bit-identical to plain PyTorch: released storages
parked (park_released, always and only while a recorded step is followed), the policies added
to the bridge (dtr_held_bounded, indexed:dtr_eqclass, indexed:dtr_next_use), restore_pins::hold
and planned, and costs on the thread's CPU clock (measured, so the evictions vary from run to
run; the values may not), also recorded as measured in repeated steps (repeat_costs="measured")."""

import sys

import dtr_torch
from _common import check_model, peak_of, refused, train
from dtr_torch import models


def main():
    make = lambda: models.make_resnet(batch=4, size=32, width=8, blocks=4)  # noqa: E731
    check_model("narrow resnet, park_released", make, park_released=True)
    check_model("narrow resnet, dtr_held_bounded, park_released", make, heuristic="dtr_held_bounded",
                park_released=True)
    check_model("narrow resnet, indexed:dtr_eqclass", make, heuristic="indexed:dtr_eqclass")
    check_model("narrow resnet, indexed:dtr_next_use", make, heuristic="indexed:dtr_next_use")
    check_model("narrow resnet, restore hold", make, restore="hold")
    check_model("narrow resnet, restore planned", make, restore="planned")
    # 4 steps: from the third on the steps follow the recording, whose lowest costs they record
    check_model("narrow resnet, thread_cpu costs", make, steps=4, deterministic_costs=False, cost_clock="thread_cpu")
    check_model("narrow resnet, thread_cpu costs as measured in repeated steps", make, deterministic_costs=False,
                cost_clock="thread_cpu", repeat_costs="measured")
    # parking happens (once the budget binds), and never at ratio 1.0
    peak, floor = peak_of(make, 2)
    for budget, expect in ((peak, False), (int(2.2 * floor), True)):
        rt = dtr_torch.Runtime(budget=budget, deterministic_costs=True, park_released=True)
        train(make, 2, rt)
        st = rt.stats()
        assert (st["parked_total"] > 0) == expect and st["peak_resident_bytes"] <= budget, (budget, st)
        print(f"  park_released at budget {budget}: {st['parked_total']} storages parked, "
              f"{st['rematerializations']} remats")
    # "following" parks only while the runtime follows a recorded step: nothing in the first
    # step (none recorded yet), something once the step repeats; bit-identical either way
    check_model("narrow resnet, park_released following", make, heuristic="indexed:dtr_next_use",
                steps=4, park_released="following")
    # (and only under a policy that scores with the forecast: dtr_eqclass does not read it)
    for heuristic, steps, expect in (("indexed:dtr_next_use", 1, False), ("indexed:dtr_next_use", 4, True),
                                     ("dtr_eqclass", 4, False)):
        rt = dtr_torch.Runtime(budget=int(2.2 * floor), deterministic_costs=True, heuristic=heuristic,
                               park_released="following")
        train(make, steps, rt)
        st = rt.stats()
        assert (st["parked_total"] > 0) == expect and st["peak_resident_bytes"] <= int(2.2 * floor), \
            (heuristic, steps, st)
        print(f"  park_released following, {heuristic}, {steps} steps: {st['parked_total']} storages parked")
    refused(("park_released", "sometimes"), park_released="sometimes")
    # keeping released storages and banishing them contradict each other: refused, named
    refused(("park_released", "banish"), dealloc="banish", park_released=True)
    # an unknown repeat_costs is refused, named
    refused(("repeat_costs", "median"), repeat_costs="median")
    # measured costs leave out the evictions made inside operators (dtr::cost_clock)
    rt = dtr_torch.Runtime(budget=int(2.2 * floor), cost_clock="thread_cpu")
    train(make, 2, rt)
    st = rt.stats()
    assert st["runtime_work_in_operators_ns"] > 0 and st["evictions"] > 0, st
    print(f"  runtime work taken out of measured costs: {st['runtime_work_in_operators_ns'] / 1e6:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
