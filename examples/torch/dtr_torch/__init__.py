# SPDX-License-Identifier: Apache-2.0
"""dtr_torch: stock PyTorch training under a hard memory budget through dtr::runtime.

    import dtr_torch
    with dtr_torch.Runtime(budget=64 << 20) as rt:
        loss = loss_fn(model(x), y); loss.backward(); opt.step(); opt.zero_grad()
    print(rt.stats())

The C++ extension is imported on first use of the runtime names, so that the pure-Python
part (``dtr_torch.schema``, shared with bench/trace) works without it. See docs/torch.md.
"""

_LAZY = ("Runtime", "DTRTensor", "OutOfMemoryError", "ThrashingError", "materialize", "outside",
         "allocator_stats", "reset_allocator_peak")

#: The policy a Runtime uses unless told otherwise: dtr_eqclass's scores through the indexed
#: search, and the forecast's (dtr_next_use) where the program repeats a recorded step.
DEFAULT_HEURISTIC = "indexed:dtr_next_use"

#: Where a Runtime keeps released storages that records still read (park_released) unless
#: told otherwise: only while its policy scores with the forecast (a step-aware policy, such
#: as the default, in a recorded step the runtime follows).
DEFAULT_PARK_RELEASED = "following"

__all__ = list(_LAZY) + ["DEFAULT_HEURISTIC", "DEFAULT_PARK_RELEASED"]


def __getattr__(name):
    if name in _LAZY:
        from . import _bridge
        return getattr(_bridge, name)
    raise AttributeError(f"module 'dtr_torch' has no attribute {name!r}")
