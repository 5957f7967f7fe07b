#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Record one training step of a ``torch.nn.Module`` (or N steps of a training loop with
its optimizer: ``--steps N``) as a DTR operator log.

The log format is the one the DTR paper's simulator replays (one JSON object
per line; see $DTR_SHARED/dtr-logs/README.md and bench/trace/README.md).
Every ATen operator the step executes -- the forward pass, the loss, and the
operators autograd runs for ``loss.backward()`` -- is seen through a
``TorchDispatchMode`` (PyTorch 1.13) and turned into CALL / MUTATE lines;
tensor lifetimes become COPY / COPY_FROM / RELEASE lines.

Library use::

    from dtr_trace import record
    stats = record(model, (x,), lambda out, y: F.cross_entropy(out, y),
                   "model.log", targets=(y,))

CLI: ``dtr_trace.py --model resnet18 --batch 8 --size 64 -o resnet18.log``,
``dtr_trace.py --model resnet18 --steps 3 -o loop.log`` (three steps, SGD),
``dtr_trace.py --all --out-dir traces/`` (the committed traces; see
record_all.sh), ``--audit`` to cross-check liveness against check_log.py.

Names are per TensorImpl (a PyTorch tensor object), a storage is identified
by its StorageImpl; see the README for how deaths are detected.
"""

from __future__ import annotations

import argparse
import collections
import copy
import gc
import json
import os
import sys
import time
import weakref
from dataclasses import dataclass, field
from typing import Callable, Deque, Dict, List, Optional, Sequence, Tuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_storage_id = torch._C._storage_id
_UntypedStorage = torch.UntypedStorage if hasattr(torch, "UntypedStorage") \
    else torch._UntypedStorage  # pragma: no cover (older spelling)

# Alias and mutation detection from the operator schema, and the TreeLSTM model, are shared
# with the PyTorch bridge (examples/torch/dtr_torch/schema.py, models.py): found installed,
# or beside this checkout.
try:
    from dtr_torch import models as _models, schema as _schema
except ImportError:  # pragma: no cover - depends on how the checkout is used
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    os.pardir, os.pardir, "examples", "torch"))
    from dtr_torch import models as _models, schema as _schema

_UNANNOTATED_WRITES = _schema.UNANNOTATED_WRITES
_bind_schema = _schema.bind_schema
_tensors_in = _schema.tensors_in


def _jdump(d: dict) -> str:
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


def _geometry(t: torch.Tensor) -> tuple:
    return (t.dtype, tuple(t.shape), tuple(t.stride()), t.storage_offset())


class _Name:
    """One log name: a TensorImpl we have seen (or one we stand in for)."""

    __slots__ = ("name", "key", "sid", "geom", "impl_alive", "released", "fin")

    def __init__(self, name: str, key: int, sid: int, geom: tuple):
        self.name = name
        self.key = key          # TensorImpl address while the impl is alive
        self.sid = sid          # StorageImpl address
        self.geom = geom
        self.impl_alive = True
        self.released = False
        self.fin = None         # the weakref.finalize watching the TensorImpl


class _Storage:
    """A StorageImpl we track through a weak reference (blocks address reuse)."""

    __slots__ = ("sid", "weak", "nbytes", "names", "live_impls")

    def __init__(self, sid: int, weak: int, nbytes: int):
        self.sid = sid
        self.weak = weak
        self.nbytes = nbytes
        self.names: Dict[str, _Name] = {}  # unreleased names, in binding order
        self.live_impls = 0


@dataclass
class TraceStats:
    """Counts about one recording (the log itself is the real output)."""

    calls: int = 0
    mutates: int = 0
    mixed_mutates: int = 0        # ops that both returned fresh tensors and wrote an argument
    copies: int = 0
    copy_froms: int = 0
    releases: int = 0
    constants: int = 0
    view_copies: int = 0          # views with identical geometry, logged as COPY
    skipped_ops: Dict[str, int] = field(default_factory=dict)  # no tensor result, no write
    skipped_ns: int = 0
    compute_ns: int = 0
    unknown_impls: int = 0        # new TensorImpls of a known storage seen only as arguments
    geometry_fallbacks: int = 0   # ... for which no name with the same geometry existed
    stale_names: int = 0          # names of a mutated storage left on the old version
    foreign_outputs: int = 0      # outputs sharing a known storage that no argument has
    shared_fresh_outputs: int = 0  # fresh outputs of one call sharing a new storage
    late_deaths: int = 0          # deaths noticed after the log was closed
    info: Dict[str, object] = field(default_factory=dict)  # model-specific notes
    live_at_end: List[str] = field(default_factory=list)
    unexpected_live_at_end: int = 0  # live storages at the end that are no param/buffer/grad

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class _Recorder:
    """Turns dispatched operators and tensor deaths into DTR log lines."""

    def __init__(self, audit: bool = False):
        self.out: List[dict] = []   # the log, one dict per line
        self.lines = 0
        # audit: (lines emitted so far, bytes of storages that still have a name,
        # storages that have a name but are dead) at every point between operators
        self.audit: Optional[List[Tuple[int, int, int]]] = [] if audit else None
        self._next = 0
        self._by_impl: Dict[int, _Name] = {}
        self._storages: Dict[int, _Storage] = {}
        self._dead: Deque[_Name] = collections.deque()  # filled by weakref finalizers
        self._orphans: Dict[int, _Storage] = {}  # storages without a live impl
        self._closed = False
        self.stats = TraceStats()

    # --- output -----------------------------------------------------------
    def emit(self, **d) -> None:
        self.out.append(d)
        self.lines += 1

    def _audit(self) -> None:
        if self.audit is None or self._closed:
            return
        live = [s for s in self._storages.values() if s.names]
        dead = sum(1 for s in live if _UntypedStorage._expired(s.weak))
        self.audit.append((self.lines, sum(s.nbytes for s in live), dead))

    def annotate(self, what: str) -> None:
        self.settle()
        self.emit(INSTRUCTION="ANNOTATE", ANNOTATION=what)

    def _fresh(self) -> str:
        n = f"x{self._next}"
        self._next += 1
        return n

    # --- storages and names -------------------------------------------------
    def _storage(self, t: torch.Tensor, sid: int) -> _Storage:
        s = self._storages.get(sid)
        if s is None:
            us = t._storage()
            s = _Storage(sid, us._weak_ref(), us.nbytes())
            del us
            self._storages[sid] = s
        return s

    def _bind(self, t: torch.Tensor, s: _Storage) -> _Name:
        """Give TensorImpl ``t`` a new name on storage ``s`` (no line emitted)."""
        n = _Name(self._fresh(), t._cdata, s.sid, _geometry(t))
        self._by_impl[n.key] = n
        s.names[n.name] = n
        s.live_impls += 1
        self._orphans.pop(s.sid, None)
        n.fin = weakref.finalize(t, self._dead.append, n)
        n.fin.atexit = False
        return n

    def _release(self, n: _Name) -> None:
        if n.released:
            return
        n.released = True
        s = self._storages[n.sid]
        del s.names[n.name]
        self.emit(INSTRUCTION="RELEASE", NAME=n.name)
        self.stats.releases += 1

    def _drop_deferred(self, s: _Storage, keep: _Name) -> None:
        """Release names of ``s`` whose impl is gone, now that ``keep`` holds ``s``."""
        for n in [n for n in s.names.values() if not n.impl_alive and n is not keep]:
            self._release(n)

    def settle(self) -> None:
        """Process queued TensorImpl deaths and release names of dead storages."""
        while self._dead:
            n = self._dead.popleft()
            if not n.impl_alive:
                continue
            n.impl_alive = False
            if self._by_impl.get(n.key) is n:
                del self._by_impl[n.key]
            s = self._storages.get(n.sid)
            if self._closed:
                self.stats.late_deaths += 1
                continue
            if s is None:
                continue
            s.live_impls -= 1
            if n.released:
                pass
            elif len(s.names) > 1:
                self._release(n)   # the storage keeps another name
            # else: last name of the storage; keep it until the storage dies
            if s.live_impls == 0:
                self._orphans[s.sid] = s
        if self._closed:
            return
        for sid, s in list(self._orphans.items()):
            if _UntypedStorage._expired(s.weak):
                for n in list(s.names.values()):
                    self._release(n)
                _UntypedStorage._free_weak_ref(s.weak)
                del self._storages[sid]
                del self._orphans[sid]
        self._audit()

    def constant(self, t: torch.Tensor) -> str:
        """Declare ``t`` as a CONSTANT (a COPY if its storage is known); return its name."""
        self.settle()
        return self._name_of(t)

    def _name_of(self, t: torch.Tensor) -> str:
        """Name of an argument tensor, introducing it if it is new."""
        n = self._by_impl.get(t._cdata)
        if n is not None:
            if not n.released:
                return n.name
            # released on request (release_tensor) but used again: a new name
            del self._by_impl[n.key]
            n.impl_alive = False
            s = self._storages[n.sid]
            s.live_impls -= 1
        sid = _storage_id(t)
        s = self._storages.get(sid)
        if s is None or not s.names:
            s = self._storage(t, sid)
            n = self._bind(t, s)
            self.emit(INSTRUCTION="CONSTANT", NAME=n.name)
            self.emit(INSTRUCTION="MEMORY", NAME=n.name, MEMORY=str(s.nbytes))
            self.stats.constants += 1
            return n.name
        # a TensorImpl made without a dispatched operator (a shallow copy inside
        # autograd, say) of a storage we know: a new reference to the same tensor
        geom = _geometry(t)
        src = next((m for m in s.names.values() if m.geom == geom), None)
        self.stats.unknown_impls += 1
        if src is None:
            src = next(iter(s.names.values()))
            self.stats.geometry_fallbacks += 1
        n = self._bind(t, s)
        self.emit(INSTRUCTION="COPY", DST=n.name, SRC=src.name)
        self.stats.copies += 1
        self._drop_deferred(s, n)
        return n.name

    def release_tensor(self, t: torch.Tensor) -> None:
        """Drop the name of ``t`` now (e.g. a batch that the loop lets go)."""
        self.settle()
        n = self._by_impl.get(t._cdata)
        if n is not None and not n.released:
            self._release(n)

    # --- operators --------------------------------------------------------
    def dispatch(self, func, args, kwargs):
        self.settle()
        schema = func._schema
        # tensor arguments in schema order, and which of them the call writes
        bound = _bind_schema(schema, args, kwargs)
        flat, written = _schema.written_flat_indices(schema, bound)
        names = [self._name_of(t) for t in flat]

        t0 = time.perf_counter_ns()
        out = func(*args, **(kwargs or {}))
        dt = time.perf_counter_ns() - t0

        self.settle()
        # (version counters cannot help here: autograd's ADInplaceOrView kernel bumps
        # them after this dispatch returns; the schema and _UNANNOTATED_WRITES decide)
        mut_idx: List[int] = []
        seen_names = set()
        for i in written:
            if names[i] not in seen_names:  # x.add_(x): the name once
                seen_names.add(names[i])
                mut_idx.append(i)

        arg_keys = {t._cdata for t in flat}
        arg_sid_index: Dict[int, int] = {}
        for i, t in enumerate(flat):
            arg_sid_index.setdefault(_storage_id(t), i)
        results: List[Tuple[torch.Tensor, int]] = []  # (tensor, alias index or -1)
        copies: List[Tuple[torch.Tensor, int]] = []   # identical views: (tensor, arg index)
        foreign: List[torch.Tensor] = []
        seen_out = set()
        for r in _tensors_in(out):
            k = r._cdata
            if k in seen_out or k in arg_keys or k in self._by_impl:
                continue  # "returns self" (in-place / out=) or an already named tensor
            seen_out.add(k)
            sid = _storage_id(r)
            if sid in arg_sid_index:
                ai = _alias_source(schema, bound, flat, r, sid, arg_sid_index)
                if _geometry(r) == _geometry(flat[ai]):
                    copies.append((r, ai))
                else:
                    results.append((r, ai))
            elif sid in self._storages and self._storages[sid].names:
                foreign.append(r)
            else:
                results.append((r, -1))

        opname = func.overloadpacket.__name__
        mut_ns = 0
        if results and mut_idx:
            # one operator that returned fresh tensors and wrote arguments (batch norm
            # updating its running statistics): a CALL followed by a MUTATE; the time
            # is split by the bytes each part produces so that the total is kept
            fresh = sum(r.nelement() * r.element_size() for r, a in results if a == -1)
            wbytes = sum(self._storages[_storage_id(flat[i])].nbytes for i in mut_idx)
            mut_ns = max(1, dt * wbytes // max(1, wbytes + fresh)) if dt > 1 else 0
            self.stats.mixed_mutates += 1
        if results:
            res_names = []
            lines = []
            fresh_sids = set()
            for r, a in results:
                sid = _storage_id(r)
                if a == -1:
                    # the format cannot say "alias of an earlier result": counted twice
                    if sid in fresh_sids:
                        self.stats.shared_fresh_outputs += 1
                    fresh_sids.add(sid)
                s = self._storage(r, sid)
                n = self._bind(r, s)
                res_names.append(n.name)
                lines.append((n.name, s.nbytes, a))
            self.emit(INSTRUCTION="CALL", NAME=opname, ARGS=names, RESULT=res_names,
                      TIME=str(dt - mut_ns))
            for nm, nb, a in lines:
                self.emit(INSTRUCTION="MEMORY", NAME=nm, MEMORY=str(nb))
                self.emit(INSTRUCTION="ALIAS", NAME=nm, ALIAS=str(a))
            self.stats.calls += 1
            for r, a in results:
                if a != -1:
                    n = self._by_impl[r._cdata]
                    self._drop_deferred(self._storages[n.sid], n)
        if mut_idx:
            t = mut_ns if results else dt
            self.emit(INSTRUCTION="MUTATE", NAME=opname, ARGS=names, MUTATE=mut_idx,
                      TIME=str(t))
            self.stats.mutates += 1
            # other names of a written storage: same geometry -> follow the new
            # version; any other view stays on the old version (format limit)
            for i in mut_idx:
                n = self._by_impl[flat[i]._cdata]
                s = self._storages[n.sid]
                for m in list(s.names.values()):
                    if m is n:
                        continue
                    if m.geom == n.geom:
                        self.emit(INSTRUCTION="COPY_FROM", DST=m.name, SRC=n.name)
                        self.stats.copy_froms += 1
                    else:
                        self.stats.stale_names += 1
        if not results and not mut_idx and not copies and not foreign:
            self.stats.skipped_ops[opname] = self.stats.skipped_ops.get(opname, 0) + 1
            self.stats.skipped_ns += dt
        else:
            self.stats.compute_ns += dt
        for r, ai in copies:
            s = self._storages[_storage_id(r)]
            n = self._bind(r, s)
            self.emit(INSTRUCTION="COPY", DST=n.name, SRC=names[ai])
            self.stats.copies += 1
            self.stats.view_copies += 1
            self._drop_deferred(s, n)
        for r in foreign:
            self.stats.foreign_outputs += 1
            self._name_of(r)
        self._audit()
        return out

    def close(self, expected_live: Sequence[torch.Tensor]) -> None:
        """Final bookkeeping; ``expected_live`` are the tensors meant to survive."""
        self.settle()
        want = {_storage_id(t) for t in expected_live}
        live = []
        for sid, s in self._storages.items():
            if s.names:
                live.extend(n.name for n in s.names.values())
                if sid not in want:
                    self.stats.unexpected_live_at_end += 1
        self.stats.live_at_end = live
        self._closed = True
        for n in self._by_impl.values():  # the survivors (parameters, grads) need no watching
            n.fin.detach()
        self._by_impl.clear()
        for s in self._storages.values():
            _UntypedStorage._free_weak_ref(s.weak)
        self._storages.clear()
        self._orphans.clear()


def _alias_source(schema, bound, flat, r, sid, arg_sid_index) -> int:
    """Index in ARGS of the argument a view output ``r`` aliases."""
    return _schema.alias_source(schema, bound, flat, r, sid, arg_sid_index, _storage_id)


class _Mode(TorchDispatchMode):
    def __init__(self, rec: _Recorder):
        super().__init__()
        self.rec = rec

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.rec.dispatch(func, args, kwargs)


def record(model: torch.nn.Module,
           inputs: Sequence[torch.Tensor],
           loss_fn: Callable[..., torch.Tensor],
           out_path: str,
           targets: Sequence[torch.Tensor] = (),
           warmup: int = 1,
           repeats: int = 1,
           release_inputs: bool = True,
           audit: Optional[list] = None,
           steps: int = 1,
           optimizer: Optional[Callable[[List[torch.nn.Parameter]], torch.optim.Optimizer]] = None,
           batches: Optional[Sequence[Tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]]]] = None
           ) -> TraceStats:
    """Record one training step of ``model`` (or ``steps`` of a training loop) into the DTR
    log ``out_path``.

    The step is ``loss = loss_fn(model(*inputs), *targets); loss.backward()``.
    The log starts with START, declares parameters, buffers, inputs and targets
    as constants, logs the forward pass and loss, a BACKWARD annotation, and
    the backward pass.  At the end only the parameters, buffers and ``.grad``
    tensors are still referenced (inputs and targets are released too unless
    ``release_inputs`` is false).

    ``warmup`` untraced steps run first.  The step is then recorded
    ``repeats`` times (gradients reset to None before each); if every run
    logged the same lines apart from TIME, each TIME is the minimum over the
    runs (less noise from a busy machine), else the first run is kept.

    If ``audit`` is a list, it receives, for the first run, (log lines so far,
    bytes of storages that have a name, named storages already dead) at every
    point between two operators (for tests).

    A training loop: with ``steps`` > 1, or an ``optimizer`` (a function of the
    parameters that makes one, e.g. ``lambda ps: torch.optim.SGD(ps, lr=0.01,
    momentum=0.9)``), the log records ``steps`` iterations of ``zero_grad``
    (gradients set to None; not before the first), forward, loss, backward and
    ``optimizer.step()``, with ``ANNOTATE STEP`` where each step after the first
    begins (and a BACKWARD in each). Step k reads ``batches[k]`` (inputs,
    targets), declared as constants where the step begins; without ``batches``
    every step reads ``inputs`` and ``targets``. So the steps differ as the
    program makes them differ: the optimizer's state is made in the first step,
    and a data-dependent model (the TreeLSTM) runs another graph on another
    batch. Each of the ``repeats`` runs (and the warm-up) trains a copy of the
    model from the same state and seeds, so that the runs log the same lines.
    At the end the parameters, buffers, gradients and the optimizer's state
    are referenced.
    """
    if steps < 1:
        raise ValueError(f"record: steps must be at least 1, got {steps}")
    if batches is not None and len(batches) != steps:
        raise ValueError(f"record: {len(batches)} batches for {steps} steps")
    if steps > 1 or optimizer is not None:
        return _record_loop(model, inputs, loss_fn, out_path, targets, warmup, repeats,
                            release_inputs, audit, steps, optimizer, batches)
    inputs = tuple(inputs)
    targets = tuple(targets)
    model.train()
    for _ in range(warmup):
        loss = loss_fn(model(*inputs), *targets)
        loss.backward()
        del loss
    runs: List[_Recorder] = []
    for k in range(max(1, repeats)):
        for p in model.parameters():
            p.grad = None
        gc.collect()
        rec = _Recorder(audit=audit is not None and k == 0)
        _loop(rec, model, None, [(inputs, targets)], loss_fn, release_inputs)
        runs.append(rec)
    return _write_runs(runs, out_path, audit)


def _write_runs(runs: List[_Recorder], out_path: str, audit: Optional[list]) -> TraceStats:
    """Write the runs' log (each TIME the fastest where the runs agree) and its stats."""
    log, how = _merge_times([r.out for r in runs])
    st = runs[0].stats
    st.compute_ns = sum(int(d["TIME"]) for d in log if "TIME" in d)
    st.info["repeats"] = len(runs)
    st.info["times"] = how
    with open(out_path, "w", encoding="utf-8") as f:
        for d in log:
            f.write(_jdump(d))
            f.write("\n")
    if audit is not None:
        audit.extend(runs[0].audit)
    return st


def _record_loop(model, inputs, loss_fn, out_path, targets, warmup, repeats, release_inputs,
                 audit, steps, optimizer, batches) -> TraceStats:
    """record() of a training loop: see its docstring."""
    if batches is None:
        batches = [(tuple(inputs), tuple(targets))] * steps
    batches = [(tuple(i), tuple(t)) for i, t in batches]
    rng = torch.get_rng_state()

    def fresh():
        m = copy.deepcopy(model)
        m.train()
        return m, (optimizer(list(m.parameters())) if optimizer is not None else None)

    for _ in range(warmup):  # the machine's caches and allocator, on a copy
        m, opt = fresh()
        torch.set_rng_state(rng)
        for k, (x, y) in enumerate(batches[:2]):
            if k and opt is not None:
                opt.zero_grad(set_to_none=True)
            loss_fn(m(*x), *y).backward()
            if opt is not None:
                opt.step()
        del m, opt
    runs: List[_Recorder] = []
    opt_name = None
    for k in range(max(1, repeats)):
        m, opt = fresh()
        opt_name = type(opt).__name__ if opt is not None else None
        gc.collect()
        torch.set_rng_state(rng)
        rec = _Recorder(audit=audit is not None and k == 0)
        _loop(rec, m, opt, batches, loss_fn, release_inputs)
        runs.append(rec)
        del m, opt
    st = _write_runs(runs, out_path, audit)
    st.info["steps"] = steps
    st.info["optimizer"] = opt_name
    return st


def _loop(rec: _Recorder, model, opt, batches, loss_fn, release_inputs) -> None:
    """Records the steps of ``batches`` (one step: record()'s single step, opt None)."""
    rec.annotate("START")
    for t in list(model.parameters()) + list(model.buffers()):
        rec.constant(t)
    for k, (inputs, targets) in enumerate(batches):
        if k:
            rec.annotate("STEP")
        for t in inputs + targets:
            if isinstance(t, torch.Tensor):
                rec.constant(t)
        with _Mode(rec):
            if k:  # zero_grad(set_to_none=True): the gradients' names are released here
                if opt is not None:
                    opt.zero_grad(set_to_none=True)
                else:
                    for p in model.parameters():
                        p.grad = None
                gc.collect()
                rec.settle()
            out = model(*inputs)
            loss = loss_fn(out, *targets)
            del out
            rec.annotate("BACKWARD")
            loss.backward()
            del loss
            if opt is not None:
                opt.step()
            gc.collect()
            rec.settle()
        if release_inputs:
            for t in inputs + targets:
                if isinstance(t, torch.Tensor):
                    rec.release_tensor(t)
    expected = list(model.parameters()) + list(model.buffers())
    expected += [p.grad for p in model.parameters() if p.grad is not None]
    if opt is not None:
        expected += [v for state in opt.state.values() for v in state.values()
                     if isinstance(v, torch.Tensor)]
    rec.close(expected)


def _merge_times(logs: List[List[dict]]) -> Tuple[List[dict], str]:
    """Per-line minimum TIME over runs that logged the same lines otherwise."""
    first = logs[0]
    if len(logs) == 1:
        return first, "single run"
    def shape(d):
        return {k: v for k, v in d.items() if k != "TIME"}
    for other in logs[1:]:
        if len(other) != len(first) or any(shape(a) != shape(b) for a, b in zip(first, other)):
            return first, "first run (the runs logged different lines)"
    out = []
    for i, d in enumerate(first):
        if "TIME" in d:
            d = dict(d)
            d["TIME"] = str(min(int(log[i]["TIME"]) for log in logs))
        out.append(d)
    return out, f"minimum over {len(logs)} runs"


# --- models for the committed traces -------------------------------------

# The TreeLSTM of the committed trace is the bridge's model (dtr_torch.models.TreeLSTM: the
# token sequence split recursively where a learned score is highest, spans of at most
# ``leaf_span`` tokens as leaves), so that the recorder and the bench train the same network.
LatentTreeLSTM = _models.TreeLSTM


def _tv(name: str, classes: int = 10):
    import torchvision
    return getattr(torchvision.models, name)(weights=None, num_classes=classes)


# name -> (builder, batch, image size) for torchvision; see --all. ImageNet-sized images and
# batches large enough that activations, not parameters and gradients (which must stay
# resident to the end of the step), dominate the peak, as in the DTR paper's logs. The log's
# size does not depend on the batch; only recording time does.
TV_TRACES = [
    ("resnet18", 32, 224),
    ("mobilenet_v2", 32, 224),
    ("vgg11", 16, 224),
    ("squeezenet1_0", 32, 224),
    ("densenet121", 16, 224),
]


OPTIMIZERS = {
    "sgd": lambda params, lr: torch.optim.SGD(params, lr=lr, momentum=0.9),
    "adam": lambda params, lr: torch.optim.Adam(params, lr=lr),
}


def _optimizer(name: Optional[str], lr: float):
    """The optimizer factory record() takes, by name (None or "none": no optimizer step)."""
    if name is None or name == "none":
        return None
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r} (one of {', '.join(OPTIMIZERS)}, none)")
    make = OPTIMIZERS[name]
    return lambda params: make(params, lr)


def trace_torchvision(name: str, batch: int, size: int, out_path: str, seed: int = 0,
                      classes: int = 10, repeats: int = 3,
                      audit: Optional[list] = None, steps: int = 1,
                      optimizer: Optional[str] = None, lr: float = 0.01) -> TraceStats:
    """Record a torchvision classifier (random init) on random images: one step, or
    ``steps`` of a training loop with ``optimizer`` ("sgd", "adam"), a new batch each."""
    torch.manual_seed(seed)
    model = _tv(name, classes)
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, classes, (batch,))
    batches = [((x,), (y,))] + [((torch.randn(batch, 3, size, size),),
                                 (torch.randint(0, classes, (batch,)),))
                                for _ in range(steps - 1)]
    return record(model, (x,), torch.nn.functional.cross_entropy, out_path, targets=(y,),
                  repeats=repeats, audit=audit, steps=steps,
                  optimizer=_optimizer(optimizer, lr), batches=batches if steps > 1 else None)


def trace_treelstm(tokens: int, out_path: str, seed: int = 0, dim: int = 128,
                   repeats: int = 3, audit: Optional[list] = None, steps: int = 1,
                   optimizer: Optional[str] = None, lr: float = 0.01) -> TraceStats:
    """Record the LatentTreeLSTM on a random token sequence: one step, or ``steps`` of a
    training loop, each on another sequence (so each step builds another tree)."""
    torch.manual_seed(seed)
    model = LatentTreeLSTM(dim=dim)
    x = torch.randint(0, 1000, (tokens,))
    y = torch.randint(0, 5, (1,))
    batches = [((x,), (y,))] + [((torch.randint(0, 1000, (tokens,)),), (torch.randint(0, 5, (1,)),))
                                for _ in range(steps - 1)]
    st = record(model, (x,), torch.nn.functional.cross_entropy, out_path, targets=(y,),
                repeats=repeats, audit=audit, steps=steps,
                optimizer=_optimizer(optimizer, lr), batches=batches if steps > 1 else None)
    if steps == 1:
        st.info["tree_depth"] = model.depth
    return st


def _all(out_dir: str, repeats: int) -> None:
    os.makedirs(out_dir, exist_ok=True)
    jobs = [(f"{n}-b{b}-{s}px.log",
             lambda p, n=n, b=b, s=s: trace_torchvision(n, b, s, p, repeats=repeats))
            for n, b, s in TV_TRACES]
    jobs.append(("latent-treelstm-t48-h128.log",
                 lambda p: trace_treelstm(48, p, repeats=repeats)))
    # A training loop (SGD with momentum, a new batch each step): the runtime's step
    # learning on a recorded loop.
    jobs.append(("resnet18-b32-224px-sgd-s3.log",
                 lambda p: trace_torchvision("resnet18", 32, 224, p, repeats=repeats, steps=3,
                                             optimizer="sgd")))
    for fname, fn in jobs:
        path = os.path.join(out_dir, fname)
        t0 = time.time()
        st = fn(path)
        _report(path, st, time.time() - t0)


def _report(path: str, st: TraceStats, wall: float) -> None:
    size = os.path.getsize(path)
    print(f"{path}: {size / 1e6:.2f} MB, {st.calls} calls, {st.mutates} mutates "
          f"({st.mixed_mutates} mixed), {st.constants} constants, {st.copies} copies "
          f"({st.view_copies} views, {st.unknown_impls} unseen impls, "
          f"{st.geometry_fallbacks} geometry fallbacks), {st.copy_froms} copy_froms, "
          f"{st.releases} releases, {st.stale_names} stale names, "
          f"{st.foreign_outputs} foreign outputs, {st.shared_fresh_outputs} shared fresh, "
          f"compute {st.compute_ns / 1e6:.1f} ms, "
          f"skipped {sum(st.skipped_ops.values())} ops {dict(st.skipped_ops)}, "
          f"{len(st.live_at_end)} names live at end, "
          f"{st.unexpected_live_at_end} unexpected, info {st.info}; {wall:.1f} s",
          file=sys.stderr)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(
        description="Record one training step (or N steps of a training loop) as a DTR "
                    "operator log.")
    p.add_argument("--model", help="torchvision model name (weights=None) or 'treelstm'")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--size", type=int, default=64, help="image height and width")
    p.add_argument("--tokens", type=int, default=48, help="sequence length for treelstm")
    p.add_argument("--hidden", type=int, default=128, help="hidden size for treelstm")
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: default)")
    p.add_argument("--repeat", type=int, default=3,
                   help="record the step N times and keep each operator's fastest TIME")
    p.add_argument("--steps", type=int, default=1,
                   help="record N steps of a training loop (zero_grad, forward, backward, "
                        "optimizer step; a new batch each), ANNOTATE STEP between them")
    p.add_argument("--optimizer", choices=sorted(OPTIMIZERS) + ["none"],
                   help="the loop's optimizer (default: sgd, momentum 0.9, with --steps N > 1; "
                        "none otherwise)")
    p.add_argument("--lr", type=float, default=0.01, help="the optimizer's learning rate")
    p.add_argument("-o", "--out", help="output log path")
    p.add_argument("--audit", action="store_true",
                   help="also check that check_log.py's replay holds exactly the bytes of the "
                        "storages still alive at every point between operators")
    p.add_argument("--all", action="store_true", help="record every committed trace")
    p.add_argument("--out-dir", default=os.path.join(os.path.dirname(__file__), "traces"))
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.all:
        _all(a.out_dir, a.repeat)
        return 0
    if not a.model or not a.out:
        p.error("--model and --out are required (or --all)")
    if a.steps < 1:
        p.error(f"--steps must be at least 1, got {a.steps}")
    if a.optimizer is None:
        a.optimizer = "sgd" if a.steps > 1 else "none"
    if not (a.lr > 0):
        p.error(f"--lr must be positive, got {a.lr}")
    t0 = time.time()
    audit: Optional[list] = [] if a.audit else None
    if a.model == "treelstm":
        st = trace_treelstm(a.tokens, a.out, a.seed, dim=a.hidden, repeats=a.repeat, audit=audit,
                            steps=a.steps, optimizer=a.optimizer, lr=a.lr)
    else:
        st = trace_torchvision(a.model, a.batch, a.size, a.out, a.seed, a.classes,
                               repeats=a.repeat, audit=audit, steps=a.steps,
                               optimizer=a.optimizer, lr=a.lr)
    _report(a.out, st, time.time() - t0)
    if audit is not None:
        return _check_audit(a.out, audit)
    return 0


def _check_audit(path: str, audit: list) -> int:
    """Compare the replay's resident bytes with the recorder's live storages."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import check_log
    mem: List[int] = []
    check_log.check_file(path, memory_trace=mem)
    bad = [(n, b, mem[n - 1], d) for n, b, d in audit if d or (n and mem[n - 1] != b)]
    print(f"{path}: audit of {len(audit)} points: {len(bad)} mismatches", file=sys.stderr)
    for n, b, m, d in bad[:10]:
        print(f"  after line {n}: replay holds {m} bytes, live storages {b} bytes, "
              f"{d} named storages already dead", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
