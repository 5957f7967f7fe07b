# SPDX-License-Identifier: Apache-2.0
"""python3 -m dtr_torch.bench end to end on small models: a FILE.py:FACTORY model with
--find-floor and --json, --deterministic-costs, and a torchvision model; the rows carry the
documented fields, and every step's counters (per_step), a stopped run's too. Then the
measuring scripts beside the package (overhead.py, compare_configs.py) on the small model."""

import json
import os
import subprocess
import sys
import tempfile

from _common import torch  # noqa: F401 (skips without torch or the extension)

FIELDS = {"model", "ratio", "budget_bytes", "status", "bit_identical", "step_time_ratio",
          "runtime_peak_bytes", "allocator_peak_bytes", "plain_peak_bytes", "remats", "evictions",
          "physical_floor"}

FACTORY = '''
import torch
F = torch.nn.functional

def make(batch):
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10))
    x = torch.randn(batch, 3, 24, 24)
    y = torch.randint(0, 10, (batch,))
    return m, (x,), lambda out: F.cross_entropy(out, y)
'''


def bench(*args):
    out = subprocess.run([sys.executable, "-m", "dtr_torch.bench", *args], capture_output=True, text=True,
                         timeout=200)
    print(out.stdout)
    assert out.returncode == 0, out.stderr
    return out.stdout


def script(name, *args):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", name)
    out = subprocess.run([sys.executable, path, *args], capture_output=True, text=True, timeout=200)
    print(out.stdout)
    assert out.returncode == 0, out.stderr
    return out.stdout


def main():
    with tempfile.TemporaryDirectory() as tmp:
        f = os.path.join(tmp, "model.py")
        with open(f, "w") as fh:
            fh.write(FACTORY)
        j = os.path.join(tmp, "rows.json")
        bench("--model", f"{f}:make", "--batch", "4", "--steps", "3", "--ratios", "1,0.8,0.01",
              "--find-floor", "--floor-iters", "3", "--json", j)
        rows = json.load(open(j))
        assert len(rows) == 4, rows
        for r in rows:
            assert FIELDS <= set(r), set(r) ^ FIELDS
            assert r["status"] in ("ok", "oom", "thrash", "error"), r
            if r["status"] == "ok":
                assert r["bit_identical"] is True and r["runtime_peak_bytes"] <= r["budget_bytes"], r
            else:
                assert r["error"], r
        # per_step: one entry per step, summing to the row's totals; a stopped run's last
        # entry is the step it stopped in (the oom at 0.01 stops in the first)
        for r in rows[:3]:
            ps = r["per_step"]
            assert sum(ps["rematerializations"]) == r["remats"], r
            assert len(ps["rematerializations"]) == (3 if r["status"] == "ok" else 1), r
        assert rows[0]["status"] == "ok" and rows[0]["evictions"] == 0
        assert rows[1]["status"] == "ok" and rows[1]["evictions"] > 0
        assert rows[2]["status"] == "oom" and "out of memory" in rows[2]["error"] and "aten::" in rows[2]["error"]
        assert rows[3].get("floor") is True and 0.01 < rows[3]["ratio"] <= 0.8
        out = bench("--model", "torchvision:resnet18", "--size", "32", "--classes", "5", "--batch", "2",
                    "--steps", "2", "--ratios", "1", "--json", j)
        rows = json.load(open(j))  # at 32x32 its parameters dominate: ratio 1 only
        assert [r["status"] for r in rows] == ["ok"] and rows[0]["bit_identical"] is True, rows
        assert "physical floor" in out
        # --deterministic-costs: the same decisions in every run, the row says so, and the
        # guard compares recomputation only
        counts = []
        for _ in range(2):
            bench("--model", f"{f}:make", "--batch", "4", "--steps", "3", "--ratios", "0.8",
                  "--deterministic-costs", "--json", j)
            (row,) = json.load(open(j))
            assert row["status"] == "ok" and row["bit_identical"] is True, row
            assert row["deterministic_costs"] is True and row["guard_charges_search"] is False, row
            counts.append((row["evictions"], row["remats"]))
        assert counts[0] == counts[1] and counts[0][0] > 0, counts
        # the measuring scripts beside the package run end to end: plain and bridged steps
        # interleaved, and configurations side by side (the release modes among them)
        out = script("overhead.py", "--model", f"{f}:make", "--batch", "4", "--pairs", "2", "--ratio", "0.8")
        assert "bit-identical after 3 steps: True" in out, out
        for copy in ("plain", "bridge"):  # one copy alone, as a separate run measures it
            out = script("overhead.py", "--model", f"{f}:make", "--batch", "4", "--pairs", "2", "--alone", copy)
            assert f"{copy} alone: steps (CPU ms)" in out and "median" in out, out
        out = script("compare_configs.py", "--model", f"{f}:make", "--batch", "4", "--steps", "3",
                     "--ratios", "0.8", "--rounds", "1", "--config", "off:--park-released off",
                     "--config", "following:--park-released following", "--json", j)
        rows = json.load(open(j))
        assert [(r["config"], r["status"], r["bit_identical"]) for r in rows] == \
            [("off", "ok", True), ("following", "ok", True)], rows
    print("bench: rows complete and consistent")
    return 0


if __name__ == "__main__":
    sys.exit(main())
