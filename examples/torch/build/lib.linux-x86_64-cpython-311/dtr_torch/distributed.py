# SPDX-License-Identifier: Apache-2.0
"""torch.distributed with the bridge.

Collectives on managed tensors need nothing: ``dist.all_reduce(t)`` and its siblings reach the
bridge as the process group's operators, which run them on the tensors' memory (a managed
tensor is first made a constant version no recipe reads; docs/torch.md, "Multi-process
training"). ``all_reduce_grads`` all-reduces every gradient after ``backward()``;
``prepare_ddp`` makes a DistributedDataParallel module usable inside a Runtime context.
"""

from __future__ import annotations

from typing import Iterable, Optional

import torch
import torch.distributed as dist


def all_reduce_(t: torch.Tensor, op=dist.ReduceOp.SUM, group=None) -> torch.Tensor:
    """In-place all-reduce of ``t`` (managed or plain); returns ``t``."""
    dist.all_reduce(t, op=op, group=group)
    return t


def all_reduce_grads(params: Iterable[torch.Tensor], average: bool = True, group=None,
                     world_size: Optional[int] = None) -> None:
    """Sum (or average) the ``.grad`` of every parameter over the process group."""
    n = world_size or dist.get_world_size(group)
    for p in params:
        if p.grad is None:
            continue
        all_reduce_(p.grad, group=group)
        if average:
            with torch.no_grad():
                p.grad.div_(n)


class _ReducerProxy:
    """DistributedDataParallel's Reducer, with the calls DDP makes from Python that allocate
    or rebuild its gradient buckets run in plain PyTorch (``dtr_torch.outside()``): the
    buckets stay plain tensors the Reducer's C++ code can read directly."""

    _PLAIN = frozenset({"_rebuild_buckets", "prepare_for_forward", "prepare_for_backward",
                        "_push_all_rebuilt_params", "_set_static_graph"})

    def __init__(self, reducer):
        object.__setattr__(self, "_reducer", reducer)

    def __getattr__(self, name):
        attr = getattr(self._reducer, name)
        if name in self._PLAIN and callable(attr):
            from ._bridge import outside

            def plain(*args, **kwargs):
                with outside():
                    return attr(*args, **kwargs)
            return plain
        return attr


def prepare_ddp(ddp):
    """Make a DistributedDataParallel module usable inside a dtr_torch.Runtime context (see
    docs/torch.md, "DistributedDataParallel"). Call once, after constructing it; returns it."""
    if not isinstance(ddp.reducer, _ReducerProxy):
        ddp.reducer = _ReducerProxy(ddp.reducer)
    return ddp
