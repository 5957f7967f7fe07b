#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Release policies side by side: one Markdown table of dtr-replay cells per configuration.

usage: dealloc_table.py NAME=FILE.json... [--summary-only]

Each FILE is dtr-replay --json output of the same logs, policies and ratios under one
release configuration (e.g. eager=dealloc-eager.json keep-first=dealloc-keep-first.json).
Prints, per policy and ratio, the runs finished and the geometric-mean slowdown of those
runs under each configuration; then, unless --summary-only, every cell (slowdown, or why the
run stopped)."""
import json, sys

from default_table import geomean


def short(log):
    return log.split('-')[0].removesuffix('.log')


def load(path):
    return {(short(r['log']), r['heuristic'], r['ratio']): r for r in json.load(open(path))}


def main(argv):
    summary_only = '--summary-only' in argv
    configs = [a.split('=', 1) for a in argv if not a.startswith('--')]
    if not configs or any(len(c) != 2 for c in configs):
        sys.exit(__doc__)
    tables = [(name, load(path)) for name, path in configs]
    keys = set(tables[0][1])
    for name, t in tables[1:]:
        if set(t) != keys:
            sys.exit(f'dealloc_table.py: {name} holds other cells than {tables[0][0]}')
    policies = sorted({k[1] for k in keys})
    ratios = sorted({k[2] for k in keys}, reverse=True)
    logs = sorted({k[0] for k in keys})
    names = [n for n, _ in tables]
    print('| policy | ratio | ' + ' | '.join(names) + ' |')
    print('|---|---|' + '---|' * len(names))
    for h in policies:
        for ratio in ratios:
            cells = []
            for _, t in tables:
                ok = [t[(l, h, ratio)]['slowdown'] for l in logs if t[(l, h, ratio)]['status'] == 'ok']
                g = geomean(ok)
                cells.append(f'{len(ok)}/{len(logs)}' + (f' {g:.3f}' if g else ''))
            print(f'| {h} | {ratio:.2f} | ' + ' | '.join(cells) + ' |')
    if summary_only:
        return
    print()
    print('| log | policy | ratio | ' + ' | '.join(names) + ' |')
    print('|---|---|---|' + '---|' * len(names))
    for h in policies:
        for l in logs:
            for ratio in ratios:
                cells = []
                for _, t in tables:
                    r = t[(l, h, ratio)]
                    cells.append(f"{r['slowdown']:.3f}" if r['status'] == 'ok' else r['status'])
                print(f'| {l} | {h} | {ratio:.2f} | ' + ' | '.join(cells) + ' |')


if __name__ == '__main__':
    main(sys.argv[1:])
