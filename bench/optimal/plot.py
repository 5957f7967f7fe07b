#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Figure 3 of the DTR paper, rebuilt: compute overhead vs memory budget on static graphs.

    /usr/bin/python3 bench/optimal/plot.py bench/optimal/results/*.json -o docs/figures/optimal.png

Input: the --json output of dtr-optimal (one record per graph, budget and strategy). One panel per
graph; x = budget (GB), y = compute overhead relative to checkpoint-all (every point a schedule
that passed the checker); one line per strategy. Checkmate's MILP is drawn with filled markers
where CBC proved optimality and open markers where it stopped at the time limit with a feasible
schedule; the LP relaxation's lower bound is the grey dashed line.
"""
import argparse
import json
import math
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {
    # strategy: (label, colour, linestyle, marker, linewidth)
    "checkmate_milp": ("Checkmate MILP (CBC)", "black", "-", "o", 2.0),
    "lp_round_det": ("Checkmate LP + det. rounding", "tab:gray", ":", "^", 1.2),
    "chen_sqrtn_ap": ("Chen sqrt(n) (AP)", "tab:brown", "-", "v", 1.2),
    "chen_greedy_ap": ("Chen greedy (AP)", "tab:olive", "-", "<", 1.2),
    "chen_greedy_lin": ("Chen greedy (linearized)", "tab:purple", "-", ">", 1.2),
    "dtr:dtr": ("DTR h_DTR", "tab:red", "-", "s", 1.6),
    "dtr:dtr_eqclass": ("DTR h_DTR^eq", "tab:orange", "--", "D", 1.6),
    "dtr:dtr_local": ("DTR h_DTR^local", "tab:pink", "-.", "P", 1.4),
    "dtr:msps": ("DTR MSPS", "tab:cyan", "--", "x", 1.2),
    "dtr:lru": ("DTR LRU", "tab:blue", ":", "+", 1.2),
    "dtr:largest": ("DTR largest", "tab:green", ":", "*", 1.2),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+")
    ap.add_argument("-o", "--output", default="docs/figures/optimal.png")
    ap.add_argument("--ymax", type=float, default=1.35, help="top of the overhead axis (default 1.35); higher points are off the panel")
    args = ap.parse_args()

    records = []
    for f in args.json:
        with open(f) as fh:
            records.extend(json.load(fh))
    graphs = []
    by = defaultdict(lambda: defaultdict(list))  # graph -> strategy -> records
    for r in records:
        g = os.path.basename(r["graph"]).replace(".json", "")
        if g not in graphs:
            graphs.append(g)
        by[g][r["strategy"]].append(r)
    if not graphs:
        sys.exit("plot.py: no records")

    fig, axes = plt.subplots(1, len(graphs), figsize=(max(9.0, 5.2 * len(graphs)), 4.8), squeeze=False)
    handles = {}
    for ax, g in zip(axes[0], graphs):
        strategies = by[g]
        any_r = next(iter(strategies.values()))[0]
        peak = any_r["checkpoint_all_peak_bytes"] / 1e9
        lb = any_r["lb_bytes"] / 1e9
        # LP lower bound
        if "lp_bound" in strategies:
            pts = sorted((r["budget_bytes"] / 1e9, r["bound_overhead"]) for r in strategies["lp_bound"]
                         if r["bound_overhead"] is not None)
            if pts:
                (h,) = ax.plot([p[0] for p in pts], [p[1] for p in pts], color="0.6", ls="--", lw=1,
                               label="LP lower bound")
                handles["LP lower bound"] = h
        for name, (label, colour, ls, marker, lw) in STYLE.items():
            rs = sorted(strategies.get(name, []), key=lambda r: r["budget_bytes"])
            pts = [(r["budget_bytes"] / 1e9, r["overhead"], r["status"]) for r in rs if r["checked"]]
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ys = [p[1] for p in pts]  # not clipped: points above --ymax leave the panel
            (h,) = ax.plot(xs, ys, color=colour, ls=ls, lw=lw, marker=None, label=label, zorder=3)
            handles[label] = h
            if name == "checkmate_milp":
                opt = [(x, y) for (x, y, (_, _, s)) in zip(xs, ys, pts) if s == "optimal"]
                feas = [(x, y) for (x, y, (_, _, s)) in zip(xs, ys, pts) if s != "optimal"]
                if opt:
                    h1 = ax.scatter([p[0] for p in opt], [p[1] for p in opt], s=46, color="black", zorder=5,
                                    label="MILP proved optimal")
                    handles["MILP proved optimal"] = h1
                if feas:
                    h2 = ax.scatter([p[0] for p in feas], [p[1] for p in feas], s=46, facecolors="white",
                                    edgecolors="black", zorder=5, label="MILP time limit (feasible)")
                    handles["MILP time limit (feasible)"] = h2
            else:
                ax.scatter(xs, ys, color=colour, marker=marker, s=22, zorder=4)
        ax.axvline(lb, color="0.8", lw=0.8)
        ax.set_title(f"{g}\nLB {lb:.2f} GB, checkpoint-all peak {peak:.2f} GB", fontsize=9)
        ax.set_xlabel("memory budget (GB)")
        ax.set_ylabel("compute overhead vs checkpoint-all")
        ax.set_ylim(0.99, args.ymax)
        ax.grid(alpha=0.3)
    fig.legend(list(handles.values()), list(handles.keys()), loc="lower center", ncol=min(5, len(handles)),
               fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    fig.savefig(args.output, dpi=130)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
