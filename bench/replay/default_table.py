#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The table of docs/heuristics.md, "The default": floors and slowdowns per policy and log.

usage: default_table.py --floors FLOORS.json... --cells CELLS.json... [--policy NAME]...
                        [--config yield]

FLOORS.json: written by floors.py --json (one policy each); the floor is the one of --config.
CELLS.json: written by dtr-replay --json at some ratios (any policies). Prints one row per log:
for each of the floor and every ratio, a cell per policy (in --policy order), "A / B / C",
with the slowdown of a finished run or the status of one that did not finish ("thrash",
"oom"); then per ratio the runs finished and two geometric means of the slowdown: over each
policy's own finished runs, and over the logs that every policy finishes (the like-for-like
one); then the wall time of the replays per log and policy."""
import argparse, json, math


def short(log):
    return log.split('-')[0]


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--floors', action='append', default=[], required=True)
    ap.add_argument('--cells', action='append', default=[], required=True)
    ap.add_argument('--policy', action='append', help='policies, in column order')
    ap.add_argument('--config', default='yield', help='the floors.py configuration to show')
    a = ap.parse_args()
    floors, cells, logs = {}, {}, []
    for path in a.floors:
        with open(path) as f:
            for row in json.load(f):
                floors[(row['log'], row['heuristic'])] = row.get(a.config)
    for path in a.cells:
        with open(path) as f:
            for r in json.load(f):
                cells[(r['log'], r['heuristic'], r['ratio'])] = r
                if r['log'] not in logs:
                    logs.append(r['log'])
    policies = a.policy or sorted({k[1] for k in cells})
    ratios = sorted({k[2] for k in cells}, reverse=True)

    def floor_cell(log, p):
        fl = floors.get((log, p))
        if fl is None:
            return 'none' if (log, p) in floors else '-'
        return f"{fl['floor']:g}" + ('*' if fl['gaps'] else '')

    def run_cell(log, p, r):
        c = cells.get((log, p, r))
        if c is None:
            return '-'
        return f"{c['slowdown']:.3f}" if c['status'] == 'ok' else c['status']

    print('Cells: ' + ' / '.join(f'`{p}`' for p in policies) + f'; floor: floors.py, {a.config}, '
          '0.01 grid (* when a ratio above it does not finish); ratios: slowdown or status.\n')
    print('| log | floor | ' + ' | '.join(f'{r:g}' for r in ratios) + ' |')
    print('|---|---|' + '---|' * len(ratios))
    for log in logs:
        row = [' / '.join(floor_cell(log, p) for p in policies)]
        row += [' / '.join(run_cell(log, p, r) for p in policies) for r in ratios]
        print(f'| {short(log)} | ' + ' | '.join(row) + ' |')
    print('\nPer ratio: finished / logs, geometric mean over own finished runs, geometric mean '
          'over the logs all of them finish.\n')
    print('| policy | ' + ' | '.join(f'{r:g}' for r in ratios) + ' |')
    print('|---|' + '---|' * len(ratios))
    ok = {(l, p, r) for (l, p, r), c in cells.items() if c['status'] == 'ok'}
    for p in policies:
        out = []
        for r in ratios:
            own = [cells[(l, p, r)]['slowdown'] for l in logs if (l, p, r) in ok]
            common = [l for l in logs if all((l, q, r) in ok for q in policies)]
            g_own, g_common = geomean(own), geomean([cells[(l, p, r)]['slowdown'] for l in common])
            text = f'{len(own)}/{len(logs)}'
            text += f' {g_own:.3f}' if g_own else ''
            text += f' ({len(common)} common: {g_common:.3f})' if g_common else ''
            out.append(text)
        print(f'| `{p}` | ' + ' | '.join(out) + ' |')
    print('\nWall time of the replays, ms, summed over the ratios (victim search in brackets); '
          'single-core and machine-dependent, for the ratio between policies.\n')
    print('| log | ' + ' | '.join(f'`{p}`' for p in policies) + ' |')
    print('|---|' + '---|' * len(policies))
    total = {p: [0.0, 0.0] for p in policies}
    for log in logs + [None]:
        out = []
        for p in policies:
            if log is None:
                wall, search = total[p]
            else:
                runs = [cells[(log, p, r)] for r in ratios if (log, p, r) in cells]
                wall = sum(c['wall_ms'] for c in runs)
                search = sum(c['search_ns'] for c in runs) / 1e6
                total[p][0] += wall
                total[p][1] += search
            out.append(f'{wall:.0f} ({search:.0f})')
        print(f"| {short(log) if log else 'all'} | " + ' | '.join(out) + ' |')


if __name__ == '__main__':
    main()
