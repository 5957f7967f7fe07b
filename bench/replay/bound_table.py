#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The paper logs' lower bounds beside what the runtime achieves.

usage: bound_table.py [--build DIR] [--shared DIR] [--out DIR] [--no-run]

Runs (unless --no-run) dtr-log-bound on the eight paper logs (DTR_SHARED/dtr-logs) at the
ratios of steps_table.py, writing --out/lower-bound-paper.json (default bench/replay/results),
and tabulates it to stdout beside the replays that steps_table.py wrote there:
steps-paper-3-indexed.json (the runtime's default, steady state of 3 steps) and
steps-paper-3.json / steps-paper-1.json (dtr_held_next_use over 3 steps, dtr_held over one).
A cell is "bound / achieved (achieved over bound)"; a run that did not finish shows its
status, a budget below the log's floor (no schedule exists) "below floor"."""
import argparse, json, math, os, subprocess, sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
RATIOS = [0.5, 0.3, 0.25, 0.2, 0.15]
# (label, file, heuristic as in the file, whether the cell is the 3-step steady state)
ACHIEVED = [('the default', 'steps-paper-3-indexed.json', 'dtr_next_use', True),
            ('dtr_held_next_use', 'steps-paper-3.json', 'dtr_held_next_use', True),
            ('dtr_held, 1 step', 'steps-paper-1.json', 'dtr_held', False)]


def short(name):
    return name.split('-')[0]


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def load_runs(out, file, heuristic, steady):
    path = out / file
    if not path.exists():
        return {}
    runs = {}
    for r in json.load(open(path)):
        if r['heuristic'] == heuristic:
            ok = r['status'] == 'ok'
            value = (r['steady_slowdown'] if steady else r['slowdown']) if ok else None
            runs[(Path(r['log']).name, r['ratio'])] = (value, r['status'])
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--build', type=Path, default=Path('build'), help='the meson build directory')
    ap.add_argument('--shared', type=Path, default=os.environ.get('DTR_SHARED'),
                    help='the shared data (default $DTR_SHARED)')
    ap.add_argument('--out', type=Path, default=BENCH / 'replay/results')
    ap.add_argument('--no-run', action='store_true', help='tabulate the JSON already in --out')
    a = ap.parse_args()
    bounds_file = a.out / 'lower-bound-paper.json'
    if not a.no_run:
        if a.shared is None or not (a.shared / 'dtr-logs').is_dir():
            sys.exit('bound_table.py: the paper logs are not found: pass --shared DIR or set '
                     'DTR_SHARED (DIR/dtr-logs)')
        logs = sorted(str(p) for p in (a.shared / 'dtr-logs').glob('*.log'))
        cmd = [str(a.build / 'bench/replay/dtr-log-bound'), '--json', str(bounds_file)]
        for r in RATIOS:
            cmd += ['--ratio', str(r)]
        print('$ ' + ' '.join(cmd + ['DTR_SHARED/dtr-logs/*.log']), file=sys.stderr, flush=True)
        subprocess.run(cmd + logs, check=True, stdout=subprocess.DEVNULL)
    bounds = {(c['log'], c['ratio']): c for c in json.load(open(bounds_file))}
    logs = sorted({log for log, _ in bounds})

    print('Floors (no schedule below them) and the bound on the slowdown:\n')
    print('| log | floor | ' + ' | '.join(str(r) for r in RATIOS) + ' |')
    print('|---|---|' + '---|' * len(RATIOS))
    for log in logs:
        c = bounds[(log, RATIOS[0])]
        cells = []
        for r in RATIOS:
            b = bounds[(log, r)]
            cells.append(f"{b['slowdown_bound']:.3f}" if b['feasible'] else 'below floor')
        floor = c['floor_bytes'] / c['baseline_peak_bytes']
        print(f'| {short(log)} | {floor:.3f} | ' + ' | '.join(cells) + ' |')

    for label, file, heuristic, steady in ACHIEVED:
        runs = load_runs(a.out, file, heuristic, steady)
        if not runs:
            continue
        print(f'\n{label} ({file}): bound / achieved (achieved over bound)\n')
        print('| log | ' + ' | '.join(str(r) for r in RATIOS) + ' |')
        print('|---|' + '---|' * len(RATIOS))
        for log in logs:
            cells = []
            for r in RATIOS:
                b = bounds[(log, r)]
                value, status = runs.get((log, r), (None, 'not run'))
                if not b['feasible']:
                    cells.append('below floor' + ('' if value is None else f' / {value:.3f} ?!'))
                elif value is None:
                    cells.append(f"{b['slowdown_bound']:.3f} / {status}")
                else:
                    bound = b['slowdown_bound']
                    cells.append(f'{bound:.3f} / {value:.3f} ({value / bound:.3f}x)')
            print(f'| {short(log)} | ' + ' | '.join(cells) + ' |')
        print('\n| ratio | bound, geometric mean (logs) | over the logs it finishes: '
              'bound / achieved |')
        print('|---|---|---|')
        for r in RATIOS:
            feasible = [bounds[(log, r)]['slowdown_bound'] for log in logs
                        if bounds[(log, r)]['feasible']]
            both = [(bounds[(log, r)]['slowdown_bound'], runs[(log, r)][0]) for log in logs
                    if bounds[(log, r)]['feasible'] and runs.get((log, r), (None,))[0]]
            line = f'| {r} | {geomean(feasible):.3f} ({len(feasible)}) | '
            if both:
                line += (f'{len(both)}: {geomean([b for b, _ in both]):.3f} / '
                         f'{geomean([v for _, v in both]):.3f}')
            print(line + ' |')


if __name__ == '__main__':
    main()
