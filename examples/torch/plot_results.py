#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Markdown table and plot of the bench rows in examples/torch/results/*.json (run_bench.sh).

    python3 examples/torch/plot_results.py [RESULTS_DIR] [--png FILE]
"""

import glob
import json
import os
import sys


def mib(n):
    return "–" if n is None else f"{n / 2**20:.0f}"


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    res = argv[1] if len(argv) > 1 and not argv[1].startswith("--") else os.path.join(here, "results")
    png = argv[argv.index("--png") + 1] if "--png" in argv else None
    rows = []
    for f in sorted(glob.glob(os.path.join(res, "*.json"))):
        name = os.path.basename(f)[:-5]
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
        for name, r in rows:
            # the side studies (configurations compared, the 50x remat-limit floors) stay out
            if "compare" in name or "tf50" in name:
                continue
            if r["status"] == "ok" and not r.get("floor"):
                # the thread's CPU time: the wall time on this shared machine is mostly load
                y = r.get("step_cpu_ratio") or r["step_time_ratio"]
                by.setdefault(name, []).append((r["ratio"], y))
        colors = plt.get_cmap("tab20").colors
        for i, (name, pts) in enumerate(by.items()):
            pts.sort()
            # other configurations of a model (parked, another policy) dashed
            style = "--" if ("parked" in name or "dtr_held" in name) else "-"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name,
                    color=colors[i % len(colors)], linestyle=style)
        ax.set_xlabel("budget / unlimited runtime peak")
        ax.set_ylabel("median step CPU time / plain PyTorch")
        ax.invert_xaxis()
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_title("dtr_torch: step time against budget (CPU, 1 thread)")
        fig.tight_layout()
        fig.savefig(png, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
