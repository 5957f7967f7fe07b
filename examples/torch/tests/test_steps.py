# SPDX-License-Identifier: Apache-2.0
"""The bridge marks a step of the training loop at the first operator after each optimizer step
(dtr::runtime::begin_step):
from the second step on, the runtime follows the recorded step and dtr_next_use scores with
the time to each storage's next read. Under a budget that evicts, every step policy is
bit-identical to plain PyTorch; the counters show the steps marked, learned and followed.
Manual marks (step_marks="manual") and their misuse are checked too."""

from _common import torch, dtr_torch, train, assert_identical, peak_of
from dtr_torch import models

STEPS = 4


def make():
    return models.make_resnet(batch=4, size=16, width=8, blocks=2)


def main():
    ref = train(make, STEPS)
    peak, floor = peak_of(make, STEPS)
    budget = int(2.2 * floor)
    print(f"resnet: peak {peak}, floor {floor}, budget {budget} ({budget / peak:.2f} of the peak)")
    for heuristic in ("dtr_next_use", "dtr_held_next_use", "dtr_eqclass"):
        rt = dtr_torch.Runtime(budget=budget, heuristic=heuristic, deterministic_costs=True)
        got = train(make, STEPS, rt)
        st = rt.stats()
        assert_identical(ref, got, heuristic)
        assert st["peak_resident_bytes"] <= budget, st
        assert st["evictions"] > 0 and st["rematerializations"] > 0, st
        # a mark where the context opens and one at the first operator after each optimizer
        # step (none after the last: no operator follows it); the first step differs
        # from the others (the momentum buffers are made), so the step is learned twice and
        # followed after that, call for call: the training loop is the same every step
        assert st["steps_marked"] == STEPS, st
        assert st["steps_learned"] <= 2 and st["step_divergences"] <= 2, st
        assert st["forecast_calls"] > 0, st
        print(f"  {heuristic}: bit-identical; marked {st['steps_marked']}, learned "
              f"{st['steps_learned']}, diverged {st['step_divergences']}, followed calls "
              f"{st['forecast_calls']} of {st['calls']}; evictions {st['evictions']}, remats "
              f"{st['rematerializations']}", flush=True)

    # the loop reads its loss after the optimizer step (as one logging it does): the mark
    # waits for the next operator, so the loss's read ends the step that made it, and the
    # second step follows the first one's recording through its forward and backward passes
    # (it leaves it in the optimizer step, where the first one made the momentum buffers)
    torch.manual_seed(0)
    model, inputs, loss_fn = make()
    opt = torch.optim.SGD(list(model.parameters()), lr=0.05, momentum=0.9)
    rt = dtr_torch.Runtime(budget=budget, heuristic="dtr_next_use", deterministic_costs=True)
    after_step = []
    with rt:
        for _ in range(3):
            opt.zero_grad(set_to_none=True)  # no operator before the forward pass
            loss = loss_fn(model(*inputs))
            loss.backward()
            opt.step()
            dtr_torch.materialize(loss.detach())
            after_step.append(rt.stats())
    first, second, third = after_step
    # (forecast_calls counts the events followed: operator calls, and the pins of kernels
    # that run outside the runtime, as the optimizer's; the calls are the forward and
    # backward passes')
    followed_in_2 = second["forecast_calls"] - first["forecast_calls"]
    followed_in_3 = third["forecast_calls"] - second["forecast_calls"]
    calls_in_2 = second["calls"] - first["calls"]
    assert first["forecast_calls"] == 0 and calls_in_2 <= followed_in_2 < followed_in_3, after_step
    assert third["step_divergences"] == second["step_divergences"], after_step
    print(f"  loss read after the optimizer step: step 2 followed {followed_in_2} events, "
          f"step 3 all {followed_in_3}", flush=True)

    # measured costs: the forecast guard also charges each step its victim search time (on by
    # default without deterministic_costs), and whatever it withholds, values stay the same
    for charge in (None, False):
        rt = dtr_torch.Runtime(budget=budget, heuristic="dtr_next_use", guard_charges_search=charge)
        got = train(make, STEPS, rt)
        st = rt.stats()
        assert_identical(ref, got, f"dtr_next_use, measured costs, guard_charges_search={charge}")
        assert st["peak_resident_bytes"] <= budget and st["forecast_calls"] > 0, st
        print(f"  dtr_next_use, measured costs, guard_charges_search={charge}: bit-identical; "
              f"withheld {st['forecast_withheld']} steps", flush=True)

    # manual marks, once per iteration at one place: before the forward pass, or inside the
    # iteration, where the step boundary cuts activations and gradients in two. Wherever it
    # is, the runtime follows every step from the third on (the first optimizer step makes
    # the momentum buffers; before the first mark the runtime's own detection runs), and the
    # training stays bit-identical
    steps = STEPS + 2
    ref = train(make, steps)
    for place in ("start", "before backward", "after backward"):
        torch.manual_seed(0)
        model, inputs, loss_fn = make()
        opt = torch.optim.SGD(list(model.parameters()), lr=0.05, momentum=0.9)
        torch.manual_seed(1)  # as _common.train
        rt = dtr_torch.Runtime(budget=budget, heuristic="dtr_next_use",
                               deterministic_costs=True, step_marks="manual")
        losses, after_step = [], []
        with rt:
            for _ in range(steps):
                if place == "start":
                    rt.begin_step()
                opt.zero_grad()
                loss = loss_fn(model(*inputs))
                if place == "before backward":
                    rt.begin_step()
                loss.backward()
                if place == "after backward":
                    rt.begin_step()
                opt.step()
                losses.append(dtr_torch.materialize(loss.detach()))
                after_step.append(rt.stats())
        assert_identical(ref, (losses, model, opt), f"marks {place}")
        st = rt.stats()
        assert st["steps_marked"] == steps and st["peak_resident_bytes"] <= budget, st
        # (leaving the context gives gradients and state back: not the step, one divergence)
        settled, last = after_step[2], after_step[-1]
        assert last["step_divergences"] == settled["step_divergences"], (place, settled, last)
        followed = [b["forecast_calls"] - a["forecast_calls"]
                    for a, b in zip(after_step[2:], after_step[3:])]
        assert min(followed) > 0 and len(set(followed)) == 1, (place, followed)
        print(f"  manual marks {place}: bit-identical; diverged {last['step_divergences']} times, "
              f"none after step 3; {followed[0]} calls followed a step", flush=True)
    try:
        dtr_torch.Runtime().begin_step()
    except RuntimeError as e:
        assert "step_marks='manual'" in str(e), e
    else:
        raise AssertionError("begin_step() without step_marks='manual' was accepted")
    try:
        dtr_torch.Runtime(step_marks="backward")
    except ValueError as e:
        assert "step_marks" in str(e), e
    else:
        raise AssertionError("step_marks='optimizer' was accepted")

    # steps that differ (another batch size every other step, as data-dependent programs do):
    # the runtime leaves the recorded step at the first operator that differs, and the
    # results stay bit-identical to plain PyTorch
    def varying(runtime):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64),
                                    torch.nn.Tanh(), torch.nn.Linear(64, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        xs = [torch.randn(96 + 64 * (i % 2), 32) for i in range(6)]
        losses = []

        def loop():
            for x in xs:
                opt.zero_grad()
                loss = model(x).square().mean()
                loss.backward()
                opt.step()
                losses.append(dtr_torch.materialize(loss.detach()))
        if runtime is None:
            loop()
        else:
            with runtime:
                loop()
        return losses, [p.detach().clone() for p in model.parameters()]

    plain = varying(None)
    unlimited = dtr_torch.Runtime(deterministic_costs=True)
    varying(unlimited)
    budget = int(0.95 * unlimited.stats()["peak_resident_bytes"])
    rt = dtr_torch.Runtime(budget=budget, heuristic="dtr_next_use", deterministic_costs=True)
    got = varying(rt)
    st = rt.stats()
    assert all(torch.equal(a, b) for a, b in zip(plain[0], got[0])), (plain[0], got[0])
    assert all(torch.equal(a, b) for a, b in zip(plain[1], got[1]))
    assert st["step_divergences"] > 0 and st["peak_resident_bytes"] <= budget, st
    print(f"  varying steps: bit-identical; diverged {st['step_divergences']} times, "
          f"evictions {st['evictions']}", flush=True)
    print("ok")


if __name__ == "__main__":
    main()
