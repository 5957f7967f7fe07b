#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Best of our policies against the best of the published simulator's, per log and ratio.

usage: bench/replay/beat_it_table.py REFERENCE.json RESULTS.json... [--ratio R]... [--show HEURISTIC]...

REFERENCE.json: $DTR_SHARED/reference/simrd-paper-logs.json (simrd's six heuristics).
RESULTS.json: dtr-replay --json output. Prints one markdown table per ratio: the reference's
best (lowest feasible slowdown), ours, their ratio, and the status of our best (ok; or, when
no policy of ours finished, the statuses seen: thrash, oom). --show adds a column with one
of our policies' own slowdown (or status).
"""
import json
import math
import sys


def main(argv):
    ratios, files, show = [], [], []
    it = iter(argv)
    for a in it:
        if a == "--ratio":
            ratios.append(float(next(it)))
        elif a == "--show":
            show.append(next(it))
        else:
            files.append(a)
    if len(files) < 2:
        sys.exit(__doc__)
    ratios = ratios or [0.3, 0.2]
    ref = json.load(open(files[0]))
    ref_best = {}
    for r in ref["runs"]:
        for ra, v in r["slowdown"].items():
            key = (r["log"], float(ra))
            if isinstance(v, (int, float)) and (key not in ref_best or v < ref_best[key][1]):
                ref_best[key] = (r["heuristic"], v)
    ours = {}
    for f in files[1:]:
        for row in json.load(open(f)):
            ours.setdefault((row["log"], float(row["ratio"])), []).append(row)
    logs = sorted({k[0] for k in ours})
    for ratio in ratios:
        print(f"\n### Ratio {ratio}\n")
        print("| log | reference best | slowdown | ours best | slowdown | ours / reference | status |"
              + "".join(f" {h} |" for h in show))
        print("|---|---|---|---|---|---|---|" + "---|" * len(show))
        logr = []
        for log in logs:
            rows = ours.get((log, ratio), [])
            ok = [r for r in rows if r["status"] == "ok"]
            rb = ref_best.get((log, ratio))
            rname, rs = (rb[0], f"{rb[1]:.4f}") if rb else ("none feasible", "thrash/OOM")
            if ok:
                best = min(ok, key=lambda r: r["slowdown"])
                ties = sorted(r["heuristic"] for r in ok if r["slowdown"] == best["slowdown"])
                bs = f"{best['slowdown']:.4f}"
                q = f"{best['slowdown'] / rb[1]:.4f}" if rb else "feasible (ref not)"
                if rb:
                    logr.append(math.log(best["slowdown"] / rb[1]))
                status = "ok"
                name = ", ".join(ties)
            else:
                statuses = sorted({r["status"] for r in rows})
                name, bs, q, status = "none feasible", "-", "-" if not rb else "worse (ref ok)", "/".join(statuses)
            short = log.split("-")[0]
            extra = ""
            for h in show:
                mine = [r for r in rows if r["heuristic"] == h]
                cell = "-" if not mine else (f"{mine[0]['slowdown']:.4f}" if mine[0]["status"] == "ok" else mine[0]["status"])
                extra += f" {cell} |"
            print(f"| {short} | {rname} | {rs} | {name} | {bs} | {q} | {status} |" + extra)
        if logr:
            print(f"\nGeometric mean of ours / reference over the {len(logr)} logs both finish: "
                  f"{math.exp(sum(logr) / len(logr)):.4f}")


if __name__ == "__main__":
    main(sys.argv[1:])
