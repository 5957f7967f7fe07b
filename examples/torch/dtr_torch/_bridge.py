# SPDX-License-Identifier: Apache-2.0
"""dtr_torch.Runtime: PyTorch's ATen operators executed through dtr::runtime.

Inside ``with Runtime(budget=...) as rt:`` a TorchDispatchMode sends every ATen operator to
the C++ bridge (``_dtr_torch.Bridge.dispatch``), which runs it as one runtime call. Results
are ``DTRTensor`` wrappers (``_make_wrapper_subclass``: sizes, strides, dtype, no memory)
holding a reference to a runtime storage; plain tensors that reach an operator (parameters,
inputs, buffers, optimizer state created outside) are adopted as runtime constants sharing
their memory. See docs/torch.md.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Dict, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode, _pop_mode, _push_mode

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


# Operators that change a tensor's metadata or storage in place without an inplace_view tag.
_METADATA_INPLACE = frozenset({"set_", "resize_", "resize_as_", "_resize_output_", "swapdims_",
                               "swapaxes_", "transpose_", "t_", "squeeze_", "unsqueeze_",
                               "as_strided_"})

_infos: Dict[object, object] = {}

# In-place operators whose namesake out-of-place operator may return an argument itself
# (aten::copy returns `src` when no conversion is needed): always copy-on-write.
_NO_REWRITE = frozenset({"copy_"})


_PASS = object()  # operators run as they are (the profiler's record_function markers)
_COLLECTIVE = object()  # c10d:: operators (torch.distributed's collectives, 1.13)


def _info(func):
    s = func._schema
    if s.name.startswith("profiler::"):
        _infos[func] = _PASS
        return _PASS
    if s.name.startswith("c10d::"):
        _infos[func] = _COLLECTIVE
        return _COLLECTIVE
    k = _schema.classify(func)
    kind = k.kind
    name = s.name.split("::")[-1]
    if name in _METADATA_INPLACE:
        kind = _schema.INPLACE_VIEW
    functional = None
    if (kind == _schema.COMPUTE and name.endswith("_") and not name.startswith("_") and not k.random
            and name not in _NO_REWRITE
            and k.writes == ((0, -1),) and k.return_alias == (0,) and s.name.startswith("aten::")):
        # the out-of-place form: same name without "_", same overload, same arguments
        packet = getattr(torch.ops.aten, name[:-1], None)
        fn = getattr(packet, s.overload_name or "default", None) if packet is not None else None
        if (fn is not None and [a.name for a in fn._schema.arguments] == [a.name for a in s.arguments]
                and len(fn._schema.returns) == 1 and fn._schema.returns[0].alias_info is None):
            functional = _infos.get(fn) or _info(fn)
    i = _ext.OpInfo(s.name, s.overload_name, kind, list(k.writes), list(k.return_alias), k.random,
                    k.generator_arg, k.first_list_arg, functional)
    _infos[func] = i
    return i


class DTRTensor(torch.Tensor):
    """A tensor whose storage a dtr runtime manages (it owns no memory itself)."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        # Reached when no Runtime context is active (a result used after the with-block):
        # the operator still runs through the runtime that owns the tensor.
        rt = None
        for a in _schema.tensors_in(list(args) + list((kwargs or {}).values())):
            rt = getattr(a, "_dtr_rt", None)
            if rt is not None:
                break
        if rt is None:
            raise RuntimeError(f"dtr_torch: {func} on a DTRTensor without a runtime")
        info = _infos.get(func) or _info(func)
        if info is _PASS:
            return func(*args, **(kwargs or {}))
        if info is _COLLECTIVE:
            return _collective(rt._bridge, func, args, kwargs)
        return rt._bridge.dispatch(info, tuple(args), kwargs or {})

    def materialize(self) -> torch.Tensor:
        """A plain tensor holding this tensor's value (a copy)."""
        return self._dtr_rt._bridge.materialize(self._dtr_ref, self)

    def __repr__(self, *, tensor_contents=None):  # noqa: D105
        with _outside():
            return "DTRTensor(" + repr(self.materialize()) + ")"

    def __format__(self, spec):  # noqa: D105
        if self.dim() == 0:
            return self.item().__format__(spec)
        return repr(self) if not spec else object.__format__(self, spec)

    def numpy(self, *args, **kwargs):  # noqa: D102
        with _outside():
            return self.materialize().numpy(*args, **kwargs)

    def tolist(self):  # noqa: D102
        with _outside():
            return self.materialize().tolist()

    def __reduce_ex__(self, proto):
        return self.materialize().__reduce_ex__(proto)


def _collective(bridge, func, args, kwargs):
    """A torch.distributed collective (c10d::allreduce_, broadcast_, allgather_, ...): the
    process group reads and writes its tensors' memory itself, possibly after returning (the
    Work). Every tensor argument is treated as written: a runtime tensor is first made a
    constant version that no recipe reads (Bridge.writable_alias: a copy if it was computed or
    is read by a live record) and the collective gets a plain tensor over that memory; plain
    tensors (DistributedDataParallel's buckets) are passed as they are, unless a live record
    reads them (then the collective would change what a rematerialization reads: an error).
    Collectives are never recorded, so never recomputed."""
    def plain(v):
        if isinstance(v, DTRTensor):
            if v._dtr_rt._bridge is not bridge:
                raise RuntimeError("dtr_torch: unsupported: a collective on a tensor of another runtime")
            return bridge.writable_alias(v._dtr_ref, v)
        if isinstance(v, torch.Tensor):
            ref = getattr(v, "_dtr_ref", None)
            if ref is not None and ref.runtime_id == bridge.id and bridge.readers(ref) != 0:
                raise RuntimeError(f"dtr_torch: unsupported: {func} writes a tensor that recorded operators "
                                   "still read (their recomputation would see the collective's result)")
            return v
        if isinstance(v, (list, tuple)):
            return type(v)(plain(x) for x in v)
        return v
    out = func(*[plain(a) for a in args], **{k: plain(v) for k, v in (kwargs or {}).items()})
    # results (1.13): Work, or (the first argument's tensors, Work): the caller's own tensors
    if isinstance(out, tuple) and len(out) == 2 and args:
        return (args[0], out[1])
    return out


@contextlib.contextmanager
def _outside():
    """Plain PyTorch for a moment (printing a materialized copy inside the context)."""
    modes = []
    while _get_current_dispatch_mode() is not None and isinstance(_get_current_dispatch_mode(), _Mode):
        modes.append(_pop_mode())
    try:
        yield
    finally:
        for m in reversed(modes):
            _push_mode(m)


def materialize(t):
    """``t`` as a plain tensor: DTRTensors are copied out of their runtime, anything else is
    returned as it is."""
    if isinstance(t, DTRTensor):
        return t.materialize()
    return t


class _Mode(TorchDispatchMode):
    def __init__(self, rt: "Runtime"):
        super().__init__()
        self._bridge = rt._bridge

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        info = _infos.get(func) or _info(func)
        if info is _PASS:
            return func(*args, **(kwargs or {}))
        if info is _COLLECTIVE:
            return _collective(self._bridge, func, args, kwargs)
        return self._bridge.dispatch(info, args, kwargs or {})


_active: Optional["Runtime"] = None


class Runtime:
    """A dtr::runtime that executes PyTorch's operators inside ``with``.

    budget:      hard limit on the bytes of the storages the runtime manages (None: no limit)
    heuristic:   eviction policy by name (dtr_eqclass, dtr, dtr_local, dtr_held,
                 dtr_held_bounded, lru, largest, msps)
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
                 backward, once the budget has bound); not with dealloc="banish"
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
    """

    def __init__(self, budget: Optional[int] = None, heuristic: str = "dtr_eqclass",
                 device: str = "cpu", remat_limit: Optional[float] = None,
                 deterministic_costs: bool = False, inplace_rewrite: bool = True,
                 cost_clock: str = "wall", park_released: bool = False,
                 restore: str = "yield_when_full", dealloc: str = "eager_evict",
                 host_memory: Optional[int] = None, offload_bandwidth: Optional[float] = None,
                 offload_latency_ns: float = 0.0):
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
        self._bridge = _ext.Bridge(b, heuristic, device, self._make_wrapper, OutOfMemoryError,
                                   ThrashingError, restore, dealloc, host,
                                   float(offload_bandwidth or 0.0), float(offload_latency_ns))
        self._bridge.set_cost_clock(cost_clock)
        self._bridge.set_park_released(bool(park_released))
        if remat_limit is not None:
            self._bridge.set_remat_limit(float(remat_limit))
        self._bridge.set_deterministic_costs(bool(deterministic_costs))
        self._bridge.set_inplace_rewrite(bool(inplace_rewrite))
        self._hooks = []
        self._bridge.set_leaf_callback(self._leaf_hook)
        self._mode: Optional[_Mode] = None
        self._saved_backward = None
        self.device = torch.device(device)

    # --- the context ------------------------------------------------------------------
    def __enter__(self) -> "Runtime":
        global _active
        if _active is not None:
            raise RuntimeError("dtr_torch: a Runtime context is already active (they do not nest)")
        _active = self
        self._mode = _Mode(self)
        self._mode.__enter__()
        self._saved_backward = torch.autograd.backward
        self._saved_grad = torch.autograd.grad
        saved, saved_grad, bridge = self._saved_backward, self._saved_grad, self._bridge

        def backward(*args, **kwargs):
            bridge.set_in_backward(True)
            try:
                out = saved(*args, **kwargs)
            finally:
                bridge.set_in_backward(False)
            self._promote_grads()
            # The loss outlives its backward in most loops (`loss` is overwritten only by the
            # next step): as a constant it no longer keeps the step's lineage, and with it the
            # parameter versions the step read, alive through the optimizer step.
            roots = args[0] if args else kwargs.get("tensors")
            for t in (roots if isinstance(roots, (list, tuple)) else [roots]):
                if isinstance(t, DTRTensor) and getattr(t, "_dtr_rt", None) is self:
                    bridge.promote(t._dtr_ref)
            return out

        def grad(*args, **kwargs):
            bridge.set_in_backward(True)
            try:
                return saved_grad(*args, **kwargs)
            finally:
                bridge.set_in_backward(False)

        torch.autograd.backward = backward
        torch.autograd.grad = grad
        if self.device.type == "cpu" and hasattr(_ext, "set_allocator_caching"):
            _ext.set_allocator_caching(True)
        return self

    def __exit__(self, *exc) -> None:
        global _active
        try:
            self._mode.__exit__(*exc)
        finally:
            torch.autograd.backward = self._saved_backward
            torch.autograd.grad = self._saved_grad
            _active = None
            if hasattr(_ext, "set_allocator_caching"):
                _ext.set_allocator_caching(False)
        self._mode = None
        self._give_back()

    # --- wrappers ---------------------------------------------------------------------
    def _make_wrapper(self, ref, size, stride, offset, dtype, device):
        w = torch.Tensor._make_wrapper_subclass(DTRTensor, size, strides=stride,
                                                storage_offset=offset, dtype=dtype,
                                                device=device, requires_grad=False)
        w._dtr_ref = ref
        w._dtr_rt = self
        return w

    def _leaf_hook(self, leaf) -> None:
        """Called when a parameter (a leaf that requires grad) is adopted: its gradient
        becomes a constant the moment autograd delivers it. Left rematerializable, a weight
        gradient is a cheap eviction candidate while backward runs (unused until the
        optimizer step) but recomputing it afterwards needs the whole backward chain again,
        its inputs being released by then."""
        bridge = self._bridge

        def promote(g):
            ref = getattr(g, "_dtr_ref", None)
            if ref is not None and ref.runtime_id == bridge.id:
                bridge.promote(ref)
            return g

        self._hooks.append(leaf.register_hook(promote))

    def _promote_grads(self) -> None:
        """After backward: leaf gradients become constants (they outlive the step)."""
        for g in self._bridge.leaf_grads():
            ref = getattr(g, "_dtr_ref", None)
            if ref is not None and ref.runtime_id == self._bridge.id:
                self._bridge.promote(ref)

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
                return v.materialize()
            except (OutOfMemoryError, ThrashingError):
                if lifted:
                    raise
                lifted = True
                self._bridge.set_budget((1 << 64) - 1)
                return v.materialize()

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
            if isinstance(g, DTRTensor) and getattr(g, "_dtr_rt", None) is self:
                p.grad = plain(g)
            del p, g  # the last reference to the wrapper: its storage leaves the runtime
        for obj in gc.get_objects():
            # type(), not isinstance(): isinstance reads obj.__class__, and some objects warn
            # on attribute access (torch.distributed's deprecated reduce_op)
            if issubclass(type(obj), torch.optim.Optimizer):
                for st in obj.state.values():
                    for k, v in list(st.items()):
                        if isinstance(v, DTRTensor) and getattr(v, "_dtr_rt", None) is self:
                            st[k] = plain(v)
                        del v
        self._bridge.drop_adoption_refs()
        for h in self._hooks:
            h.remove()
        self._hooks = []

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
        return t._dtr_ref.evict() if isinstance(t, DTRTensor) else False

    def check_invariants(self) -> None:
        self._bridge.check_invariants()


def allocator_stats() -> dict:
    """Bytes PyTorch's CPU allocator holds now, its peak since reset_allocator_peak(), and
    the total ever allocated (the bridge wraps the allocator when it is imported)."""
    return _ext.allocator_stats()


def reset_allocator_peak() -> None:
    _ext.reset_allocator_peak()
