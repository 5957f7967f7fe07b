#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Self-test for dtr_trace.py and check_log.py.

Run with ``/usr/bin/python3 bench/trace/test_dtr_trace.py``.  Exits 0 on
success, 1 on failure, and 77 (skip) when torch cannot be imported.
"""

import contextlib
import glob
import io
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import check_log  # noqa: E402  (needs no torch)

try:
    import torch  # noqa: E402
except ImportError as e:  # pragma: no cover
    print(f"SKIP: torch is not importable ({e}); install python3-torch", file=sys.stderr)
    sys.exit(77)

import dtr_trace  # noqa: E402

# The published logs, where the shared data is (DTR_SHARED); the test using them skips without.
PUBLISHED = os.path.join(os.environ.get("DTR_SHARED", ""), "dtr-logs") if os.environ.get("DTR_SHARED") else ""


class Tiny(torch.nn.Module):
    """A model with a view, in-place ops, a mid-forward death and a detached copy."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 8)
        self.bn = torch.nn.BatchNorm1d(8)
        self.fc2 = torch.nn.Linear(8, 3)

    def forward(self, x):
        h = self.fc1(x)                  # t() of the weight: a view
        tmp = torch.neg(h)               # nothing saves neg's result ...
        s = tmp.sum()
        del tmp                          # ... so it dies here, mid-forward
        h = self.bn(h)                   # writes running stats and returns fresh tensors
        d = h.detach()                   # a second name for the same tensor
        flat = h.view(-1)                # a view with a different geometry
        h.add_(1.0)                      # in-place: MUTATE; d follows (COPY_FROM), flat goes stale
        h = torch.relu_(h)               # in-place on an autograd-saved-free tensor
        g = torch.sigmoid(h)             # saves its result for backward
        return self.fc2(g) + s + d.sum() + flat.sum() * 0


def _lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


class RecordTiny(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.manual_seed(0)
        cls.model = Tiny()
        cls.tmp = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.tmp.name, "tiny.log")
        x = torch.randn(5, 6)
        y = torch.randint(0, 3, (5,))
        cls.audit = []
        cls.stats = dtr_trace.record(cls.model, (x,), torch.nn.functional.cross_entropy,
                                     cls.path, targets=(y,), audit=cls.audit)
        cls.log = _lines(cls.path)
        cls.mem = []
        cls.check = check_log.check_file(cls.path, memory_trace=cls.mem)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def index(self, pred, start=0):
        for i in range(start, len(self.log)):
            if pred(self.log[i]):
                return i
        self.fail("no such line")

    def call(self, op, start=0):
        return self.index(lambda j: j["INSTRUCTION"] == "CALL" and j["NAME"] == op, start)

    def test_valid_and_annotated(self):
        self.assertEqual(self.log[0], {"INSTRUCTION": "ANNOTATE", "ANNOTATION": "START"})
        self.assertTrue(self.check.has_backward)
        self.assertGreater(self.check.calls, 10)
        self.assertEqual(self.stats.unknown_impls, 0)
        self.assertEqual(self.stats.foreign_outputs, 0)
        self.assertEqual(self.stats.shared_fresh_outputs, 0)

    def test_constants_first(self):
        params = list(self.model.parameters()) + list(self.model.buffers())
        for j in self.log[1:1 + 2 * (len(params) + 2)]:
            self.assertIn(j["INSTRUCTION"], ("CONSTANT", "MEMORY"))
        self.assertEqual(self.stats.constants, len(params) + 2)

    def test_view_is_alias(self):
        i = self.call("t")
        self.assertEqual(self.log[i + 2], {"INSTRUCTION": "ALIAS", "NAME": self.log[i]["RESULT"][0],
                                           "ALIAS": "0"})
        v = self.call("view")
        self.assertEqual(self.log[v + 2]["ALIAS"], "0")
        # the view shares the weight's storage: same MEMORY as the weight constant
        w = self.log[i]["ARGS"][0]
        wmem = next(j["MEMORY"] for j in self.log if j["INSTRUCTION"] == "MEMORY" and j["NAME"] == w)
        self.assertEqual(self.log[i + 1]["MEMORY"], wmem)

    def test_detach_is_copy(self):
        self.assertGreaterEqual(self.stats.view_copies, 1)
        self.assertTrue(any(j["INSTRUCTION"] == "COPY" for j in self.log))

    def test_inplace_is_mutate(self):
        muts = [j for j in self.log if j["INSTRUCTION"] == "MUTATE"]
        names = {j["NAME"] for j in muts}
        self.assertTrue({"add_", "relu_", "native_batch_norm"} <= names, names)
        bn = next(j for j in muts if j["NAME"] == "native_batch_norm")
        self.assertEqual(bn["MUTATE"], [3, 4])  # running_mean, running_var
        for j in muts:
            self.assertTrue(all(type(m) is int for m in j["MUTATE"]))
        # the detached copy follows the in-place add_, the flat view cannot
        consts = self.constant_names()
        add = self.index(lambda j: j["INSTRUCTION"] == "MUTATE" and j["NAME"] == "add_"
                         and j["ARGS"][0] not in consts)
        self.assertEqual(self.log[add + 1]["INSTRUCTION"], "COPY_FROM")
        self.assertEqual(self.log[add + 1]["SRC"], self.log[add]["ARGS"][0])
        self.assertGreaterEqual(self.stats.stale_names, 1)

    def constant_names(self):
        return {j["NAME"] for j in self.log if j["INSTRUCTION"] == "CONSTANT"}

    def test_mid_forward_death(self):
        neg = self.call("neg")
        r = self.log[neg]["RESULT"][0]
        rel = self.index(lambda j: j["INSTRUCTION"] == "RELEASE" and j["NAME"] == r)
        bwd = self.index(lambda j: j.get("ANNOTATION") == "BACKWARD")
        self.assertLess(rel, bwd)
        # the replay frees it there: resident bytes drop by its size
        size = int(self.log[neg + 1]["MEMORY"])
        self.assertEqual(self.mem[rel - 1] - self.mem[rel], size)

    def test_saved_result_survives_to_backward(self):
        sig = self.call("sigmoid")
        r = self.log[sig]["RESULT"][0]
        bwd = self.call("sigmoid_backward")
        # some name bound to sigmoid's result (or a copy) is used by sigmoid_backward
        aliases = {r}
        for j in self.log[sig:bwd]:
            if j["INSTRUCTION"] in ("COPY", "COPY_FROM") and j["SRC"] in aliases:
                aliases.add(j["DST"])
        self.assertTrue(aliases & set(self.log[bwd]["ARGS"]))

    def test_memory_matches_live_storages(self):
        # at every point between operators, the replay's resident bytes equal the
        # bytes of the storages the recorder still names, and all of those are alive
        # -- except while the stale view ``flat`` keeps the pre-add_ version of h
        # alive in the replay (a limit of the format): then the replay holds one
        # extra copy of h's storage (5 x 8 floats)
        self.assertGreater(len(self.audit), 10)
        extra = set()
        for lines, live_bytes, dead in self.audit:
            self.assertEqual(dead, 0)
            if lines:
                extra.add(self.mem[lines - 1] - live_bytes)
        self.assertEqual(extra, {0, 5 * 8 * 4})
        self.assertEqual(self.mem[-1], self.audit[-1][1])

    def test_end_state(self):
        params = list(self.model.parameters())
        buffers = list(self.model.buffers())
        grads = [p.grad for p in params if p.grad is not None]
        self.assertEqual(len(grads), len(params))
        want = len(params) + len(buffers) + len(grads)
        self.assertEqual(self.check.live_storages, want)
        self.assertEqual(self.check.live_names, want)
        self.assertEqual(self.stats.unexpected_live_at_end, 0)
        # what is not a constant at the end: the grads and the written buffers
        self.assertEqual(self.check.live_nonconstant_storages, len(grads) + len(buffers))


class Premises(unittest.TestCase):
    def test_pyobject_preserved(self):
        # death detection relies on this: a tensor's Python object (and so a weakref
        # finalizer on it) lives as long as its TensorImpl, not as long as Python refs
        import gc
        import weakref
        x = torch.randn(3, requires_grad=True)
        y = x * 2
        z = y.sin()          # saves y itself for backward
        fired = []
        weakref.finalize(y, fired.append, "y")
        del y
        gc.collect()
        self.assertEqual(fired, [])
        del z                # frees the graph and with it the saved y
        gc.collect()
        self.assertEqual(fired, ["y"])

    def test_storage_weak_ref(self):
        x = torch.randn(4)
        w = x._storage()._weak_ref()
        v = x[1:]
        del x
        self.assertFalse(dtr_trace._UntypedStorage._expired(w))
        del v
        self.assertTrue(dtr_trace._UntypedStorage._expired(w))
        dtr_trace._UntypedStorage._free_weak_ref(w)


class TorchvisionSmoke(unittest.TestCase):
    def test_resnet18_tiny(self):
        try:
            import torchvision
        except ImportError:
            self.skipTest("torchvision not importable")
        torch.manual_seed(0)
        m = torchvision.models.resnet18(weights=None, num_classes=4)
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "r.log")
            audit = []
            st = dtr_trace.record(m, (torch.randn(2, 3, 32, 32),),
                                  torch.nn.functional.cross_entropy, p,
                                  targets=(torch.tensor([0, 3]),), audit=audit)
            mem = []
            cs = check_log.check_file(p, memory_trace=mem)
        n = len(list(m.parameters()))
        self.assertEqual(cs.live_storages, 2 * n + len(list(m.buffers())))
        self.assertEqual(st.unexpected_live_at_end, 0)
        for lines, live_bytes, dead in audit:
            self.assertEqual(dead, 0)
            if lines:
                self.assertEqual(mem[lines - 1], live_bytes)


class RecordSteps(unittest.TestCase):
    """--steps N: a training loop's steps (zero_grad, forward, backward, optimizer step),
    ANNOTATE STEP between them, the optimizer's state made in the first."""

    def record(self, model, batches, steps, optimizer, repeats=1, stale_view_bytes=0):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "steps.log")
            audit = []
            st = dtr_trace.record(model, batches[0][0], torch.nn.functional.cross_entropy, p,
                                  targets=batches[0][1], audit=audit, steps=steps,
                                  optimizer=optimizer, batches=batches, repeats=repeats)
            mem = []
            cs = check_log.check_file(p, memory_trace=mem)
            log = _lines(p)
        # the replay holds exactly what PyTorch holds, but for the version a stale view keeps
        # (Tiny's ``flat``: RecordTiny.test_memory_matches_live_storages)
        extra = set()
        for lines, live_bytes, dead in audit:
            self.assertEqual(dead, 0)
            if lines:
                extra.add(mem[lines - 1] - live_bytes)
        self.assertLessEqual(extra, {0, stale_view_bytes})
        self.assertEqual(mem[-1], audit[-1][1])
        return st, cs, log

    def test_sgd_loop(self):
        torch.manual_seed(0)
        model = Tiny()
        before = [p.detach().clone() for p in model.parameters()]
        batches = [((torch.randn(5, 6),), (torch.randint(0, 3, (5,)),)) for _ in range(3)]
        st, cs, log = self.record(model, batches, 3,
                                  lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
                                  repeats=2, stale_view_bytes=5 * 8 * 4)
        # the model given is left as it was: each run trains a copy
        for a, b in zip(before, model.parameters()):
            self.assertTrue(torch.equal(a, b))
        self.assertEqual(cs.steps, 3)
        self.assertEqual(len(cs.step_compute_ns), 3)
        self.assertEqual(sum(cs.step_compute_ns), cs.compute_ns)
        kinds = [j.get("ANNOTATION") for j in log if j["INSTRUCTION"] == "ANNOTATE"]
        self.assertEqual(kinds, ["START", "BACKWARD", "STEP", "BACKWARD", "STEP", "BACKWARD"])
        self.assertEqual(st.info["steps"], 3)
        self.assertEqual(st.info["times"], "minimum over 2 runs")
        # every parameter (the first constants) is updated in place in every step
        n_params = len(list(model.parameters()))
        params = [j["NAME"] for j in log if j["INSTRUCTION"] == "CONSTANT"][:n_params]
        step_of, k = [], 0
        for j in log:
            k += j.get("ANNOTATION") == "STEP"
            step_of.append(k)
        for step in range(3):
            updated = {j["ARGS"][m] for i, j in enumerate(log)
                       if step_of[i] == step and j["INSTRUCTION"] == "MUTATE" for m in j["MUTATE"]}
            self.assertLessEqual(set(params), updated, f"step {step}")
        # the end: parameters, buffers, gradients and one momentum buffer per parameter
        want = 3 * n_params + len(list(model.buffers()))
        self.assertEqual(cs.live_storages, want)
        self.assertEqual(st.unexpected_live_at_end, 0)
        # each step's batch is declared where the step begins, and released at its end
        constants_after_start = [step_of[i] for i, j in enumerate(log)
                                 if j["INSTRUCTION"] == "CONSTANT"]
        self.assertEqual(sorted(set(constants_after_start)), [0, 1, 2])

    def test_steps_differ_for_a_data_dependent_model(self):
        torch.manual_seed(0)
        model = dtr_trace.LatentTreeLSTM(dim=16)
        batches = [((torch.randint(0, 1000, (12,)),), (torch.randint(0, 5, (1,)),))
                   for _ in range(2)]
        st, cs, log = self.record(model, batches, 2, None)
        self.assertEqual(cs.steps, 2)
        self.assertIsNone(st.info["optimizer"])
        calls = [[], []]
        k = 0
        for j in log:
            k += j.get("ANNOTATION") == "STEP"
            if j["INSTRUCTION"] == "CALL":
                calls[k].append(j["NAME"])
        self.assertNotEqual(calls[0], calls[1])  # another sequence, another tree

    def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            dtr_trace.record(Tiny(), (torch.randn(5, 6),), torch.nn.functional.cross_entropy,
                             os.devnull, targets=(torch.randint(0, 3, (5,)),), steps=0)
        with self.assertRaises(ValueError):
            dtr_trace.record(Tiny(), (torch.randn(5, 6),), torch.nn.functional.cross_entropy,
                             os.devnull, targets=(torch.randint(0, 3, (5,)),), steps=2,
                             batches=[((torch.randn(5, 6),), (torch.randint(0, 3, (5,)),))])
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit):
            dtr_trace.main(["--model", "resnet18", "-o", os.devnull, "--steps", "0"])
        self.assertIn("--steps must be at least 1", err.getvalue())


class CheckLogRules(unittest.TestCase):
    GOOD = [
        '{"ANNOTATION":"START","INSTRUCTION":"ANNOTATE"}',
        '{"INSTRUCTION":"CONSTANT","NAME":"a"}',
        '{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"a"}',
        '{"ARGS":["a"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["b","c"],"TIME":"5"}',
        '{"INSTRUCTION":"MEMORY","MEMORY":"40","NAME":"b"}',
        '{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"b"}',
        '{"INSTRUCTION":"MEMORY","MEMORY":"100","NAME":"c"}',
        '{"ALIAS":"0","INSTRUCTION":"ALIAS","NAME":"c"}',
        '{"DST":"d","INSTRUCTION":"COPY","SRC":"b"}',
        '{"ARGS":["d","a"],"INSTRUCTION":"MUTATE","MUTATE":[0],"NAME":"g_","TIME":"3"}',
        '{"INSTRUCTION":"RELEASE","NAME":"c"}',
        '{"ANNOTATION":"BACKWARD","INSTRUCTION":"ANNOTATE"}',
        '{"DST":"b","INSTRUCTION":"COPY_FROM","SRC":"d"}',
        '{"INSTRUCTION":"RELEASE","NAME":"d"}',
    ]

    def run_lines(self, lines):
        return check_log.check_lines(lines)

    def expect_error(self, lines, line, fragment):
        with self.assertRaises(check_log.LogError) as cm:
            self.run_lines(lines)
        self.assertEqual(cm.exception.line, line, cm.exception.msg)
        self.assertIn(fragment, cm.exception.msg)

    def test_good(self):
        mem = []
        st = check_log.check_lines(self.GOOD, memory_trace=mem)
        self.assertEqual((st.calls, st.mutates, st.live_names), (1, 1, 2))
        self.assertEqual(st.compute_ns, 8)
        self.assertEqual(st.forward_ns, 8)
        # a(100) + b(40); MUTATE adds d's new version (40) and frees the old b? no:
        # the old version is still named b, so 180 at the peak; then b follows d
        self.assertEqual(st.peak_bytes, 180)
        self.assertEqual(mem[-1], 140)

    def replace(self, i, text):
        lines = list(self.GOOD)
        lines[i] = text
        return lines

    def test_unbound_arg(self):
        self.expect_error(self.replace(3, self.GOOD[3].replace('["a"]', '["zz"]')), 4,
                          "not bound")

    def test_missing_alias(self):
        lines = self.GOOD[:5] + self.GOOD[6:]
        self.expect_error(lines, 6, "expected ALIAS for b")

    def test_alias_range(self):
        self.expect_error(self.replace(7, self.GOOD[7].replace('"0"', '"1"')), 8, "out of range")

    def test_rebind(self):
        self.expect_error(self.replace(8, '{"DST":"a","INSTRUCTION":"COPY","SRC":"b"}'), 9,
                          "second time")

    def test_use_after_release(self):
        lines = self.GOOD + ['{"DST":"e","INSTRUCTION":"COPY","SRC":"c"}']
        self.expect_error(lines, len(lines), "already released")

    def test_types(self):
        self.expect_error(self.replace(9, self.GOOD[9].replace("[0]", '["0"]')), 10,
                          "list of integers")
        self.expect_error(self.replace(3, self.GOOD[3].replace('"5"', "5")), 4, "TIME")
        self.expect_error(self.replace(2, "not json"), 3, "JSON")

    def test_steps(self):
        step = '{"ANNOTATION":"STEP","INSTRUCTION":"ANNOTATE"}'
        backward = '{"ANNOTATION":"BACKWARD","INSTRUCTION":"ANNOTATE"}'
        again = ['{"ARGS":["a"],"INSTRUCTION":"CALL","NAME":"f","RESULT":["e"],"TIME":"7"}',
                 '{"INSTRUCTION":"MEMORY","MEMORY":"40","NAME":"e"}',
                 '{"ALIAS":"-1","INSTRUCTION":"ALIAS","NAME":"e"}']
        st = self.run_lines(self.GOOD + [step] + again + [backward])
        self.assertEqual(st.steps, 2)
        self.assertEqual(st.step_compute_ns, [8, 7])
        self.expect_error(self.GOOD + [step] + again + [backward, backward], len(self.GOOD) + 6,
                          "second BACKWARD annotation in one step")
        self.expect_error(self.GOOD + [backward], len(self.GOOD) + 1,
                          "second BACKWARD annotation in one step")
        self.expect_error([step] + self.GOOD, 1, "STEP annotation before START")

    def test_stray_memory(self):
        lines = self.GOOD + ['{"INSTRUCTION":"MEMORY","MEMORY":"1","NAME":"a"}']
        self.expect_error(lines, len(lines), "not following")

    def test_cli_reports_line(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "bad.log")
            with open(p, "w") as f:
                f.write("\n".join(self.replace(10, '{"INSTRUCTION":"RELEASE","NAME":"q"}')) + "\n")
            err = io.StringIO()
            old = sys.stderr
            sys.stderr = err
            try:
                rc = check_log.main([p, "-q"])
            finally:
                sys.stderr = old
        self.assertEqual(rc, 1)
        self.assertIn("bad.log:11:", err.getvalue())

    @unittest.skipUnless(os.path.isdir(PUBLISHED), "published logs not available")
    def test_published_logs(self):
        # the simulator's figures for them (see $DTR_SHARED/reference)
        peaks = {"resnet32": 10061.2, "unet": 8415.8, "treelstm": 170.2}
        for path in sorted(glob.glob(os.path.join(PUBLISHED, "*.log"))):
            key = os.path.basename(path).split("-")[0]
            if key not in peaks:
                continue  # the big ones take a few seconds each; bench/trace/README.md
            st = check_log.check_file(path)
            self.assertAlmostEqual(st.peak_bytes / 1e6, peaks[key], delta=0.06, msg=path)


if __name__ == "__main__":
    prog = unittest.main(exit=False, verbosity=2)
    sys.exit(0 if prog.result.wasSuccessful() else 1)
