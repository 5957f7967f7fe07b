# SPDX-License-Identifier: Apache-2.0
"""dtr_torch.Runtime: PyTorch's ATen operators executed through dtr::runtime.

Inside ``with Runtime(budget=...) as rt:`` every ATen operator reaches the C++ bridge
(``_dtr_torch``) through a dispatch key of its own, below autograd: the bridge runs it as one
runtime call, in C++, with no Python on the way. Its results are tensors whose bytes are a
runtime storage (``dtr_torch.DTRTensor`` tests for them); plain tensors that reach an operator
(parameters, inputs, buffers, optimizer state created outside) are adopted as runtime constants
sharing their memory. Python runs once per operator overload (its classification, from
``dtr_torch.schema``) and at the edges of a step (backward, leaving the context). See
docs/torch.md.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from typing import Optional, Union

import torch

from . import DEFAULT_HEURISTIC, DEFAULT_PARK_RELEASED
from . import schema as _schema

try:  # installed: the extension sits in the package
    from . import _dtr_torch as _ext  # type: ignore
except ImportError:  # uninstalled (meson devenv): the build directory is on sys.path
    import _dtr_torch as _ext  # type: ignore


class OutOfMemoryError(MemoryError):
    """The budget cannot hold what an operator needs. The text is dtr::out_of_memory's,
    prefixed with the ATen operator's name. The runtime and the model stay usable: raise the
    budget (Runtime.set_budget) and run the step again."""


class ThrashingError(RuntimeError):
    """Rematerialization cost exceeded the runtime's remat_limit (the budget is too tight
    to make progress)."""


_ext.set_error_types(OutOfMemoryError, ThrashingError)

# Operators that change a tensor's sizes or strides in place (a view of the same storage),
# with or without an inplace_view tag: the bridge changes the tensor's geometry.
_METADATA_INPLACE = frozenset({"swapdims_", "swapaxes_", "transpose_", "t_", "squeeze_",
                               "unsqueeze_", "as_strided_"})
# Operators that give a tensor other memory in place: refused (the runtime owns the memory).
_STORAGE_INPLACE = frozenset({"set_", "resize_", "resize_as_", "_resize_output_"})
_RESIZE = 7  # op_info::resize

# In-place operators whose namesake out-of-place operator may return an argument itself
# (aten::copy returns `src` when no conversion is needed): always copy-on-write.
_NO_REWRITE = frozenset({"copy_"})


def _op_info(qualified_name: str, overload: str):
    """How the bridge executes the operator ``qualified_name.overload`` (called by the C++
    side once per overload, the first time it reaches the bridge)."""
    ns, name = qualified_name.split("::", 1)
    func = getattr(getattr(getattr(torch.ops, ns), name), overload or "default")
    return _info(func)


def _info(func):
    s = func._schema
    k = _schema.classify(func)
    kind = k.kind
    name = s.name.split("::")[-1]
    if name in _METADATA_INPLACE:
        kind = _schema.INPLACE_VIEW
    elif name in _STORAGE_INPLACE:
        kind = _RESIZE
    functional = None
    if (kind == _schema.COMPUTE and name.endswith("_") and not name.startswith("_") and not k.random
            and name not in _NO_REWRITE
            and k.writes == ((0, -1),) and k.return_alias == (0,) and s.name.startswith("aten::")):
        # the out-of-place form: same name without "_", same overload, same arguments
        packet = getattr(torch.ops.aten, name[:-1], None)
        fn = getattr(packet, s.overload_name or "default", None) if packet is not None else None
        if (fn is not None and [a.name for a in fn._schema.arguments] == [a.name for a in s.arguments]
                and len(fn._schema.returns) == 1 and fn._schema.returns[0].alias_info is None):
            functional = _info(fn)
    return _ext.OpInfo(s.name, s.overload_name, kind, list(k.writes), list(k.return_alias), k.random,
                       k.generator_arg, k.first_list_arg, functional)


class _ManagedMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, torch.Tensor) and _ext.is_managed(obj)


class DTRTensor(metaclass=_ManagedMeta):
    """``isinstance(t, DTRTensor)``: whether a dtr runtime manages ``t``'s storage. Such a
    tensor is a ``torch.Tensor`` with sizes, strides and dtype but no memory of its own; its
    operators run through its runtime (also after the ``with`` block), and ``materialize``,
    ``.numpy()``, ``.tolist()``, printing and pickling read a copy of its value."""

    def __init__(self, *args, **kwargs):
        raise TypeError("DTRTensor is not constructed: operators inside a dtr_torch.Runtime make them")


def materialize(t):
    """``t`` as a plain tensor: a managed tensor is copied out of its runtime (recomputed
    first if it was evicted), anything else is returned as it is."""
    if isinstance(t, torch.Tensor):
        owner = _ext.owner(t)
        if owner is not None:
            return owner.materialize(t)
    return t


@contextlib.contextmanager
def outside():
    """Plain PyTorch for a moment inside a ``Runtime`` context: operators on plain tensors
    are not routed to the runtime (DistributedDataParallel's bucket set-up uses it)."""
    was = _ext.set_included(False)
    try:
        yield
    finally:
        _ext.set_included(was)


# Tensor methods that read a tensor's memory directly, below the dispatcher: for a managed
# tensor they read a materialized copy instead (anything else goes through unchanged).
def _reading_copy(method):
    def read(self, *args, **kwargs):
        if _ext.is_managed(self):
            self = materialize(self)
        return method(self, *args, **kwargs)
    read.__name__ = method.__name__
    read.__doc__ = method.__doc__
    return read


for _name in ("numpy", "tolist", "__reduce_ex__", "__deepcopy__"):
    setattr(torch.Tensor, _name, _reading_copy(getattr(torch.Tensor, _name)))


_active: Optional["Runtime"] = None


def _on_optimizer_step(mark):
    """Calls ``mark()`` after every optimizer step until the returned function is called.

    The end of the optimizer step is where a training loop's iteration ends, and it is the
    one place every training loop has (a mark anywhere else works as well once the steps
    repeat: docs/torch.md, "Steps"). 2.x has a global post-step hook; 1.13's
    optimizers call ``Optimizer._optimizer_step_code()`` after each step (the profiler's
    entry point, a no-op), which is wrapped instead."""
    import torch.optim.optimizer as optimizer_module
    register = getattr(optimizer_module, "register_optimizer_step_post_hook", None)
    if register is not None:
        handle = register(lambda optimizer, args, kwargs: mark())
        return handle.remove
    original = torch.optim.Optimizer._optimizer_step_code

    def step_code(self):
        original(self)
        mark()

    torch.optim.Optimizer._optimizer_step_code = step_code

    def remove():
        torch.optim.Optimizer._optimizer_step_code = original
    return remove


# torch.compile (PyTorch 2.x). A compiled region's kernels read tensors' memory directly and
# its tracing runs fake tensors through the dispatcher: neither can go through the runtime, and
# a compiled region run on managed tensors would read memory that is not their value. So
# entering one inside a Runtime context raises instead. Dynamo switches its frame evaluation on
# through eval_frame._maybe_set_eval_frame at the entry of every compiled region (compiling or
# running a cached graph: callback not None) and off again at its exit (None); wrapping that
# one function catches every entry. torch._dynamo is imported lazily (it costs seconds), so the
# wrapper goes in when it appears: at torch.compile's first call, or at Runtime.__enter__.
_COMPILED_REGION_ERROR = (
    "dtr_torch: unsupported: a torch.compile'd region was entered inside a Runtime context; its "
    "compiled kernels would bypass the runtime. Call the eager module inside the context (for a "
    "module compiled with torch.compile(m), that is m itself, or compiled._orig_mod)")


def _refuse_compiled_regions() -> None:
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    original = getattr(eval_frame, "_maybe_set_eval_frame", None)
    if original is None or getattr(original, "_dtr_torch_guard", False):
        return

    def guarded(callback):
        if _active is not None and callback is not None:
            raise RuntimeError(_COMPILED_REGION_ERROR)
        return original(callback)

    guarded._dtr_torch_guard = True  # type: ignore[attr-defined]
    eval_frame._maybe_set_eval_frame = guarded


if hasattr(torch, "compile"):
    _torch_compile = torch.compile

    def _compile(*args, **kwargs):
        compiled = _torch_compile(*args, **kwargs)
        _refuse_compiled_regions()
        return compiled

    _compile.__doc__ = _torch_compile.__doc__
    _compile.__wrapped__ = _torch_compile  # type: ignore[attr-defined]
    torch.compile = _compile


class Runtime:
    """A dtr::runtime that executes PyTorch's operators inside ``with``.

    budget:      hard limit on the bytes of the storages the runtime manages (None: no limit)
    heuristic:   eviction policy by name: indexed:dtr_next_use (the default: dtr_eqclass's
                 scores through the indexed search, the forecast's where the program repeats
                 a recorded step; docs/torch.md), dtr_eqclass, dtr, dtr_local, dtr_held,
                 dtr_held_bounded, dtr_next_use, dtr_held_next_use, indexed:dtr_eqclass, lru,
                 largest, msps
    device:      where tensors live ("cpu"; "cuda" with a CUDA build of PyTorch)
    remat_limit: total rematerialization time (ns) after which operators fail with
                 ThrashingError (None: no limit)
    deterministic_costs: record each operator's cost as the bytes it reads (plus a constant)
                 instead of its measured time, so that eviction decisions, and so whether a
                 tight budget fits, do not depend on the machine's timing (tests)
    inplace_rewrite: run eligible in-place operators in their out-of-place form instead of
                 copy-on-write (the same bytes, no copy; docs/torch.md)
    cost_clock:  what an operator's recorded cost measures: "wall" (the default; right where
                 kernels run on other threads or a device) or "thread_cpu" (the calling
                 thread's CPU time: with one torch thread on a CPU, the kernel's own time,
                 which other processes on the machine do not inflate)
    park_released: a storage the program releases while a recorded operator still reads it
                 stays resident, evictable, until the policy evicts it or no record reads it
                 (dtr::dealloc_policy::keep_resident instead of eager_evict; outside
                 backward, once the budget has bound). "following" (what None gives, but
                 "off" beside dealloc="banish"): only while the policy scores with the
                 forecast (a step-aware policy, as the default, in a recorded step the
                 runtime follows with the forecast in force); True or "always": in every
                 step; False or "off": never, which dealloc="banish" needs (docs/torch.md)
    restore:     runtime_options::restore: "yield_when_full" (default), "planned" or "hold"
    dealloc:     runtime_options::dealloc: "eager_evict" (default) or "banish"
    host_memory: bytes of host memory the runtime may copy victims out to instead of
                 dropping them (offload; None: no host tier). A victim leaves by copy when
                 its two transfers cost less than recomputing it; gradients and optimizer
                 state may leave too (once nothing evictable is left), parameters, buffers
                 and inputs stay on the device. The copies are synchronous (docs/torch.md,
                 "Offload to host memory")
    offload_bandwidth: the host tier's transfer model, bytes per second (None: measured at
                 construction, from 32 MiB copies between the device and host memory)
    offload_latency_ns: ns added to every transfer (with offload_bandwidth; measured with it
                 otherwise)
    step_marks:  where the training loop's steps begin for the runtime's step tracker
                 (dtr::runtime::begin_step): "optimizer" (the first operator after every
                 optimizer step begins one, so that reading the loss after the optimizer
                 step ends the step that made it) or "manual" (the program calls
                 Runtime.begin_step(), once per iteration at the same place, best before
                 the forward pass). From the second step on, the heuristics dtr_next_use
                 and dtr_held_next_use score with the time to each storage's next read
                 (docs/heuristics.md)
    guard_forecast: runtime_options::guard_forecast: after a step where following the
                 forecast cost more than the last step without it, the next steps run
                 on the online scores, and the forecast is tried again later (docs/design.md,
                 "The forecast guard"); False gives it to every followed step
    guard_charges_search: runtime_options::guard_charges_search: the guard also charges
                 each step the runtime's victim search time, so that a forecast whose
                 scoring costs more time than its recomputation saves is withheld too (None,
                 the default: on, unless deterministic_costs, whose cost unit is not time)
    repeat_costs: runtime_options::repeat_costs: what an operator that repeats the recorded
                 step records as its measured cost: "lowest" (the default: the lowest time
                 measured for it at its place in the step, so that timing noise does not
                 redraw the victims from step to step) or "measured" (this call's time)
    """

    def __init__(self, budget: Optional[int] = None, heuristic: Optional[str] = None,
                 device: str = "cpu", remat_limit: Optional[float] = None,
                 deterministic_costs: bool = False, inplace_rewrite: bool = True,
                 cost_clock: str = "wall", park_released: Union[bool, str, None] = None,
                 restore: str = "yield_when_full", dealloc: str = "eager_evict",
                 host_memory: Optional[int] = None, offload_bandwidth: Optional[float] = None,
                 offload_latency_ns: float = 0.0, step_marks: str = "optimizer",
                 guard_forecast: bool = True, guard_charges_search: Optional[bool] = None,
                 repeat_costs: str = "lowest"):
        heuristic = DEFAULT_HEURISTIC if heuristic is None else heuristic
        b = (1 << 64) - 1 if budget is None else int(budget)
        if b <= 0:
            raise ValueError(f"dtr_torch.Runtime: budget must be positive, got {budget}")
        host = 0 if host_memory is None else int(host_memory)
        if host_memory is not None and host <= 0:
            raise ValueError(f"dtr_torch.Runtime: host_memory must be positive, got {host_memory}")
        if host == 0 and offload_bandwidth is not None:
            raise ValueError("dtr_torch.Runtime: offload_bandwidth needs host_memory")
        if offload_bandwidth is not None and not offload_bandwidth > 0:
            raise ValueError("dtr_torch.Runtime: offload_bandwidth must be positive, got "
                             f"{offload_bandwidth}")
        if step_marks not in ("optimizer", "manual"):
            raise ValueError("dtr_torch.Runtime: step_marks must be 'optimizer' or 'manual', got "
                             f"{step_marks!r}")
        self._step_marks = step_marks
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("dtr_torch.Runtime: device='cuda' but torch.cuda.is_available() is False")
        self._bridge = _ext.Bridge(b, heuristic, str(self.device), restore, dealloc, host,
                                   float(offload_bandwidth or 0.0), float(offload_latency_ns),
                                   bool(guard_forecast),
                                   not deterministic_costs if guard_charges_search is None
                                   else bool(guard_charges_search), str(repeat_costs))
        self._bridge.set_cost_clock(cost_clock)
        if park_released is None:  # banish frees what parking would keep: off beside it
            park_released = "off" if dealloc == "banish" else DEFAULT_PARK_RELEASED
        if isinstance(park_released, bool):
            park_released = "always" if park_released else "off"
        self._bridge.set_park_released(str(park_released))  # the bridge refuses others by name
        if remat_limit is not None:
            self._bridge.set_remat_limit(float(remat_limit))
        self._bridge.set_deterministic_costs(bool(deterministic_costs))
        self._bridge.set_inplace_rewrite(bool(inplace_rewrite))
        self._saved_backward = None
        self._saved_grad = None
        self._step_hook = None

    # --- the context ------------------------------------------------------------------
    def __enter__(self) -> "Runtime":
        global _active
        if _active is not None:
            raise RuntimeError("dtr_torch: a Runtime context is already active (they do not nest)")
        _refuse_compiled_regions()
        self._bridge.enter()
        _active = self
        self._saved_backward = torch.autograd.backward
        self._saved_grad = torch.autograd.grad
        saved, saved_grad, bridge = self._saved_backward, self._saved_grad, self._bridge

        def backward(*args, **kwargs):
            bridge.set_in_backward(True)
            try:
                out = saved(*args, **kwargs)
            finally:
                bridge.set_in_backward(False)
            bridge.promote_leaf_grads()
            # The loss outlives its backward in most loops (`loss` is overwritten only by the
            # next step): as a constant it no longer keeps the step's lineage, and with it the
            # parameter versions the step read, alive through the optimizer step.
            roots = args[0] if args else kwargs.get("tensors")
            for t in (roots if isinstance(roots, (list, tuple)) else [roots]):
                if isinstance(t, torch.Tensor):
                    bridge.promote(t)
            return out

        def grad(*args, **kwargs):
            bridge.set_in_backward(True)
            try:
                return saved_grad(*args, **kwargs)
            finally:
                bridge.set_in_backward(False)

        torch.autograd.backward = backward
        torch.autograd.grad = grad
        self._step_hook = None
        if self._step_marks == "optimizer":
            # the context opens where a training loop starts: the first step begins here (else
            # the runtime would look for a repeated sequence inside it until the first mark)
            bridge.begin_step()
            # each optimizer step ends one; the next begins at the next operator, so that
            # reading the loss after the optimizer step belongs to the step that made it
            self._step_hook = _on_optimizer_step(bridge.begin_step_at_next_call)
        if self.device.type == "cpu":
            _ext.set_allocator_caching(True)
        return self

    def __exit__(self, *exc) -> None:
        global _active
        try:
            self._bridge.exit()
        finally:
            torch.autograd.backward = self._saved_backward
            torch.autograd.grad = self._saved_grad
            if self._step_hook is not None:
                self._step_hook()
                self._step_hook = None
            _active = None
            _ext.set_allocator_caching(False)
        self._give_back()

    def begin_step(self) -> None:
        """Marks the beginning of a training step (with step_marks="manual"): call it once
        per iteration, at the same place in each."""
        if self._step_marks != "manual":
            raise RuntimeError("dtr_torch: Runtime.begin_step() needs step_marks='manual' "
                               "(the default, 'optimizer', marks each optimizer step itself)")
        self._bridge.begin_step()

    def _owned(self, v) -> bool:
        return isinstance(v, torch.Tensor) and self._bridge.owns(v)

    def _give_back(self) -> None:
        """On exit: gradients and optimizer state become plain tensors again, one at a time
        under the budget (reading one may copy it back from the host tier or recompute it,
        and the runtime's storage goes as soon as its plain copy exists). Leaving must not
        fail: where one does not fit, the budget is lifted for the rest of the give-back and
        restored afterwards where what is resident fits it."""
        budget = self._bridge.budget
        lifted = False

        def plain(v):
            nonlocal lifted
            try:
                return self._bridge.materialize(v)
            except (OutOfMemoryError, ThrashingError):
                if lifted:
                    raise
                lifted = True
                self._bridge.set_budget((1 << 64) - 1)
                return self._bridge.materialize(v)

        try:
            self._give_back_now(plain)
        finally:
            if lifted:
                try:
                    self._bridge.set_budget(budget)
                except ValueError:
                    pass  # what is resident now does not fit the old budget: keep it lifted

    def _give_back_now(self, plain) -> None:
        pairs = self._bridge.leaf_grad_pairs()
        while pairs:
            p, g = pairs.pop()
            if self._owned(g):
                p.grad = plain(g)
            del p, g  # the last reference to the managed gradient: its storage leaves the runtime
        for obj in gc.get_objects():
            # type(), not isinstance(): isinstance reads obj.__class__, and some objects warn
            # on attribute access (torch.distributed's deprecated reduce_op)
            if issubclass(type(obj), torch.optim.Optimizer):
                for st in obj.state.values():
                    for k, v in list(st.items()):
                        if self._owned(v):
                            st[k] = plain(v)
                        del v
        self._bridge.drop_adoption_refs()

    # --- queries ----------------------------------------------------------------------
    def stats(self) -> dict:
        """The runtime's counters (dtr::counters) plus the bridge's own."""
        return self._bridge.stats()

    @property
    def budget(self) -> int:
        return self._bridge.budget

    def set_budget(self, nbytes: int) -> None:
        """Change the budget (evicting down to it); ValueError if that cannot be done."""
        self._bridge.set_budget(int(nbytes))

    def materialize(self, t):
        return materialize(t)

    def evict(self, t) -> bool:
        """Evict ``t``'s storage now if it can be recomputed (tests, experiments)."""
        return self._bridge.evict(t) if isinstance(t, torch.Tensor) else False

    def is_resident(self, t) -> bool:
        return self._bridge.resident(t)

    def is_constant(self, t) -> bool:
        return self._bridge.is_constant(t)

    def check_invariants(self) -> None:
        self._bridge.check_invariants()


def allocator_stats() -> dict:
    """Bytes PyTorch's CPU allocator holds now, its peak since reset_allocator_peak(), and
    the total ever allocated (the bridge wraps the allocator when it is imported)."""
    return _ext.allocator_stats()


def reset_allocator_peak() -> None:
    _ext.reset_allocator_peak()
