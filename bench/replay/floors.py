#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The lowest budget at which each log finishes, beside its physical floor.

usage: floors.py --replay DTR_REPLAY [--heuristic H] [--step S] [--config NAME=ARGS]... LOG...
                 [--json FILE]

For every log and configuration, replays the log at every ratio of a grid (S, 2S, ... 1.0 of
the unlimited peak) with one policy and reports the lowest ratio that finishes ("floor"), and
whether every ratio above it finishes too (a floor is not always monotone: a run can thrash
at one ratio and finish just below it). A configuration is a name and the extra dtr-replay
arguments it adds, e.g. --config hold='--restore-pins hold' --config yield='--restore-pins
yield'; by default the runtime's own settings ('default', no extra argument).

Physical floors, from the log alone (no policy can go below them):
- keep: (constants + the largest operator's non-constant inputs, outputs and new versions)
  / peak, for a runtime that keeps constants on the device;
- op: the largest operator's footprint including the constants it reads / peak, which is
  what is left with a second memory tier that constants may move to."""
import argparse, json, os, shlex, subprocess, sys, tempfile


def physical_floor(path):
    """(constants bytes, largest non-constant footprint, largest whole footprint) of a log."""
    storage_of, size_of, constant = {}, {}, set()
    next_id = 0
    pending = []  # results of the last CALL waiting for their MEMORY / ALIAS lines
    constants = 0
    worst_keep = worst_all = 0

    def fresh(name):
        nonlocal next_id
        storage_of[name] = next_id
        next_id += 1
        return storage_of[name]

    def account(args, extra):
        """Counts one operator reading `args` and making `extra` new bytes, after START."""
        nonlocal worst_keep, worst_all
        if not started:
            return
        seen = {storage_of[a] for a in args if a in storage_of}
        every = sum(size_of.get(s, 0) for s in seen) + extra
        nonconst = sum(size_of.get(s, 0) for s in seen if s not in constant) + extra
        worst_keep, worst_all = max(worst_keep, nonconst), max(worst_all, every)

    started = False
    call = None
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            kind = r['INSTRUCTION']
            if kind == 'ANNOTATE' and r.get('ANNOTATION') == 'START':
                started = True
                continue
            if kind == 'CONSTANT':
                s = fresh(r['NAME'])
                constant.add(s)
            elif kind == 'MEMORY':
                name, size = r['NAME'], int(r['MEMORY'])
                if name not in storage_of:
                    fresh(name)
                s = storage_of[name]
                if call is not None and pending and pending[0] == name:
                    call['sizes'].append(size)
                else:
                    size_of[s] = size
                    if s in constant:
                        constants += size
            elif kind == 'ALIAS':
                name = r['NAME']
                alias = int(r['ALIAS'])
                size = call['sizes'].pop() if call and call['sizes'] else 0
                if alias < 0:
                    s = fresh(name)
                    size_of[s] = size
                    call['out'] += size
                else:
                    storage_of[name] = storage_of.get(call['args'][alias], fresh(name))
                pending.pop(0)
                if not pending and call is not None:
                    account(call['args'], call['out'])
                    call = None
            elif kind == 'CALL':
                call = {'args': r['ARGS'], 'out': 0, 'sizes': []}
                pending = list(r['RESULT'])
                if not pending:
                    account(call['args'], 0)
                    call = None
            elif kind == 'MUTATE':
                args = r['ARGS']
                extra = sum(size_of.get(storage_of.get(args[int(i)]), 0) for i in r['MUTATE'])
                account(args, extra)
            elif kind in ('COPY', 'COPY_FROM'):
                if r['SRC'] in storage_of:
                    storage_of[r['DST']] = storage_of[r['SRC']]
    return constants, worst_keep, worst_all


def replay(binary, log, heuristic, ratios, extra):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, 'cells.json')
        cmd = [binary, '--heuristic', heuristic, '--json', out, '--jobs', '2', *extra]
        for r in ratios:
            cmd += ['--ratio', f'{r:g}']
        cmd += ['--', log]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('logs', nargs='+')
    ap.add_argument('--replay', required=True, help='the dtr-replay program')
    ap.add_argument('--heuristic', default='dtr_eqclass')
    ap.add_argument('--step', type=float, default=0.01)
    ap.add_argument('--config', action='append', default=[], metavar='NAME=ARGS')
    ap.add_argument('--json', help='write the table as JSON rows to FILE')
    a = ap.parse_args()
    configs = [c.split('=', 1) for c in a.config] or [['default', '']]
    steps = int(round(1 / a.step))
    ratios = [round(a.step * k, 6) for k in range(1, steps + 1)]
    rows = []
    head = '| log | keep floor | op floor | ' + ' | '.join(n for n, _ in configs) + ' |'
    print(f'policy {a.heuristic}; floor = lowest finishing ratio on a {a.step:g} grid '
          '(* when a ratio above it does not finish)\n')
    print(head)
    print('|---|---|---|' + '---|' * len(configs))
    for log in a.logs:
        constants, keep, whole = physical_floor(log)
        cells = []
        row = {'log': os.path.basename(log), 'heuristic': a.heuristic}
        peak = None
        for name, args in configs:
            runs = replay(a.replay, log, a.heuristic, ratios, shlex.split(args))
            peak = runs[0]['baseline_peak_bytes']
            ok = sorted(r['ratio'] for r in runs if r['status'] == 'ok')
            if not ok:
                cells.append('none')
                row[name] = None
                continue
            floor = ok[0]
            gaps = [r['ratio'] for r in runs if r['ratio'] > floor and r['status'] != 'ok']
            cells.append(f'{floor:g}' + ('*' if gaps else ''))
            row[name] = {'floor': floor, 'gaps': gaps}
        row['keep_floor'] = (constants + keep) / peak
        row['op_floor'] = whole / peak
        rows.append(row)
        print(f"| {row['log'].split('-')[0]} | {row['keep_floor']:.3f} | {row['op_floor']:.3f} | "
              + ' | '.join(cells) + ' |', flush=True)
    if a.json:
        with open(a.json, 'w') as f:
            json.dump(rows, f, indent=1)
            f.write('\n')


if __name__ == '__main__':
    sys.exit(main())
