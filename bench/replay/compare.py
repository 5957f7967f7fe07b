#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compares dtr-replay --json output with the published simulator's figures.

usage: compare.py OURS.json [OURS2.json ...] REFERENCE.json [--markdown FILE] [--tolerance 0.02]
                  [--search S]

A cell (log, heuristic, ratio) matches when both runs agree on the status (ok / thrash / oom)
and, for ok runs, the slowdowns differ by at most the tolerance. Prints the count, a
per-heuristic breakdown and every mismatch. --markdown writes a side-by-side table (one row
per log and heuristic, one column per ratio, "ours / reference", mismatches in bold) and
the per-heuristic breakdown. Heuristics the reference lacks (random, ablations) are skipped.
"""
import argparse
import json
import sys

NAMES = {"dtr": "DTR", "dtr_eqclass": "DTREqClass", "dtr_local": "DTRLocal",
         "msps": "MSPS", "lru": "LRU", "largest": "LargestStorage"}
ORDER = list(NAMES)


def key_ratio(r):
    return f"{float(r):g}"


def short(log):
    return log.split("-")[0].replace("tv_", "")


def fmt(v):
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+", help="OURS.json ... REFERENCE.json")
    ap.add_argument("--markdown")
    ap.add_argument("--tolerance", type=float, default=0.02)
    ap.add_argument("--search", help="only runs made with this --search (default: all)")
    args = ap.parse_args()
    if len(args.files) < 2:
        ap.error("need at least one results file and the reference")
    ours = [r for f in args.files[:-1] for r in json.load(open(f))]
    if args.search:
        ours = [r for r in ours if r.get("search", "exhaustive") == args.search]
    ref = json.load(open(args.files[-1]))
    table = {}
    for run in ref["runs"]:
        for ratio, value in run["slowdown"].items():
            table[(run["log"], run["heuristic"], key_ratio(ratio))] = value
    cells, per_h = {}, {}
    for r in ours:
        name = NAMES.get(r["heuristic"])
        k = (r["log"], name, key_ratio(r["ratio"]))
        if name is None or k not in table:
            continue
        theirs = table[k]
        theirs_status = theirs.lower() if isinstance(theirs, str) else "ok"
        mine = r["slowdown"] if r["status"] == "ok" else r["status"]
        ok = r["status"] == theirs_status and (
            r["status"] != "ok" or abs(r["slowdown"] - theirs) <= args.tolerance)
        cells[(r["log"], r["heuristic"], key_ratio(r["ratio"]))] = (mine, theirs, ok)
        m, t = per_h.get(r["heuristic"], (0, 0))
        per_h[r["heuristic"]] = (m + ok, t + 1)
    matched = sum(ok for _, _, ok in cells.values())
    total = len(cells)
    print(f"{matched}/{total} cells match (tolerance {args.tolerance}, same status)")
    heuristics = [h for h in ORDER if h in per_h]
    for h in heuristics:
        print(f"  {h:12} {per_h[h][0]}/{per_h[h][1]}")
    for (log, h, ratio), (mine, theirs, ok) in sorted(cells.items()):
        if not ok:
            print(f"  mismatch {short(log):12} {h:12} {ratio:5} ours {fmt(mine):>8}  reference {fmt(theirs):>8}")
    if args.markdown:
        logs = sorted({k[0] for k in cells})
        ratios = sorted({k[2] for k in cells}, key=lambda r: -float(r))
        with open(args.markdown, "w") as out:
            out.write(f"{matched} of {total} cells match (|difference| <= {args.tolerance}, same status).\n\n")
            out.write("| heuristic | cells matching |\n|---|---|\n")
            for h in heuristics:
                out.write(f"| {h} | {per_h[h][0]}/{per_h[h][1]} |\n")
            out.write("\nEach cell: ours / reference; mismatches in bold.\n\n")
            out.write("| log | heuristic | " + " | ".join(ratios) + " |\n")
            out.write("|---|---|" + "---|" * len(ratios) + "\n")
            for log in logs:
                for h in heuristics:
                    row = []
                    for ratio in ratios:
                        c = cells.get((log, h, ratio))
                        if c is None:
                            row.append("")
                            continue
                        text = f"{fmt(c[0])} / {fmt(c[1])}"
                        row.append(text if c[2] else f"**{text}**")
                    out.write(f"| {short(log)} | {h} | " + " | ".join(row) + " |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
