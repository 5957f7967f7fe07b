#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Markdown tables for docs/results.md from dtr-replay --json output.

usage: summarize.py search EXHAUSTIVE.json STRATEGY.json... [--tolerance 0.02]
       summarize.py speed SPEED.txt REFERENCE.json
       summarize.py table RESULTS.json          (slowdown per log, heuristic and ratio)

search: for each heuristic and strategy, the cells (log, ratio) where the strategy's run is
within the tolerance (relative: slowdown <= (1 + tol) x exhaustive's) or where both are
infeasible alike; cells that became infeasible or feasible; the worst relative slowdown;
and the summed victim-search time.
speed: median of the repeated sweeps in SPEED.txt next to the reference's summed wall_s.
"""
import json
import re
import statistics
import sys

REF_NAMES = {"dtr": "DTR", "dtr_eqclass": "DTREqClass", "dtr_local": "DTRLocal",
             "msps": "MSPS", "lru": "LRU", "largest": "LargestStorage"}


def short(log):
    return log.split("-")[0].replace("tv_", "")


def search(args):
    tol = 0.02
    if "--tolerance" in args:
        i = args.index("--tolerance")
        tol = float(args[i + 1])
        del args[i:i + 2]
    exh = {(r["log"], r["heuristic"], r["ratio"]): r for r in json.load(open(args[0]))}
    print(f"| heuristic | search | cells | within {tol:.0%} (or both infeasible) | better by > {tol:.0%} |"
          " worse by > {0:.0%} | feasible -> infeasible | infeasible -> feasible | worst ratio (log, budget) |"
          " victim search, s | evaluations |".format(tol))
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for f in args[1:]:
        runs = json.load(open(f))
        for h in dict.fromkeys(r["heuristic"] for r in runs):
            mine = [r for r in runs if r["heuristic"] == h]
            s = mine[0]["search"]
            n = within = better = worse = lost = gained = 0
            worst, where = 0.0, ""
            search_s = sum(r["search_ns"] for r in mine) / 1e9
            evals = sum(r["heuristic_evals"] for r in mine)
            base_s = sum(exh[(r["log"], h, r["ratio"])]["search_ns"] for r in mine) / 1e9
            base_evals = sum(exh[(r["log"], h, r["ratio"])]["heuristic_evals"] for r in mine)
            for r in mine:
                e = exh[(r["log"], h, r["ratio"])]
                n += 1
                if r["status"] == "ok" and e["status"] == "ok":
                    q = r["slowdown"] / e["slowdown"]
                    if q <= 1 + tol:
                        within += 1
                        better += q < 1 - tol
                    else:
                        worse += 1
                    if q > worst:
                        worst, where = q, f"{short(r['log'])} {r['ratio']:g}"
                elif r["status"] != "ok" and e["status"] != "ok":
                    within += 1
                elif r["status"] != "ok":
                    lost += 1
                else:
                    gained += 1
            rows.append((h, s))
            worst_text = f"{worst:.4f} ({where})" if worst > 1 else "1 (none worse)"
            print(f"| {h} | {s} | {n} | {within} | {better} | {worse} | {lost} | {gained} | {worst_text} |"
                  f" {search_s:.2f} (exhaustive {base_s:.2f}) | {evals:,} (exhaustive {base_evals:,}) |")


def speed(args):
    text = open(args[0]).read()
    ref = json.load(open(args[1]))
    times = {}
    for h, s in re.findall(r"run (\S+) \d+: .* in ([0-9.]+) s wall", text):
        times.setdefault(h, []).append(float(s))
    cpu = {}
    for h, u, s in re.findall(r"cpu (\S+) \d+: ([0-9.]+) s user ([0-9.]+) s sys", text):
        cpu.setdefault(h, []).append(float(u) + float(s))
    loads = re.findall(r"load average: ([0-9.]+)", text)
    print("| heuristic | our sweep, wall s (median of {n}; runs) | CPU s (median) | reference wall_s, summed |"
          " ratio (wall) | ratio (CPU) |".format(n=len(next(iter(times.values())))))
    print("|---|---|---|---|---|---|")
    for h, ts in times.items():
        ref_s = sum(r["wall_s"] for r in ref["runs"] if r["heuristic"] == REF_NAMES[h])
        med = statistics.median(ts)
        c = statistics.median(cpu[h]) if h in cpu else float("nan")
        print(f"| {h} | {med:.2f} ({', '.join(f'{t:.2f}' for t in ts)}) | {c:.2f} | {ref_s:,.1f} |"
              f" {ref_s / med:,.0f}x | {ref_s / c:,.0f}x |")
    print(f"\n1-minute load average before each run: {', '.join(loads)}")


def table(args):
    runs = json.load(open(args[0]))
    logs = list(dict.fromkeys(r["log"] for r in runs))
    hs = list(dict.fromkeys(r["heuristic"] for r in runs))
    ratios = sorted({r["ratio"] for r in runs}, reverse=True)
    print("| log | heuristic | " + " | ".join(f"{x:g}" for x in ratios) + " |")
    print("|---|---|" + "---|" * len(ratios))
    for log in logs:
        for h in hs:
            cells = []
            for x in ratios:
                r = next((r for r in runs if r["log"] == log and r["heuristic"] == h and r["ratio"] == x), None)
                cells.append("" if r is None else f"{r['slowdown']:.3f}" if r["status"] == "ok" else r["status"])
            name = log.removesuffix(".log")
            print(f"| {name} | {h} | " + " | ".join(cells) + " |")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"search": search, "speed": speed, "table": table}[cmd](args)


if __name__ == "__main__":
    main()
