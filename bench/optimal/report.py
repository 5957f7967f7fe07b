#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Markdown tables from dtr-optimal --json output (for docs/optimal.md and the README).

    python3 bench/optimal/report.py [--recomputed] bench/optimal/results/*.json

Per graph: one row per budget; cells are compute overhead relative to checkpoint-all, each from
a schedule that passed the checker ('-' = no plan of that strategy fits, '>=x' = LP lower bound,
otherwise the status); then the MILP's status, CPU seconds and gap, DTR's best heuristic and
its ratio to the MILP's cost (marked '*' where CBC did not prove optimality, so the ratio is to
the best schedule found, not to the optimum). --recomputed adds, for every budget where DTR
costs more than the MILP's schedule, the nodes each schedule recomputes with their cost and size
(the graph files must be where the JSON says).
"""
import json
import os
import sys
from collections import defaultdict

COLUMNS = [
    ("checkpoint_all", "ckpt-all"),
    ("chen_sqrtn_ap", "sqrtn AP"),
    ("chen_greedy_ap", "greedy AP"),
    ("chen_greedy_lin", "greedy lin"),
    ("dtr:dtr", "DTR h_DTR"),
    ("dtr:dtr_eqclass", "DTR eq"),
    ("dtr:dtr_local", "DTR local"),
    ("dtr:msps", "DTR MSPS"),
    ("dtr:lru", "DTR LRU"),
    ("dtr:largest", "DTR largest"),
    ("lp_bound", "LP bound"),
    ("lp_round_det", "LP det.rnd"),
    ("checkmate_milp", "MILP"),
]
DTR = [c for c, _ in COLUMNS if c.startswith("dtr:")]


def cell(r):
    if r is None:
        return ""
    if r["checked"]:
        return f"{r['overhead']:.4f}"
    if r["status"] == "bound" and r["bound_overhead"] is not None:
        return f"≥{r['bound_overhead']:.4f}"
    if r["status"] == "over_budget":
        return "–"
    return r["status"]


def recompute_detail(graph_file, row, names):
    """Recomputed nodes (cost, size) of the given strategies' schedules at one budget."""
    # The committed results name the graph as "$DTR_SHARED/checkmate-graphs/...".
    with open(os.path.expandvars(graph_file)) as fh:
        nodes = {n["id"]: n for n in json.load(fh)["nodes"]}
    out = []
    for name in names:
        r = row.get(name)
        if not r or not r["checked"]:
            continue
        parts, extra = [], 0.0
        for item in (r["recomputed"] or "").split():
            label, _, rest = item.partition("#")
            nid, _, times = rest.partition("x")
            k = int(times) if times else 1
            n = nodes[int(nid)]
            extra += k * n["cost_cpu"]
            parts.append(f"{label}{'×' + str(k) if k > 1 else ''} ({n['cost_cpu']:g}, {n['cost_ram'] / 1e9:.2f} GB)")
        out.append(f"  - {name}: +{extra:g} = {', '.join(parts) if parts else 'nothing'}")
    return out


def main(files):
    records = []
    for f in files:
        with open(f) as fh:
            records.extend(json.load(fh))
    graphs = defaultdict(lambda: defaultdict(dict))
    order = []
    for r in records:
        g = os.path.basename(r["graph"])
        if g not in order:
            order.append(g)
        graphs[g][r["budget_bytes"]][r["strategy"]] = r
    for g in order:
        budgets = graphs[g]
        any_r = next(iter(next(iter(budgets.values())).values()))
        print(f"#### {g} — {any_r['nodes']} nodes, checkpoint-all cost {any_r['checkpoint_all_cost']:.6g}, "
              f"peak {any_r['checkpoint_all_peak_bytes'] / 1e9:.3f} GB, LB {any_r['lb_bytes'] / 1e9:.3f} GB\n")
        head = ["budget GB", "frac"] + [h for _, h in COLUMNS] + ["MILP status, CPU s, gap", "best DTR", "best DTR / MILP"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for b in sorted(budgets):
            row = budgets[b]
            any_b = next(iter(row.values()))
            cells = [f"{b / 1e9:.3f}", f"{any_b['budget_fraction']:.3f}"]
            cells += [cell(row.get(c)) for c, _ in COLUMNS]
            m = row.get("checkmate_milp")
            if m:
                cpu = m["cpu_seconds"]
                st = f"{m['status']}, {cpu:.1f}"
                if m["status"] != "optimal":
                    if m["checked"] and m["gap"] is not None:
                        st += f", gap {100 * m['gap']:.2f}%"
                    elif m["bound_overhead"] is not None:
                        st += f", bound ≥{m['bound_overhead']:.4f}"
                cells.append(st)
            else:
                cells.append("")
            dtr = [(row[c]["cost"], c) for c in DTR if c in row and row[c]["checked"]]
            if dtr:
                best = min(x[0] for x in dtr)
                names = [c.split(":")[1] for cost, c in dtr if cost <= best * (1 + 1e-12)]
                cells.append(f"{best / any_b['checkpoint_all_cost']:.4f} ({', '.join(names) if len(names) < len(dtr) else 'all'})")
                if m and m["checked"]:
                    ratio = best / m["cost"]
                    cells.append(f"{ratio:.4f}" + ("" if m["status"] == "optimal" else "*"))
                else:
                    cells.append("no MILP schedule")
            else:
                cells += ["oom", ""]
            print("| " + " | ".join(cells) + " |")
        print()
        if DETAIL:
            for b in sorted(budgets):
                row = budgets[b]
                m = row.get("checkmate_milp")
                dtr = [(row[c]["cost"], c) for c in DTR if c in row and row[c]["checked"]]
                if not dtr or not m or not m["checked"] or min(dtr)[0] <= m["cost"] * (1 + 1e-9):
                    continue
                print(f"- budget {b / 1e9:.3f} GB: recomputation (cost, size)")
                graph_file = next(iter(row.values()))["graph"]
                for line in recompute_detail(graph_file, row, ["checkmate_milp"] + DTR):
                    print(line)
            print()


DETAIL = False

if __name__ == "__main__":
    args = sys.argv[1:]
    if "--recomputed" in args:
        DETAIL = True
        args.remove("--recomputed")
    if not args:
        sys.exit(__doc__)
    main(args)
