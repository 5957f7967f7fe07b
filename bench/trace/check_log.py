#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Validate a DTR operator log and replay it on an unlimited budget.

A DTR log has one JSON object per line (format: $DTR_SHARED/dtr-logs/README.md
and bench/trace/README.md).  This checker enforces

* well-formedness: every line is a JSON object with a known INSTRUCTION and
  exactly the fields that instruction needs, of the right type (strings for
  scalar fields, lists of strings for ARGS/RESULT, a list of integers for
  MUTATE, decimal integer strings for TIME/MEMORY/ALIAS);
* the shape rules: CONSTANT is followed by exactly one MEMORY line for the
  same name; CALL is followed, for each result in order, by one MEMORY and
  then one ALIAS line for that result; MEMORY/ALIAS appear nowhere else;
  ALIAS is "-1" or an index into the call's ARGS; MUTATE indices are distinct
  and index ARGS; at most one START annotation, and BACKWARD and STEP
  after it; at most one BACKWARD per training step (a log that records
  several steps has a STEP annotation where each step after the first
  begins: dtr_trace.py --steps N);
* the simulator's name semantics: a name is *bound* from the CONSTANT / CALL
  result / COPY that introduces it until its RELEASE.  ARGS, COPY SRC and
  COPY_FROM SRC/DST must be bound; a name is introduced at most once in the
  whole log (even after it was released); RELEASE needs a bound name.

It then replays the log on an unlimited budget the way the published
simulator computes its baseline (simrd's parse_file + RuntimeV1 with an
infinite budget): each storage counts the bound names that refer to any
tensor in it, is allocated when its tensor is computed (CONSTANT, CALL result
with ALIAS -1, MUTATE) and freed as soon as that count drops to zero --
constants included, as simrd's baseline does.  A view (ALIAS >= 0) adds a
reference to its argument's storage and no bytes.  MUTATE gives each mutated
argument name a fresh storage of the old storage's size, then drops the old
binding.  COPY_FROM moves DST's reference to SRC's tensor.  The replay reports
the peak of resident bytes (constants included; it reproduces the
baseline_peak_MB figures of $DTR_SHARED/reference for the eight published
logs), the same peak with constants never freed (what a budgeted run pins),
simrd's bottleneck figure, the total TIME, and the live names and storages at
the end of the log.

Everything before the START annotation is checked for well-formedness only.

Exit status: 0 if the log is valid, 1 on the first violation (printed as
``path:LINE: message``), 2 on usage errors.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional

KINDS = {
    "ANNOTATE": {"ANNOTATION"},
    "CONSTANT": {"NAME"},
    "MEMORY": {"NAME", "MEMORY"},
    "CALL": {"NAME", "ARGS", "RESULT", "TIME"},
    "ALIAS": {"NAME", "ALIAS"},
    "MUTATE": {"NAME", "ARGS", "MUTATE", "TIME"},
    "COPY": {"DST", "SRC"},
    "COPY_FROM": {"DST", "SRC"},
    "RELEASE": {"NAME"},
}
ANNOTATIONS = ("START", "BACKWARD", "STEP")


class LogError(Exception):
    """A violation, with the 1-based line number it was found at."""

    def __init__(self, line: int, msg: str):
        super().__init__(f"{line}: {msg}")
        self.line = line
        self.msg = msg


@dataclass
class _Storage:
    size: int
    constant: bool
    refs: int = 0
    resident: bool = True   # held in the banishing (reference) model
    held: bool = True       # held in the pinned-constants model


@dataclass
class Stats:
    """What the unlimited replay saw (only instructions after START count)."""

    lines: int = 0
    calls: int = 0
    mutates: int = 0
    copies: int = 0
    copy_froms: int = 0
    releases: int = 0
    constants: int = 0
    constant_bytes: int = 0
    compute_ns: int = 0          # sum of CALL and MUTATE TIME
    forward_ns: int = 0          # part of compute_ns before the first BACKWARD
    peak_bytes: int = 0          # peak resident bytes, constants included (reference model)
    peak_line: int = 0
    peak_pinned_bytes: int = 0   # same, but constants are never freed
    bottleneck_bytes: int = 0    # largest inputs + new outputs of one operator (simrd's rule)
    final_bytes: int = 0         # resident bytes at the end (reference model)
    live_names: int = 0          # bound names at the end
    live_tensors: int = 0        # distinct tensors those names refer to
    live_storages: int = 0
    live_nonconstant_storages: int = 0
    live_nonconstant_bytes: int = 0
    has_start: bool = False
    has_backward: bool = False
    steps: int = 1               # training steps: 1 + STEP annotations
    step_compute_ns: List[int] = field(default_factory=lambda: [0])  # compute of each step
    op_names: Dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        d = dict(self.__dict__)
        d["op_names"] = dict(sorted(self.op_names.items(), key=lambda kv: -kv[1]))
        return d


_INT = re.compile(r"-?[0-9]+")


def _int_str(v, what: str, line: int, minimum: int = 0) -> int:
    if not isinstance(v, str) or not _INT.fullmatch(v):
        raise LogError(line, f"{what} must be a decimal integer string, got {v!r}")
    x = int(v, 10)
    if x < minimum:
        raise LogError(line, f"{what} must be >= {minimum}, got {x}")
    return x


def _parse(lineno: int, text: str) -> dict:
    try:
        j = json.loads(text)
    except json.JSONDecodeError as e:
        raise LogError(lineno, f"not valid JSON: {e}") from None
    if not isinstance(j, dict):
        raise LogError(lineno, "a line must be a JSON object")
    kind = j.get("INSTRUCTION")
    if kind not in KINDS:
        raise LogError(lineno, f"unknown INSTRUCTION {kind!r}")
    want = KINDS[kind] | {"INSTRUCTION"}
    have = set(j)
    if have != want:
        missing = sorted(want - have)
        extra = sorted(have - want)
        raise LogError(lineno, f"{kind}: missing fields {missing}, unexpected fields {extra}")
    for k, v in j.items():
        if k in ("ARGS", "RESULT"):
            if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
                raise LogError(lineno, f"{kind}.{k} must be a list of non-empty strings")
        elif k == "MUTATE":
            if not isinstance(v, list) or not all(type(x) is int for x in v):
                raise LogError(lineno, f"{kind}.MUTATE must be a list of integers")
        elif not isinstance(v, str) or not v:
            raise LogError(lineno, f"{kind}.{k} must be a non-empty string, got {v!r}")
    if kind == "ANNOTATE" and j["ANNOTATION"] not in ANNOTATIONS:
        raise LogError(lineno, f"unknown ANNOTATION {j['ANNOTATION']!r}")
    if kind == "CALL" and not j["RESULT"]:
        raise LogError(lineno, "CALL without results")
    if kind == "MUTATE" and not j["MUTATE"]:
        raise LogError(lineno, "MUTATE without mutated arguments")
    return j


class Checker:
    """Incremental checker; feed lines with ``feed`` then call ``finish``."""

    def __init__(self, expect_start: bool = True, memory_trace: Optional[List[int]] = None):
        self.expect_start = expect_start
        # if given, receives the resident bytes (reference model) after every line
        self.memory_trace = memory_trace
        self.stats = Stats()
        self._started = False
        self._step_backward = False  # this training step has had its BACKWARD
        self._pending: List[tuple] = []  # expected follow-up lines: (kind, name)
        self._pending_from = 0
        self._call: Optional[dict] = None  # the CALL / CONSTANT awaiting follow-ups
        self._call_line = 0
        self._call_mem: List[int] = []
        self._call_alias: List[int] = []
        self._ever: set = set()           # names ever introduced
        self._bound: Dict[str, int] = {}  # bound name -> tensor id
        self._tstore: List[int] = []      # tensor id -> storage id
        self._town: List[int] = []        # tensor id -> bytes it allocated (0 for a view)
        self._storages: List[_Storage] = []
        self._mem = 0         # constants freed once unreferenced (simrd's baseline run)
        self._mem_pinned = 0  # constants never freed (what the budgeted runs pin)
        self._line = 0

    # --- model helpers -------------------------------------------------
    def _new_storage(self, size: int, constant: bool) -> int:
        self._storages.append(_Storage(size, constant))
        self._mem += size
        self._mem_pinned += size
        return len(self._storages) - 1

    def _new_tensor(self, sid: int, own: int) -> int:
        self._tstore.append(sid)
        self._town.append(own)
        return len(self._tstore) - 1

    def _bind(self, name: str, tid: int) -> None:
        if name in self._ever:
            raise LogError(self._line, f"name {name} is introduced a second time")
        self._ever.add(name)
        self._bound[name] = tid
        self._storages[self._tstore[tid]].refs += 1

    def _need(self, name: str, what: str) -> int:
        tid = self._bound.get(name)
        if tid is None:
            if name in self._ever:
                raise LogError(self._line, f"{what} {name} was already released")
            raise LogError(self._line, f"{what} {name} is not bound")
        return tid

    def _unref(self, tid: int) -> None:
        s = self._storages[self._tstore[tid]]
        s.refs -= 1
        assert s.refs >= 0
        if s.refs == 0:
            # The reference figures come from simrd's banishing runtime (V1), which
            # frees a storage when its last reference goes, constants included.
            if s.resident:
                s.resident = False
                self._mem -= s.size
            if s.held and not s.constant:
                s.held = False
                self._mem_pinned -= s.size

    def _peak(self) -> None:
        st = self.stats
        if self._mem > st.peak_bytes:
            st.peak_bytes = self._mem
            st.peak_line = self._line
        st.peak_pinned_bytes = max(st.peak_pinned_bytes, self._mem_pinned)

    def _bottleneck(self, arg_tids: Iterable[int], new_bytes: int) -> None:
        # simrd: the op's new bytes plus each argument's own allocation, counted once per
        # occurrence in ARGS (a view's own allocation is 0)
        b = sum(self._town[t] for t in arg_tids) + new_bytes
        self.stats.bottleneck_bytes = max(self.stats.bottleneck_bytes, b)

    # --- driver ----------------------------------------------------------
    def feed(self, text: str) -> None:
        self._feed(text)
        if self.memory_trace is not None:
            self.memory_trace.append(self._mem)

    def _feed(self, text: str) -> None:
        self._line += 1
        lineno = self._line
        if not text.strip():
            raise LogError(lineno, "empty line")
        j = _parse(lineno, text)
        kind = j["INSTRUCTION"]
        st = self.stats
        st.lines += 1

        if self._pending:
            want_kind, want_name = self._pending.pop(0)
            if kind != want_kind or j["NAME"] != want_name:
                raise LogError(lineno, f"expected {want_kind} for {want_name} (after line "
                                       f"{self._call_line}), got {kind} {j.get('NAME', '')}".rstrip())
            if kind == "MEMORY":
                self._call_mem.append(_int_str(j["MEMORY"], "MEMORY", lineno))
            else:
                a = _int_str(j["ALIAS"], "ALIAS", lineno, minimum=-1)
                if a >= len(self._call["ARGS"]):
                    raise LogError(lineno, f"ALIAS {a} of {want_name} is out of range: the call "
                                           f"on line {self._call_line} has {len(self._call['ARGS'])} args")
                self._call_alias.append(a)
            if not self._pending:
                self._complete()
            return
        if kind in ("MEMORY", "ALIAS"):
            raise LogError(lineno, f"{kind} line not following a CONSTANT or CALL")

        if kind == "ANNOTATE":
            a = j["ANNOTATION"]
            if a == "START":
                if st.has_start:
                    raise LogError(lineno, "second START annotation")
                st.has_start = True
                self._started = True
            elif a == "STEP":
                if not st.has_start and self.expect_start:
                    raise LogError(lineno, "STEP annotation before START")
                st.steps += 1
                st.step_compute_ns.append(0)
                self._step_backward = False
            else:
                if self._step_backward:
                    raise LogError(lineno, "second BACKWARD annotation in one step")
                if not st.has_start and self.expect_start:
                    raise LogError(lineno, "BACKWARD annotation before START")
                st.has_backward = True
                self._step_backward = True
            return

        if kind == "CONSTANT":
            self._call, self._call_line = j, lineno
            self._call_mem, self._call_alias = [], []
            self._pending = [("MEMORY", j["NAME"])]
            return
        if kind == "CALL":
            res = j["RESULT"]
            if len(set(res)) != len(res):
                raise LogError(lineno, f"CALL {j['NAME']} lists a result name twice")
            if self._active():
                for a in j["ARGS"]:
                    self._need(a, "argument")
                for r in res:
                    if r in self._ever:
                        raise LogError(lineno, f"result {r} is introduced a second time")
            _int_str(j["TIME"], "TIME", lineno)
            self._call, self._call_line = j, lineno
            self._call_mem, self._call_alias = [], []
            self._pending = [(k, r) for r in res for k in ("MEMORY", "ALIAS")]
            return
        if kind == "MUTATE":
            t = _int_str(j["TIME"], "TIME", lineno)
            args, muts = j["ARGS"], j["MUTATE"]
            if len(set(muts)) != len(muts):
                raise LogError(lineno, "MUTATE lists an index twice")
            for m in muts:
                if not 0 <= m < len(args):
                    raise LogError(lineno, f"MUTATE index {m} out of range (ARGS has {len(args)})")
            if len({args[m] for m in muts}) != len(muts):
                raise LogError(lineno, "MUTATE mutates the same name twice")
            if not self._active():
                return
            tids = [self._need(a, "argument") for a in args]
            new = [self._storages[self._tstore[tids[m]]].size for m in muts]
            self._bottleneck(tids, sum(new))
            olds = []
            for m, size in zip(muts, new):  # all new versions exist before any old one goes
                nt = self._new_tensor(self._new_storage(size, False), size)
                self._storages[self._tstore[nt]].refs += 1
                olds.append(self._bound[args[m]])
                self._bound[args[m]] = nt
            self._peak()
            for old in olds:
                self._unref(old)
            st.mutates += 1
            st.compute_ns += t
            st.step_compute_ns[-1] += t
            if not st.has_backward:
                st.forward_ns += t
            st.op_names[j["NAME"]] = st.op_names.get(j["NAME"], 0) + 1
            return
        if not self._active():
            return
        if kind == "COPY":
            tid = self._need(j["SRC"], "COPY source")
            self._bind(j["DST"], tid)
            st.copies += 1
        elif kind == "COPY_FROM":
            src = self._need(j["SRC"], "COPY_FROM source")
            old = self._need(j["DST"], "COPY_FROM destination")
            self._bound[j["DST"]] = src
            self._storages[self._tstore[src]].refs += 1
            self._unref(old)
            st.copy_froms += 1
        elif kind == "RELEASE":
            tid = self._need(j["NAME"], "released name")
            del self._bound[j["NAME"]]
            self._unref(tid)
            st.releases += 1

    def _active(self) -> bool:
        return self._started or not self.expect_start

    def _complete(self) -> None:
        """All follow-up lines of a CONSTANT or CALL were read."""
        j, st = self._call, self.stats
        if not self._active():
            return
        if j["INSTRUCTION"] == "CONSTANT":
            size = self._call_mem[0]
            self._bind(j["NAME"], self._new_tensor(self._new_storage(size, True), size))
            st.constants += 1
            st.constant_bytes += size
            self._peak()
            return
        args = j["ARGS"]
        tids = [self._bound[a] for a in args]
        new_bytes = sum(m for m, a in zip(self._call_mem, self._call_alias) if a == -1)
        self._bottleneck(tids, new_bytes)
        for r, m, a in zip(j["RESULT"], self._call_mem, self._call_alias):
            if a == -1:
                self._bind(r, self._new_tensor(self._new_storage(m, False), m))
            else:
                self._bind(r, self._new_tensor(self._tstore[tids[a]], 0))
        self._peak()
        t = int(j["TIME"])
        st.calls += 1
        st.compute_ns += t
        st.step_compute_ns[-1] += t
        if not st.has_backward:
            st.forward_ns += t
        st.op_names[j["NAME"]] = st.op_names.get(j["NAME"], 0) + 1

    def finish(self) -> Stats:
        st = self.stats
        if self._pending:
            kind, name = self._pending[0]
            raise LogError(self._line + 1, f"log ends while expecting {kind} for {name} "
                                           f"(after line {self._call_line})")
        if self.expect_start and not st.has_start:
            raise LogError(self._line + 1, "log has no START annotation")
        st.final_bytes = self._mem
        st.live_names = len(self._bound)
        tids = set(self._bound.values())
        st.live_tensors = len(tids)
        sids = {self._tstore[t] for t in tids}
        st.live_storages = len(sids)
        nc = [s for s in sids if not self._storages[s].constant]
        st.live_nonconstant_storages = len(nc)
        st.live_nonconstant_bytes = sum(self._storages[s].size for s in nc)
        return st

    def live_names(self) -> List[str]:
        return sorted(self._bound)


def check_lines(lines: Iterable[str], expect_start: bool = True,
                memory_trace: Optional[List[int]] = None) -> Stats:
    """Check an iterable of log lines; raise LogError on the first violation."""
    c = Checker(expect_start=expect_start, memory_trace=memory_trace)
    for text in lines:
        c.feed(text.rstrip("\n"))
    return c.finish()


def check_file(path: str, expect_start: bool = True,
               memory_trace: Optional[List[int]] = None) -> Stats:
    with open(path, encoding="utf-8") as f:
        return check_lines(f, expect_start=expect_start, memory_trace=memory_trace)


def _mb(x: int) -> str:
    return f"{x / 1e6:.1f}"


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("logs", nargs="+", help="DTR log files")
    p.add_argument("--no-start", action="store_true",
                   help="the log has no START annotation: check every line")
    p.add_argument("--require-backward", action="store_true",
                   help="fail if the log has no BACKWARD annotation")
    p.add_argument("--expect-live-names", type=int, metavar="N",
                   help="fail unless exactly N names are bound at the end")
    p.add_argument("--max-live-nonconstant", type=int, metavar="N",
                   help="fail if more than N non-constant storages are alive at the end")
    p.add_argument("--json", action="store_true", help="print the statistics as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="print violations only")
    a = p.parse_args(argv)
    status = 0
    for path in a.logs:
        try:
            st = check_file(path, expect_start=not a.no_start)
            if a.require_backward and not st.has_backward:
                raise LogError(st.lines + 1, "log has no BACKWARD annotation")
            if a.expect_live_names is not None and st.live_names != a.expect_live_names:
                raise LogError(st.lines + 1, f"{st.live_names} names bound at the end, "
                                             f"expected {a.expect_live_names}")
            if a.max_live_nonconstant is not None and \
                    st.live_nonconstant_storages > a.max_live_nonconstant:
                raise LogError(st.lines + 1, f"{st.live_nonconstant_storages} non-constant "
                                             f"storages alive at the end, at most "
                                             f"{a.max_live_nonconstant} allowed")
        except LogError as e:
            print(f"{path}:{e.line}: {e.msg}", file=sys.stderr)
            status = 1
            continue
        except OSError as e:
            print(f"{path}: {e}", file=sys.stderr)
            status = 1
            continue
        if a.json:
            print(json.dumps({"log": path, **st.as_dict()}))
        elif not a.quiet:
            print(f"{path}: OK  {st.lines} lines, {st.calls} calls, {st.mutates} mutates, "
                  f"{st.constants} constants ({_mb(st.constant_bytes)} MB), "
                  f"compute {st.compute_ns / 1e6:.2f} ms (fwd {st.forward_ns / 1e6:.2f}), "
                  f"{st.steps} step{'s' if st.steps > 1 else ''}, "
                  f"peak {_mb(st.peak_bytes)} MB, bottleneck {_mb(st.bottleneck_bytes)} MB, "
                  f"end: {st.live_names} names / {st.live_storages} storages "
                  f"({st.live_nonconstant_storages} non-constant, "
                  f"{_mb(st.live_nonconstant_bytes)} MB)")
    return status


if __name__ == "__main__":
    sys.exit(main())
