# SPDX-License-Identifier: Apache-2.0
"""torch.distributed with the bridge: collectives on DTRTensors.

Collectives in PyTorch 1.13 (ProcessGroup::allreduce and friends) are not ATen operators: they
read and write tensor memory directly, which a DTRTensor does not own. ``all_reduce_`` runs
the collective on a plain copy and writes the result back as an in-place update of the
runtime tensor. Under ``torch.no_grad()`` that update makes a constant, so the collective is
never part of a recipe and is never recomputed.

DistributedDataParallel is not supported yet: its Reducer copies gradients into buckets and
hands them to the process group from C++ hooks, below the bridge. Use ``all_reduce_grads``
after ``loss.backward()`` instead (data parallelism without buckets).
"""

from __future__ import annotations

from typing import Iterable, Optional

import torch
import torch.distributed as dist


def all_reduce_(t: torch.Tensor, op=dist.ReduceOp.SUM, group=None) -> torch.Tensor:
    """In-place all-reduce of ``t`` (a DTRTensor or a plain tensor); returns ``t``."""
    from ._bridge import DTRTensor, _outside
    if not isinstance(t, DTRTensor):
        with _outside():
            dist.all_reduce(t, op=op, group=group)
        return t
    with _outside():
        plain = t.materialize()
        dist.all_reduce(plain, op=op, group=group)
    with torch.no_grad():
        t.copy_(plain)
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
    or rebuild its gradient buckets run in plain PyTorch (the bridge's mode popped): the
    buckets stay plain tensors the Reducer's C++ code can read directly."""

    _PLAIN = frozenset({"_rebuild_buckets", "prepare_for_forward", "prepare_for_backward",
                        "_push_all_rebuilt_params", "_set_static_graph"})

    def __init__(self, reducer):
        object.__setattr__(self, "_reducer", reducer)

    def __getattr__(self, name):
        attr = getattr(self._reducer, name)
        if name in self._PLAIN and callable(attr):
            from ._bridge import _outside

            def plain(*args, **kwargs):
                with _outside():
                    return attr(*args, **kwargs)
            return plain
        return attr


def prepare_ddp(ddp):
    """Make a DistributedDataParallel module usable inside a dtr_torch.Runtime context (see
    docs/torch.md, "DistributedDataParallel"). Call once, after constructing it; returns it."""
    if not isinstance(ddp.reducer, _ReducerProxy):
        ddp.reducer = _ReducerProxy(ddp.reducer)
    return ddp
