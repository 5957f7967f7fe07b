# SPDX-License-Identifier: Apache-2.0
"""What an ATen operator's schema says about aliasing and mutation (PyTorch 1.13).

Shared by the bridge (dtr_torch) and the trace recorder (bench/trace/dtr_trace.py): both see
every operator through ``__torch_dispatch__`` and must know which arguments an operator
writes, which results are views of which arguments, and which operators are random. Only
torch is imported here, so the recorder can use this module without the C++ extension.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import torch

# Operators whose 1.13 schema does not mark an argument it writes to (later PyTorch
# releases annotate them with "(a!)"). name -> (argument names, name of the bool argument
# that must be true for the write to happen, or None).
UNANNOTATED_WRITES: Dict[str, Tuple[Tuple[str, ...], Optional[str]]] = {
    "native_batch_norm": (("running_mean", "running_var"), "training"),
    "cudnn_batch_norm": (("running_mean", "running_var"), "training"),
    "miopen_batch_norm": (("running_mean", "running_var"), "training"),
    "batch_norm_gather_stats": (("running_mean", "running_var"), None),
    "batch_norm_gather_stats_with_counts": (("running_mean", "running_var"), None),
    "rrelu_with_noise": (("noise",), "training"),
}

# Operators whose schema declares fresh results although they are views of an argument:
# ``_unsafe_view`` is what reshape/matmul use on temporaries, and the ``unsafe_`` splits (the
# gates of LSTM and GRU cells) return views whose version counters autograd does not share.
UNANNOTATED_VIEWS = frozenset({"_unsafe_view", "unsafe_split", "unsafe_split_with_sizes", "unsafe_chunk"})

# Random operators whose 1.13 schema has no Generator argument and no
# nondeterministic_seeded tag.
_RANDOM_BY_NAME = frozenset({"native_dropout", "_fused_dropout", "rrelu_with_noise", "rrelu"})


def bind_schema(schema, args, kwargs) -> Dict[str, object]:
    """Map schema argument names to the values actually passed."""
    bound: Dict[str, object] = {}
    pos = [a for a in schema.arguments if not a.kwarg_only]
    for a, v in zip(pos, args):
        bound[a.name] = v
    for k, v in (kwargs or {}).items():
        bound[k] = v
    return bound


def tensors_in(v) -> List[torch.Tensor]:
    """The tensors in an argument value (a tensor, or nested lists/tuples of them)."""
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        out: List[torch.Tensor] = []
        for x in v:
            out.extend(tensors_in(x))
        return out
    return []


def written_arguments(schema) -> List[Tuple[int, Optional[int]]]:
    """Arguments the operator writes: (argument index, index of the bool argument that must
    be true for the write, or None). From the schema's ``(a!)`` annotations and
    UNANNOTATED_WRITES."""
    names = [a.name for a in schema.arguments]
    extra = UNANNOTATED_WRITES.get(schema.name.split("::")[-1])
    out: List[Tuple[int, Optional[int]]] = []
    for i, a in enumerate(schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            out.append((i, None))
        elif extra is not None and a.name in extra[0]:
            cond = extra[1]
            out.append((i, names.index(cond) if cond is not None and cond in names else None))
    return out


def written_flat_indices(schema, bound: Dict[str, object]) -> Tuple[List[torch.Tensor], List[int]]:
    """Tensor arguments flattened in schema order, and the positions in that list of those the
    call writes (conditions such as batch norm's ``training`` evaluated on ``bound``)."""
    writes = {i: c for i, c in written_arguments(schema)}
    flat: List[torch.Tensor] = []
    written: List[int] = []
    for i, a in enumerate(schema.arguments):
        ts = tensors_in(bound.get(a.name))
        w = i in writes
        if w and writes[i] is not None:
            w = bool(bound.get(schema.arguments[writes[i]].name, False))
        for t in ts:
            if w:
                written.append(len(flat))
            flat.append(t)
    return flat, written


def return_alias_arguments(schema) -> List[Tuple[int, bool]]:
    """Per return: (index of the argument whose alias set it shares, or -1; whether that
    alias is a write, i.e. the operator returns an argument it updated in place)."""
    out: List[Tuple[int, bool]] = []
    for r in schema.returns:
        ai = -1
        if r.alias_info is not None:
            sets = set(r.alias_info.before_set) | set(r.alias_info.after_set)
            for i, a in enumerate(schema.arguments):
                if a.alias_info is not None and sets & set(a.alias_info.before_set):
                    ai = i
                    break
            if ai < 0 and not sets:
                # Tensor(a)[] results: 1.13 keeps the set on the element type, which Python
                # does not expose; the argument is the one whose alias set widens to "*".
                for i, a in enumerate(schema.arguments):
                    if a.alias_info is not None and "*" in set(a.alias_info.after_set):
                        ai = i
                        break
        out.append((ai, r.alias_info is not None and r.alias_info.is_write))
    return out


def alias_source(schema, bound, flat, r, sid, arg_sid_index, storage_id) -> int:
    """Index in ``flat`` of the argument a view output ``r`` (on storage ``sid``) aliases:
    an argument whose alias set a return shares (``Tensor(a) -> Tensor(a)``), else the first
    argument on that storage."""
    ret_sets = set()
    for ret in schema.returns:
        if ret.alias_info is not None:
            ret_sets |= set(ret.alias_info.after_set) | set(ret.alias_info.before_set)
    i = 0
    for a in schema.arguments:
        for t in tensors_in(bound.get(a.name)):
            if a.alias_info is not None and ret_sets & set(a.alias_info.before_set) \
                    and storage_id(t) == sid:
                return i
            i += 1
    return arg_sid_index[sid]


def is_random(func) -> bool:
    """True for operators that draw from a generator (recomputation must replay its state)."""
    tags = getattr(func, "tags", ())
    if torch.Tag.nondeterministic_seeded in tags:
        return True
    if func._schema.name.split("::")[-1] in _RANDOM_BY_NAME:
        return True
    return any("Generator" in str(a.type) for a in func._schema.arguments)


@dataclass(frozen=True)
class OpKind:
    """How the bridge executes one operator overload."""

    kind: int                     # COMPUTE, VIEW, DETACH_INPLACE or INPLACE_VIEW
    writes: Tuple[Tuple[int, int], ...]  # (argument, condition argument or -1)
    return_alias: Tuple[int, ...]  # per return: written argument it returns, or -1
    random: bool
    generator_arg: int
    first_list_arg: int


COMPUTE, VIEW, DETACH_INPLACE, INPLACE_VIEW = 0, 1, 2, 3


def classify(func) -> OpKind:
    """Decide, from the schema and tags alone, how an operator maps onto the runtime."""
    schema = func._schema
    tags = getattr(func, "tags", ())
    rets = return_alias_arguments(schema)
    writes = tuple((i, -1 if c is None else c) for i, c in written_arguments(schema))
    name = schema.name.split("::")[-1]
    if torch.Tag.inplace_view in tags:
        kind = DETACH_INPLACE if name == "detach_" else INPLACE_VIEW
    elif (rets and any(ai >= 0 and not w for ai, w in rets)) or name in UNANNOTATED_VIEWS:
        kind = VIEW
    else:
        kind = COMPUTE
    ret_alias = tuple(ai if w else -1 for ai, w in rets)
    gen = next((i for i, a in enumerate(schema.arguments) if "Generator" in str(a.type)), -1)
    first_list = next((i for i, a in enumerate(schema.arguments)
                       if str(a.type) in ("List[Tensor]", "List[Optional[Tensor]]")), -1)
    return OpKind(kind, writes, ret_alias, is_random(func), gen, first_list)


def describe(func) -> str:
    """One line for error messages and docs: the operator and how it is classified."""
    k = classify(func)
    kinds = {COMPUTE: "compute", VIEW: "view", DETACH_INPLACE: "detach_", INPLACE_VIEW: "in-place view"}
    return (f"{func}: {kinds[k.kind]}, writes {list(k.writes)}, returns written {list(k.return_alias)}, "
            f"random {k.random}")


__all__ = ["UNANNOTATED_WRITES", "UNANNOTATED_VIEWS", "bind_schema", "tensors_in", "written_arguments",
           "written_flat_indices", "return_alias_arguments", "alias_source", "is_random",
           "classify", "describe", "OpKind", "COMPUTE", "VIEW", "DETACH_INPLACE", "INPLACE_VIEW"]
