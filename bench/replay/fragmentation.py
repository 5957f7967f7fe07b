#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fragmentation-aware eviction, measured on the DTR paper's logs (issue 13, item 3).

usage: fragmentation.py [--bin build/bench/replay/dtr-replay] [--logs DIR] [--heuristic H]...
                        [--ratio R]... [--placement] [--reserve F,F,...] [--json OUT.json]
                        [--markdown OUT.md] [--jobs N]

Replays every log of DIR (default: $DTR_SHARED/dtr-logs, else ../shared/dtr-logs) with each
heuristic (default: dtr_local, the runtime's default policy) at each ratio (default 0.5, 0.3,
0.2) three ways, each a separate dtr-replay run:

  logical   the sim backend's endless address space (no fragmentation): the baseline;
  one_by_one  a simulated region of exactly the budget, laid out by dtr::arena (256-byte
            alignment, best fit) as on a device, with today's eviction on a refusal:
            evict in heuristic order and retry until a block appears;
  window    the same region with fragmentation-aware eviction: evict the cheapest window of
            adjacent blocks that frees a large enough block (runtime_options::fragmentation);

and with --placement also `window+high` (window, and constants placed at the top of the region).
For each cell it reports the status and slowdown, the allocations the budget allowed but the
region refused (fragmented), the backend's refusals (one per failed attempt), evictions beyond
the logical run's, and the region's peak bytes in live blocks against the budget. Prints a
table per heuristic and a summary, and writes every cell and the summary as JSON.

--reserve F,F,... (e.g. 1,1.05,1.1,1.25,1.5,2) also replays both arena modes with regions of F x
the budget (the budget itself unchanged) and reports, per cell the logical run finishes, the
smallest F at which it finishes: the memory that must be reserved for the budget's run to
survive fragmentation. At the largest F it also reports the region's peak against the budget.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys
import tempfile

MODES = [("logical", []), ("one_by_one", ["--arena", "--fragmentation", "one_by_one"]),
         ("window", ["--arena", "--fragmentation", "window"])]
PLACEMENT_MODE = ("window+high", ["--arena", "--fragmentation", "window", "--placement", "constants_high"])


def short(log):
    return log.split("-")[0].replace("tv_", "")


def run_mode(binary, extra, heuristics, ratios, logs, jobs):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cells.json")
        cmd = [binary, "--jobs", str(jobs), "--json", out] + extra
        for h in heuristics:
            cmd += ["--heuristic", h]
        for r in ratios:
            cmd += ["--ratio", f"{r:g}"]
        cmd += ["--"] + logs  # CLI11: a repeated option would take the logs as its values
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.exit(f"fragmentation.py: {' '.join(cmd[:8])} ... failed:\n{done.stderr}")
        with open(out) as f:
            return json.load(f)


def geomean(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/bench/replay/dtr-replay")
    ap.add_argument("--logs")
    ap.add_argument("--heuristic", action="append")
    ap.add_argument("--ratio", action="append", type=float)
    ap.add_argument("--placement", action="store_true", help="also window with constants at the top")
    ap.add_argument("--reserve", help="comma-separated region/budget factors, ascending")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    ap.add_argument("--jobs", type=int, default=1)
    a = ap.parse_args()
    logs_dir = a.logs
    if logs_dir is None:
        shared = os.environ.get("DTR_SHARED")
        logs_dir = os.path.join(shared, "dtr-logs") if shared else os.path.join("..", "shared", "dtr-logs")
    logs = sorted(glob.glob(os.path.join(logs_dir, "*.log")))
    if not logs:
        sys.exit(f"fragmentation.py: no *.log in {logs_dir} (give --logs DIR or set DTR_SHARED)")
    if not os.path.exists(a.bin):
        sys.exit(f"fragmentation.py: no dtr-replay at {a.bin} (build it, or give --bin)")
    heuristics = a.heuristic or ["dtr_local"]
    ratios = a.ratio or [0.5, 0.3, 0.2]
    modes = MODES + ([PLACEMENT_MODE] if a.placement else [])

    cells = {}  # (mode, log, heuristic, ratio) -> record
    for mode, extra in modes:
        for rec in run_mode(a.bin, extra, heuristics, ratios, logs, a.jobs):
            cells[(mode, rec["log"], rec["heuristic"], float(rec["ratio"]))] = rec
    names = [os.path.basename(l) for l in logs]

    rows, lines = [], []
    for h in heuristics:
        lines.append(f"\n{h}: status/slowdown per mode; frag = allocations refused for want of a "
                     "contiguous block; +ev = evictions beyond the logical run; peak = region peak / budget")
        head = f"{'log':<12} {'ratio':>5} | {'logical':>8} | {'one_by_one':>10} {'frag':>6} {'refus':>7} {'+ev':>7} {'peak':>6} | {'window':>8} {'frag':>6} {'refus':>7} {'+ev':>7} {'peak':>6}"
        if a.placement:
            head += f" | {'win+high':>8} {'frag':>6} {'+ev':>7}"
        lines.append(head)
        for n in names:
            for r in ratios:
                base = cells.get(("logical", n, h, r))
                if base is None:
                    continue
                row = {"log": n, "heuristic": h, "ratio": r, "budget_bytes": base["budget_bytes"]}

                def summary(mode):
                    c = cells[(mode, n, h, r)]
                    ok = c["status"] == "ok"
                    return {
                        "status": c["status"],
                        "slowdown": c["slowdown"] if ok else None,
                        "fragmented_allocations": c.get("fragmented_allocations", 0),
                        "refusals": c.get("backend_refusals", 0),
                        "window_evictions": c.get("window_evictions", 0),
                        "evictions": c["evictions"],
                        "extra_evictions": c["evictions"] - base["evictions"],
                        "remats": c["remats"],
                        "peak_resident_bytes": c["peak_bytes"],
                        "region_peak_bytes": c.get("region_peak_bytes", 0),
                        "region_peak_over_budget": c.get("region_peak_bytes", 0) / c["budget_bytes"],
                        "search_ns": c["search_ns"],
                        "wall_ms": c["wall_ms"],
                    }

                for mode, _ in modes:
                    row[mode] = summary(mode)
                rows.append(row)

                def st(m):
                    s = row[m]
                    return f"{s['slowdown']:.4f}" if s["status"] == "ok" else s["status"]

                o, w = row["one_by_one"], row["window"]
                line = (f"{short(n):<12} {r:>5.2f} | {st('logical'):>8} | {st('one_by_one'):>10} "
                        f"{o['fragmented_allocations']:>6} {o['refusals']:>7} {o['extra_evictions']:>7} "
                        f"{o['region_peak_over_budget']:>6.3f} | {st('window'):>8} {w['fragmented_allocations']:>6} "
                        f"{w['refusals']:>7} {w['extra_evictions']:>7} {w['region_peak_over_budget']:>6.3f}")
                if a.placement:
                    p = row["window+high"]
                    line += f" | {st('window+high'):>8} {p['fragmented_allocations']:>6} {p['extra_evictions']:>7}"
                lines.append(line)

    # Summary per heuristic and mode: cells finished, refusals, extra evictions, slowdown
    # over the cells every mode finished (so that the geometric means compare like with like).
    summary = []
    for h in heuristics:
        mine = [row for row in rows if row["heuristic"] == h]
        common = [row for row in mine if all(row[m]["status"] == "ok" for m, _ in modes)]
        for mode, _ in modes:
            s = [row[mode] for row in mine]
            summary.append({
                "heuristic": h, "mode": mode, "cells": len(s),
                "finished": sum(x["status"] == "ok" for x in s),
                "fragmented_allocations": sum(x["fragmented_allocations"] for x in s),
                "refusals": sum(x["refusals"] for x in s),
                "window_evictions": sum(x["window_evictions"] for x in s),
                "extra_evictions_on_common": sum(row[mode]["extra_evictions"] for row in common),
                "common_cells": len(common),
                "geomean_slowdown_on_common": geomean([row[mode]["slowdown"] for row in common]),
                "max_region_peak_over_budget": max((x["region_peak_over_budget"] for x in s), default=0),
                "search_ms_on_common": sum(row[mode]["search_ns"] for row in common) / 1e6,
            })
    lines.append("\nsummary (slowdown, extra evictions and search time over the cells every mode finished):")
    lines.append(f"{'heuristic':<12} {'mode':<12} {'finished':>9} {'frag':>8} {'refusals':>9} {'+evict':>9} {'geomean':>8} {'search ms':>10}")
    for s in summary:
        lines.append(f"{s['heuristic']:<12} {s['mode']:<12} {s['finished']:>4}/{s['cells']:<4} "
                     f"{s['fragmented_allocations']:>8} {s['refusals']:>9} {s['extra_evictions_on_common']:>9} "
                     f"{s['geomean_slowdown_on_common']:>8.4f} {s['search_ms_on_common']:>10.1f}")
    reserve = []
    if a.reserve:
        factors = sorted(float(x) for x in a.reserve.split(","))
        runs = {}
        for f in factors:
            for mode in ("one_by_one", "window"):
                for rec in run_mode(a.bin, ["--arena", "--arena-capacity", f"{f:g}", "--fragmentation", mode],
                                    heuristics, ratios, logs, a.jobs):
                    runs[(f, mode, rec["log"], rec["heuristic"], float(rec["ratio"]))] = rec
        lines.append(f"\nreserve: smallest region / budget among {a.reserve} at which the run finishes "
                     f"(cells the logical run finishes; '-' = none); peak = region peak / budget at {factors[-1]:g}")
        lines.append(f"{'heuristic':<12} {'log':<12} {'ratio':>5} | {'one_by_one':>10} {'window':>8} | {'peak':>6}")
        for h in heuristics:
            for n in names:
                for r in ratios:
                    if cells[("logical", n, h, r)]["status"] != "ok":
                        continue
                    entry = {"log": n, "heuristic": h, "ratio": r}
                    for mode in ("one_by_one", "window"):
                        ok = [f for f in factors if runs[(f, mode, n, h, r)]["status"] == "ok"]
                        entry[mode] = ok[0] if ok else None
                    top = runs[(factors[-1], "window", n, h, r)]
                    entry["region_peak_over_budget_at_largest"] = top.get("region_peak_bytes", 0) / top["budget_bytes"]
                    reserve.append(entry)
                    fmt = lambda v: "-" if v is None else f"{v:g}"
                    lines.append(f"{h:<12} {short(n):<12} {r:>5.2f} | {fmt(entry['one_by_one']):>10} "
                                 f"{fmt(entry['window']):>8} | {entry['region_peak_over_budget_at_largest']:>6.3f}")
        for h in heuristics:
            mine = [e for e in reserve if e["heuristic"] == h]
            for mode in ("one_by_one", "window"):
                counts = {f: sum(e[mode] == f for e in mine) for f in factors}
                summary.append({"heuristic": h, "mode": mode, "reserve_counts": {f"{f:g}": c for f, c in counts.items()},
                                "reserve_none": sum(e[mode] is None for e in mine), "reserve_cells": len(mine)})
                lines.append(f"{h:<12} {mode:<12} cells finishing at region/budget "
                             + ", ".join(f"{f:g}: {c}" for f, c in counts.items())
                             + f", none: {sum(e[mode] is None for e in mine)} (of {len(mine)})")
    text = "\n".join(lines)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"heuristics": heuristics, "ratios": ratios, "modes": [m for m, _ in modes],
                       "alignment": 256, "capacity": "budget", "cells": rows, "summary": summary,
                       "reserve_factors": a.reserve, "reserve": reserve}, f, indent=1)
            f.write("\n")
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write("```\n" + text.lstrip("\n") + "\n```\n")


if __name__ == "__main__":
    main()
