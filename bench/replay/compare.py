#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compares dtr-replay --json output with the published simulator's figures.

usage: compare.py OURS.json REFERENCE.json [--markdown FILE] [--tolerance 0.02]

A cell matches when both runs agree on the status (ok / thrash / oom) and, for ok runs,
the slowdowns differ by at most the tolerance.
"""
import argparse
import json
import sys

NAMES = {"dtr": "DTR", "dtr_eqclass": "DTREqClass", "dtr_local": "DTRLocal",
         "msps": "MSPS", "lru": "LRU", "largest": "LargestStorage"}


def key_ratio(r):
    return f"{float(r):g}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours")
    ap.add_argument("reference")
    ap.add_argument("--markdown")
    ap.add_argument("--tolerance", type=float, default=0.02)
    args = ap.parse_args()
    ours = json.load(open(args.ours))
    ref = json.load(open(args.reference))
    table = {}
    for run in ref["runs"]:
        for ratio, value in run["slowdown"].items():
            table[(run["log"], run["heuristic"], key_ratio(ratio))] = value
    rows, matched, total, mismatches = [], 0, 0, []
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
        total += 1
        matched += ok
        rows.append((r["log"], r["heuristic"], r["ratio"], mine, theirs, ok))
        if not ok:
            mismatches.append(rows[-1])
    print(f"{matched}/{total} cells match (tolerance {args.tolerance})")
    for log, h, ratio, mine, theirs, _ in mismatches:
        fmt = lambda v: f"{v:.4f}" if isinstance(v, float) else str(v)
        print(f"  {log[:24]:24} {h:12} {ratio:5} ours {fmt(mine):>8}  reference {fmt(theirs):>8}")
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(f"{matched} of {total} cells match (|difference| <= {args.tolerance}, same status)\n\n")
            out.write("| log | heuristic | ratio | ours | reference | match |\n|---|---|---|---|---|---|\n")
            for log, h, ratio, mine, theirs, ok in rows:
                fmt = lambda v: f"{v:.4f}" if isinstance(v, float) else str(v)
                out.write(f"| {log.split('-')[0]} | {h} | {ratio:g} | {fmt(mine)} | {fmt(theirs)} | {'yes' if ok else '**no**'} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
