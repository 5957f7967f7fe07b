#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Figure-2-style plot of dtr-replay results: slowdown against budget ratio, one panel per
log, one line per heuristic. Runs that thrashed or ran out of memory leave the line.

usage: plot.py RESULTS.json OUT.png [--reference simrd-paper-logs.json] [--title T]
"""
import argparse
import json
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

REF_NAMES = {"DTR": "dtr", "DTREqClass": "dtr_eqclass", "DTRLocal": "dtr_local",
             "MSPS": "msps", "LRU": "lru", "LargestStorage": "largest"}


def short(log):
    return log.split("-")[0].replace("tv_", "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("out")
    ap.add_argument("--reference")
    ap.add_argument("--title", default="dtr-replay: slowdown vs. memory budget")
    args = ap.parse_args()
    runs = json.load(open(args.results))
    logs = sorted({r["log"] for r in runs})
    heuristics = list(dict.fromkeys(r["heuristic"] for r in runs))
    reference = {}
    if args.reference:
        for run in json.load(open(args.reference))["runs"]:
            h = REF_NAMES.get(run["heuristic"])
            for ratio, v in run["slowdown"].items():
                if not isinstance(v, str):
                    reference.setdefault((run["log"], h), []).append((float(ratio), v))
    cols = min(4, len(logs))
    rows = math.ceil(len(logs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, log in enumerate(logs):
        ax = axes[i // cols][i % cols]
        for j, h in enumerate(heuristics):
            pts = sorted((r["ratio"], r["slowdown"]) for r in runs
                         if r["log"] == log and r["heuristic"] == h and r["status"] == "ok")
            if pts:
                ax.plot(*zip(*pts), marker="o", ms=3, color=colors[j % len(colors)], label=h)
            ref = sorted(reference.get((log, h), []))
            if ref:
                ax.plot(*zip(*ref), ls="--", lw=0.8, color=colors[j % len(colors)], alpha=0.6)
        ax.set_title(short(log), fontsize=10)
        ax.set_xlim(1.0, 0.0)
        ax.set_ylim(0.95, 2.05)
        ax.grid(alpha=0.3)
        if i % cols == 0:
            ax.set_ylabel("slowdown (total / baseline compute)")
        if i // cols == rows - 1:
            ax.set_xlabel("budget ratio")
    for k in range(len(logs), rows * cols):
        axes[k // cols][k % cols].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    note = " (dashed: published simulator)" if reference else ""
    fig.legend(handles, labels, loc="lower center", ncol=len(heuristics), fontsize=9,
               title="heuristic" + note)
    fig.suptitle(args.title)
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
