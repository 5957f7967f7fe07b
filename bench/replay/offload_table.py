#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Tables for docs: replays without offload against offload at several bandwidths, from dtr-replay JSON.

usage: offload_table.py OFF.json LABEL=OFFLOAD.json... [--logs DIR] [--policy NAME] [--at 0.3]

Prints (1) per log and ratio the slowdown without offload and with each offload run; (2) per
log the floor (lowest ratio of the grid that finishes) of each, beside the largest operator's
share of the peak (read from the logs in DIR, default $DTR_SHARED/dtr-logs) and the issue's
target, max(0.1, 1.1 x that share); (3) the geometric-mean slowdown at --at over the logs
that finish there, with how many do; (4) what offload moved at --at."""
import argparse, json, math, os

def load(path, policy):
    with open(path) as f:
        rows = json.load(f)
    if policy:
        rows = [r for r in rows if r['heuristic'] == policy]
    return {(r['log'], r['ratio']): r for r in rows}

def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float('nan')

def short(log):
    return log.split('-')[0]

def largest_operator(path):
    """Bytes of the largest single operator's footprint: its distinct input storages plus its
    fresh outputs (and the new versions a MUTATE makes), over the measured iteration."""
    storage_of, size = {}, {}
    next_id = [0]
    def fresh(nbytes):
        next_id[0] += 1
        size[next_id[0]] = nbytes
        return next_id[0]
    started, best = False, 0
    with open(path) as f:
        lines = [json.loads(l) for l in f if l.strip()]
    i = 0
    while i < len(lines):
        r = lines[i]
        ins = r['INSTRUCTION']
        i += 1
        if ins == 'ANNOTATE':
            started = started or r['ANNOTATION'] == 'START'
            continue
        if not started:
            continue
        if ins == 'CONSTANT':
            m = lines[i]; i += 1
            storage_of[r['NAME']] = fresh(int(m['MEMORY']))
        elif ins == 'CALL':
            args = [storage_of[a] for a in r['ARGS']]
            total = sum(size[s] for s in set(args))
            for name in r['RESULT']:
                m, a = lines[i], lines[i + 1]; i += 2
                alias = int(a['ALIAS'])
                if alias < 0:
                    storage_of[name] = fresh(int(m['MEMORY']))
                    total += int(m['MEMORY'])
                else:
                    storage_of[name] = args[alias]
            best = max(best, total)
        elif ins == 'MUTATE':
            args = [storage_of[a] for a in r['ARGS']]
            total = sum(size[s] for s in set(args))
            for k in sorted({int(k) for k in r['MUTATE']}):
                old = args[k]
                total += size[old]
                storage_of[r['ARGS'][k]] = fresh(size[old])
            best = max(best, total)
        elif ins in ('COPY', 'COPY_FROM'):
            storage_of[r['DST']] = storage_of[r['SRC']]
    return best

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('off')
    ap.add_argument('runs', nargs='+', metavar='LABEL=FILE')
    ap.add_argument('--logs', default=os.path.join(os.environ.get('DTR_SHARED', '../shared'), 'dtr-logs'))
    ap.add_argument('--policy')
    ap.add_argument('--at', type=float, default=0.3)
    a = ap.parse_args()
    columns = [('no offload', load(a.off, a.policy))]
    for spec in a.runs:
        label, path = spec.split('=', 1)
        columns.append((label, load(path, a.policy)))
    keys = columns[0][1].keys()
    logs = sorted({k[0] for k in keys})
    ratios = sorted({k[1] for k in keys}, reverse=True)
    cell = lambda r: f"{r['slowdown']:.3f}" if r['status'] == 'ok' else r['status']

    print('Slowdown per ratio (' + ' \\| '.join(label for label, _ in columns) + ')\n')
    print('| log | ' + ' | '.join(f'{r}' for r in ratios) + ' |')
    print('|---|' + '---|' * len(ratios))
    for l in logs:
        print(f'| {short(l)} | ' + ' | '.join(' \\| '.join(cell(c[(l, r)]) if (l, r) in c else '-' for _, c in columns)
                                             for r in ratios) + ' |')

    print('\nFloor: the lowest ratio of the grid that finishes, and every ratio above it too '
          '(first failure from the top in brackets when lower ones finish again)\n')
    print('| log | largest operator / peak | target | ' + ' | '.join(label for label, _ in columns) + ' | target met |')
    print('|---|---|---|' + '---|' * len(columns) + '---|')
    for l in logs:
        peak = columns[0][1][(l, ratios[0])]['baseline_peak_bytes']
        path = os.path.join(a.logs, l)
        share = largest_operator(path) / peak if os.path.exists(path) else float('nan')
        target = max(0.1, 1.1 * share)
        floors = []
        for _, c in columns:
            ok = [r for r in ratios if (l, r) in c and c[(l, r)]['status'] == 'ok']
            contiguous = None
            for r in ratios:
                if (l, r) in c and c[(l, r)]['status'] == 'ok':
                    contiguous = r
                else:
                    break
            low = min(ok) if ok else None
            floors.append((contiguous, low))
        text = []
        for contiguous, low in floors:
            if contiguous is None:
                text.append('none')
            elif low != contiguous:
                text.append(f'{contiguous} ({low})')
            else:
                text.append(f'{contiguous}')
        met = floors[-1][0] is not None and floors[-1][0] <= target + 1e-9
        print(f'| {short(l)} | {share:.3f} | {target:.3f} | ' + ' | '.join(text) + f" | {'yes' if met else 'no'} |")

    print(f'\nGeometric-mean slowdown at {a.at} over the logs that finish there\n')
    print('| run | finished | geometric mean |')
    print('|---|---|---|')
    for label, c in columns:
        ok = [c[(l, a.at)]['slowdown'] for l in logs if (l, a.at) in c and c[(l, a.at)]['status'] == 'ok']
        print(f'| {label} | {len(ok)}/{len(logs)} | {geomean(ok):.3f} |')

    print(f'\nWhat offload moved at {a.at}\n')
    print('| log | run | offloads (clean) | constants | copy-backs | prefetches | GB out | GB back | stall / baseline |')
    print('|---|---|---|---|---|---|---|---|---|')
    for l in logs:
        for label, c in columns[1:]:
            r = c.get((l, a.at))
            if r is None or 'offloads' not in r:
                continue
            stall = r['transfer_stall_ns'] / r['baseline_compute_ns'] if r['baseline_compute_ns'] else 0
            print(f"| {short(l)} | {label} | {r['offloads']} ({r['offloads_clean']}) | {r['constant_offloads']} | "
                  f"{r['copy_backs']} | {r['prefetches']} | {r['bytes_offloaded'] / 1e9:.2f} | "
                  f"{r['bytes_copied_back'] / 1e9:.2f} | {stall:.3f} |")

if __name__ == '__main__':
    main()
