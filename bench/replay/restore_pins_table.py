#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Tables for docs: restore_pins hold against yield_when_full, from dtr-replay JSON.

usage: restore_pins_table.py HOLD.json YIELD.json [--policy NAME]

Prints (1) per policy and ratio, runs finished and the geometric-mean slowdown of the
finished ones under each mode, and (2) for every run that ran out of memory under hold, the
bytes pinned when it failed (from the out_of_memory text) and what yield made of it."""
import argparse, collections, json, math, re

def load(path):
    with open(path) as f:
        return {(r['log'], r['heuristic'], r['ratio']): r for r in json.load(f)}

def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float('nan')

def short(log):
    return log.split('-')[0]

def pinned(error):
    m = re.search(r'pinned: (\d+)', error or '')
    return int(m.group(1)) if m else None

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('hold')
    ap.add_argument('yield_', metavar='yield')
    ap.add_argument('--policy', action='append', help='only these policies in table 2')
    a = ap.parse_args()
    hold, yld = load(a.hold), load(a.yield_)
    if hold.keys() != yld.keys():
        raise SystemExit('the two files do not hold the same runs')
    logs = sorted({k[0] for k in hold})
    policies = sorted({k[1] for k in hold})
    ratios = sorted({k[2] for k in hold}, reverse=True)
    print(f'{len(logs)} logs. Cells: finished / logs, geometric-mean slowdown of the finished runs (hold | yield)\n')
    print('| policy | ' + ' | '.join(f'{r}' for r in ratios) + ' |')
    print('|---|' + '---|' * len(ratios))
    for p in policies:
        cells = []
        for r in ratios:
            parts = []
            for runs in (hold, yld):
                ok = [runs[(l, p, r)]['slowdown'] for l in logs if runs[(l, p, r)]['status'] == 'ok']
                parts.append(f'{len(ok)}/{len(logs)} {geomean(ok):.3f}' if ok else f'0/{len(logs)}')
            cells.append(' \\| '.join(parts))
        print(f'| {p} | ' + ' | '.join(cells) + ' |')
    same = sum(1 for k in hold if hold[k]['status'] == 'ok' and yld[k]['status'] == 'ok'
               and hold[k]['slowdown'] == yld[k]['slowdown'])
    finished = sum(1 for k in hold if hold[k]['status'] == 'ok')
    print(f'\nRuns finished under hold: {finished}; identical slowdown under yield: {same}.')
    print('Statuses (hold -> yield):', dict(collections.Counter(
        (hold[k]['status'], yld[k]['status']) for k in hold)))
    print('\n| log | policy | ratio | pinned at the hold OOM (MB) | budget (MB) | under yield |')
    print('|---|---|---|---|---|---|')
    for k in sorted(hold):
        if a.policy and k[1] not in a.policy:
            continue
        h, y = hold[k], yld[k]
        if h['status'] != 'oom':
            continue
        p = pinned(h.get('error'))
        after = y['status'] if y['status'] != 'ok' else f"ok, {y['slowdown']:.3f}"
        if y['status'] == 'oom' and pinned(y.get('error')) is not None:
            after += f", {pinned(y['error']) / 1e6:.1f} MB pinned"
        print(f"| {short(k[0])} | {k[1]} | {k[2]} | {p / 1e6 if p is not None else float('nan'):.1f} | "
              f"{h['budget_bytes'] / 1e6:.1f} | {after} |")

if __name__ == '__main__':
    main()
