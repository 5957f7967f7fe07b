#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Markdown table and plot of the bench rows in examples/torch/results/*.json (run_bench.sh).

    python3 examples/torch/plot_results.py [RESULTS_DIR] [--png FILE] [--glob PATTERN ...]

--glob picks the files (relative to RESULTS_DIR, default *.json; repeat it to add more), e.g.
one round's runs and the host-tier runs beside them:
--glob '*-c1a5d8f.json' --glob 'offload/*-b*-host.json'. Runs with a host tier are drawn dashed.
"""

import argparse
import glob
import json
import os
import sys


def mib(n):
    return "–" if n is None else f"{n / 2**20:.0f}"


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser()
    p.add_argument("results", nargs="?", default=os.path.join(here, "results"))
    p.add_argument("--png")
    p.add_argument("--glob", action="append", help="files to read, relative to RESULTS (default *.json)")
    a = p.parse_args(argv[1:])
    res, png = a.results, a.png
    files = sorted({f for g in (a.glob or ["*.json"]) for f in glob.glob(os.path.join(res, g))})
    if not files:
        p.error(f"no files match {a.glob or ['*.json']} in {res}")
    rows = []
    for f in files:
        name = os.path.relpath(f, res)[:-5]
        for r in json.load(open(f)):
            if "status" not in r:  # not a bench row (remat_profile.py's breakdowns)
                continue
            rows.append((name + (f" [{r['config']}]" if "config" in r else ""), r))
    print("| run | ratio | budget MiB | status | wall × plain | CPU × plain | runtime peak MiB | allocator peak MiB | plain peak MiB | remats | evictions | bit-identical | f | f with grads |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in rows:
        ratio = f"{r['ratio']:.3f}" + (" (floor)" if r.get("floor") else "")
        t = "–" if r["step_time_ratio"] is None else f"{r['step_time_ratio']:.2f}"
        c = "–" if r.get("step_cpu_ratio") is None else f"{r['step_cpu_ratio']:.2f}"
        fg = "–" if r.get("physical_floor_with_grads") is None else f"{r['physical_floor_with_grads']:.2f}"
        bi = "–" if r["bit_identical"] is None else ("yes" if r["bit_identical"] else "**no**")
        print(f"| {name} | {ratio} | {mib(r['budget_bytes'])} | {r['status']} | {t} | {c} | {mib(r['runtime_peak_bytes'])} | "
              f"{mib(r['allocator_peak_bytes'])} | {mib(r['plain_peak_bytes'])} | {r['remats'] if r['remats'] is not None else '–'} | "
              f"{r['evictions'] if r['evictions'] is not None else '–'} | {bi} | {r['physical_floor']:.2f} | {fg} |")
    if png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7, 4.5))
        by = {}
        tiered = set()  # runs with a host tier (their rows say so)
        for name, r in rows:
            # the side studies (configurations compared, the 50x remat-limit floors) stay out
            if "compare" in name or "tf50" in name:
                continue
            if r["status"] == "ok" and not r.get("floor"):
                # the thread's CPU time: the wall time on this shared machine is mostly load
                y = r.get("step_cpu_ratio") or r["step_time_ratio"]
                by.setdefault(name, []).append((r["ratio"], y))
                if r.get("host_memory"):
                    tiered.add(name)
        colors = plt.get_cmap("tab10").colors
        # one colour per model (the part of the file name before its first '-'), so that
        # a model's other configurations sit beside it in the same colour
        models = sorted({os.path.basename(n).split("-")[0] for n in by})
        for name, pts in by.items():
            i = models.index(os.path.basename(name).split("-")[0])
            pts.sort()
            # other configurations of a model (parked, another policy, a host tier) dashed
            style = "--" if ("parked" in name or "dtr_held" in name or name in tiered) else "-"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name,
                    color=colors[i % len(colors)], linestyle=style)
        ax.set_xlabel("budget / unlimited runtime peak")
        ax.set_ylabel("median step CPU time / plain PyTorch")
        ax.invert_xaxis()
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title("dtr_torch: step time against budget\n(CPU, 1 thread; dashed: host tier or "
                     "another configuration)", fontsize=10)
        fig.tight_layout()
        fig.savefig(png, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
