#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 33's targets, side by side: the runtime's default against the online policies.

usage: steps_table.py [--build DIR] [--shared DIR] [--out DIR] [--no-run] [--skip SECTION]...
                      [--milp-graph NAME]... [--milp-time-limit S]

Runs (unless --no-run) and tabulates three things, writing each tool's JSON under --out
(default bench/replay/results) and the tables to stdout and --out/steps.md:

1. replay: the eight paper logs (DTR_SHARED/dtr-logs) with dtr-replay under the runtime's
   default release and restore (--dealloc keep-once-bound --restore-pins yield), once for one
   step (dtr_eqclass, the old default, and dtr_held, the best single policy) and once for
   three steps (--steps 3, runtime::begin_step() before each; cells are then the steady
   state, steps 2 and 3 over two baseline steps) under dtr_eqclass and the step-aware
   dtr_next_use and dtr_held_next_use, and under the runtime's default, dtr_next_use through
   the indexed search (--search indexed). Files steps-paper-1.json, steps-paper-3.json,
   steps-paper-3-indexed.json. (dtr-optimal, section 2, runs the scan only: its dtr:default,
   the index included, gives the same cost in every cell of that sweep:
   bench/optimal/results/default-vs-scan.txt.)
2. optimal: Checkmate's graphs (DTR_SHARED/checkmate-graphs) with dtr-optimal, the DTR
   strategies over one iteration and over two (--iterations 2: the second iteration's
   schedule, checked), under the runtime's default release and restore, against the LP bound (solved here) and Checkmate's MILP: solved here
   for the --milp-graph graphs (default vgg16, about a second per budget), else read from the
   earlier sweep in bench/optimal/results/<graph>.json when it has the same budget. The VGG
   graphs at the 8 budgets of bench/optimal's sweep; the random layered graphs at the
   midpoint of [LB, checkpoint-all's peak]. Files steps-optimal-*.json.
3. overhead: bench/micro/overhead's rows (steps on and off, dtr_next_use). File
   steps-overhead.json.
4. loop: the committed recorded training loops (bench/trace/traces/*-s<N>.log, several
   steps each: dtr_trace.py --steps N) with dtr-replay under the same release and restore,
   dtr_eqclass against the step-aware policies; the runtime learns the step from the log's
   own steps, and a cell is the steady state (steps 2 and later over their logged compute).
   File steps-loop.json.

DTR_SHARED (or --shared) names the shared data (sections 1 and 2); the script stops with a
message without it unless both are skipped."""
import argparse, json, math, os, subprocess, sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent  # bench/

REPLAY_POLICIES_1 = ['dtr_eqclass', 'dtr_held']
REPLAY_POLICIES_3 = ['dtr_eqclass', 'dtr_next_use', 'dtr_held_next_use']
REPLAY_RATIOS = [0.5, 0.3, 0.25, 0.2, 0.15]
LOOP_RATIOS = [0.9, 0.8, 0.7, 0.6, 0.55]
# dtr-replay under the runtime's default release and restore, one replay at a time.
REPLAY_DEFAULTS = ['--dealloc', 'keep-once-bound', '--restore-pins', 'yield', '--jobs', '1']
# (configuration label, steps, policy): the table's column order.
# The runtime's default: dtr_next_use through the indexed search (dtr::runtime<Backend>).
DEFAULT_POLICY = 'indexed:dtr_next_use'
CONFIGS = [('dtr_eqclass, 1 step (the old default)', 1, 'dtr_eqclass'),
           ('dtr_held, 1 step', 1, 'dtr_held'),
           ('dtr_eqclass, 3 steps', 3, 'dtr_eqclass'),
           ('dtr_next_use, 3 steps', 3, 'dtr_next_use'),
           ('dtr_held_next_use, 3 steps', 3, 'dtr_held_next_use'),
           ('indexed:dtr_next_use, 3 steps (the default)', 3, DEFAULT_POLICY)]
DTR_STRATEGIES = ['dtr:dtr_eqclass', 'dtr:dtr_held', 'dtr:dtr_next_use', 'dtr:dtr_held_next_use']
# (strategy, iteration) divided by the MILP's best: the old default (online), the step-aware
# policies.
RATIOS = [('dtr:dtr_eqclass', '1st'), ('dtr:dtr_next_use', '2nd'), ('dtr:dtr_held_next_use', '2nd'),
          ('dtr:dtr_next_use', '4th')]
ORDINAL_INDEX = {'1st': 0, '2nd': 1, '4th': 2}  # into ITERATIONS
# graph file stem -> (--budgets, --budget-index or None): the VGG sweep's 8 budgets, the
# random graphs' midpoint (index 1 of 3 budgets: LB, midpoint, peak).
GRAPHS = {
    'vgg16_b256_train': (8, None),
    'vgg19_b256_train': (8, None),
    'vgg_unet_b32_train': (8, None),
    'random_layered_n100_w0.27_nlv0.75_ed0.2_scd0.14': (3, '1'),
    'random_layered_n250_w0.43_nlv0.75_ed0.2_scd0.14': (3, '1'),
}
# The iterations a graph's program runs: one (online), the second of two (the first with a
# forecast), the fourth of four (after the forecast guard has compared the two).
ITERATIONS = (1, 2, 4)
# The earlier sweeps of bench/optimal/results holding the MILP at the same budgets.
EARLIER_MILP = {
    'vgg16_b256_train': ['vgg16_b256_train.json'],
    'vgg19_b256_train': ['vgg19_b256_train.json'],
    'vgg_unet_b32_train': ['vgg_unet_b32_train.json'],
    'random_layered_n100_w0.27_nlv0.75_ed0.2_scd0.14': ['random_layered_n100_mid.json'],
    'random_layered_n250_w0.43_nlv0.75_ed0.2_scd0.14': [],
}


def short(name):
    return name.split('-')[0].split('_w0')[0].replace('_b256_train', '').replace('_b32_train', '')


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def run(cmd, **kw):
    print('$ ' + ' '.join(str(c) for c in cmd), file=sys.stderr, flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kw)


# ---- 1. replay ----------------------------------------------------------------------------

def run_replay(a, logs):
    binary = a.build / 'bench/replay/dtr-replay'
    common = list(REPLAY_DEFAULTS)
    for r in REPLAY_RATIOS:
        common += ['--ratio', r]
    for steps, policies in ((1, REPLAY_POLICIES_1), (3, REPLAY_POLICIES_3)):
        cmd = [binary] + sum((['--heuristic', p] for p in policies), []) + common
        cmd += ['--steps', steps, '--json', a.out / f'steps-paper-{steps}.json'] + logs
        run(cmd, stdout=subprocess.DEVNULL)
    search, heuristic = DEFAULT_POLICY.split(':')
    run([binary, '--heuristic', heuristic, '--search', search] + common +
        ['--steps', 3, '--json', a.out / 'steps-paper-3-indexed.json'] + logs,
        stdout=subprocess.DEVNULL)


def policy_name(row):
    """A replay's policy as the tables name it: the search strategy first unless the scan."""
    search = row.get('search', 'exhaustive')
    return row['heuristic'] if search == 'exhaustive' else f"{search}:{row['heuristic']}"


def replay_tables(a, md):
    cells, logs = {}, []
    files = [(1, 'steps-paper-1.json'), (3, 'steps-paper-3.json'), (3, 'steps-paper-3-indexed.json')]
    for steps, name in files:
        if not (a.out / name).exists():
            continue
        with open(a.out / name) as f:
            for r in json.load(f):
                r['heuristic'] = policy_name(r)
                key = (r['log'], steps, r['heuristic'], r['ratio'])
                r['cell'] = r['steady_slowdown'] if steps > 1 and r['status'] == 'ok' else r['slowdown']
                cells[key] = r
                if r['log'] not in logs:
                    logs.append(r['log'])
    configs = [c for c in CONFIGS if any((l, c[1], c[2], r) in cells
                                         for l in logs for r in REPLAY_RATIOS)]
    ratios = sorted({k[3] for k in cells}, reverse=True)
    md.append('Paper logs, default release and restore (`--dealloc keep-once-bound '
              '--restore-pins yield`); cells: ' + ' / '.join(f'`{c[0]}`' for c in configs) +
              '; a finished run\'s slowdown (3 steps: steps 2 and 3 over two baseline steps) '
              'or why it stopped.\n')
    md.append('| log | ' + ' | '.join(f'{r:g}' for r in ratios) + ' |')
    md.append('|---|' + '---|' * len(ratios))

    def cell(l, c, r):
        x = cells.get((l, c[1], c[2], r))
        if x is None:
            return '-'
        return f"{x['cell']:.3f}" if x['status'] == 'ok' else x['status']
    for l in logs:
        md.append(f'| {short(l)} | ' + ' | '.join(' / '.join(cell(l, c, r) for c in configs)
                                                 for r in ratios) + ' |')
    md.append('\nPer ratio: logs finished, geometric mean over the policy\'s own finished runs, '
              'and over the logs every configuration finishes (like for like).\n')
    md.append('| configuration | ' + ' | '.join(f'{r:g}' for r in ratios) + ' |')
    md.append('|---|' + '---|' * len(ratios))
    ok = {k for k, x in cells.items() if x['status'] == 'ok'}
    summary = {}
    for c in configs:
        out = []
        for r in ratios:
            own = [cells[(l, c[1], c[2], r)]['cell'] for l in logs if (l, c[1], c[2], r) in ok]
            common = [l for l in logs if all((l, d[1], d[2], r) in ok for d in configs)]
            g_own = geomean(own)
            g_common = geomean([cells[(l, c[1], c[2], r)]['cell'] for l in common])
            summary[(c[0], r)] = {'finished': len(own), 'logs': len(logs), 'geomean': g_own,
                                  'common': len(common), 'geomean_common': g_common}
            text = f'{len(own)}/{len(logs)}' + (f' {g_own:.3f}' if g_own else '')
            text += f' ({len(common)} common: {g_common:.3f})' if g_common else ''
            out.append(text)
        md.append(f'| `{c[0]}` | ' + ' | '.join(out) + ' |')
    md.append('\nWhere a 3-step run stopped (first step: the online policy, learning the step; '
              'later steps follow it):\n')
    stopped = [x for (l, s, h, r), x in cells.items() if s == 3 and x['status'] != 'ok']
    for x in sorted(stopped, key=lambda x: (x['log'], x['heuristic'], -x['ratio'])):
        md.append(f"- {short(x['log'])} `{x['heuristic']}` {x['ratio']:g}: {x['status']} in step "
                  f"{len(x['step_slowdowns'])} (steps' slowdowns {x['step_slowdowns']}, record "
                  f"{x['records_done']} of {x['records_total']})")
    return summary


# ---- 2. optimal ---------------------------------------------------------------------------

def run_optimal(a, graphs_dir):
    binary = (a.build / 'bench/optimal/dtr-optimal').resolve()
    for stem, (budgets, index) in GRAPHS.items():
        graph = graphs_dir / f'{stem}.json'
        if not graph.exists():
            print(f'steps_table.py: {graph} missing, skipped', file=sys.stderr)
            continue
        strategies = list(DTR_STRATEGIES) + ['lp_bound']
        if short(stem) in a.milp_graph:
            strategies.append('checkmate_milp')
        for iterations in ITERATIONS:
            # run from the shared data directory with the graph's relative path, so that the
            # JSON names the graph without this machine's absolute path
            cmd = [binary, graph.relative_to(graphs_dir.parent), '--budgets', budgets,
                   '--strategies', ','.join(strategies),
                   '--iterations', iterations, '--dealloc', 'keep-once-bound',
                   '--time-limit', a.milp_time_limit, '--cpu-time',
                   '--json', (a.out / f'steps-optimal-{short(stem)}-it{iterations}.json').resolve()]
            if index is not None:
                cmd += ['--budget-index', index]
            run(cmd, stdout=subprocess.DEVNULL, cwd=graphs_dir.parent)
            strategies = [s for s in strategies if s.startswith('dtr:')]  # the bounds once


def optimal_tables(a, md):
    md.append('Checkmate\'s graphs: the DTR strategies\' compute overhead (checked schedule, x '
              'checkpoint-all\'s cost) over one iteration / the second of two (`--iterations 2`) '
              '/ the fourth of four (the forecast guard\'s choice after comparing the two), '
              'beside the MILP (solved here where marked *, else bench/optimal/results) and the '
              'LP bound, under the runtime\'s default release and restore (`--dealloc '
              'keep-once-bound`, yield); the last columns divide the old default (`dtr_eqclass`, '
              'one iteration) and the step-aware policies\' second (and fourth) iteration by the MILP\'s best '
              '(by the LP bound where the MILP has none, marked LB).\n')
    md.append('| graph | budget fraction | ' + ' | '.join(f'`{s[4:]}`' for s in DTR_STRATEGIES) +
              ' | MILP | LP bound | ' + ' | '.join(f'`{s[4:]}` {i} / MILP' for s, i in RATIOS) +
              ' |')
    md.append('|---|---|' + '---|' * (len(DTR_STRATEGIES) + 2 + len(RATIOS)))
    rows_out = []
    for stem in GRAPHS:
        files = [a.out / f'steps-optimal-{short(stem)}-it{i}.json' for i in ITERATIONS]
        if not all(f.exists() for f in files):
            continue
        runs = [json.load(open(f)) for f in files]
        earlier = {}
        for name in EARLIER_MILP[stem]:
            path = BENCH / 'optimal/results' / name
            if path.exists():
                for r in json.load(open(path)):
                    if r['strategy'] == 'checkmate_milp':
                        earlier[r['budget_bytes']] = r
        budgets = sorted({r['budget_bytes'] for r in runs[0]})
        for b in budgets:
            at = [{r['strategy']: r for r in rs if r['budget_bytes'] == b} for rs in runs]
            frac = next(iter(at[0].values()))['budget_fraction']

            def over(r):
                return r['overhead'] if r and r['status'] in ('ok', 'optimal', 'feasible') and \
                    r.get('checked') else None

            def dcell(s):
                v = [over(at[i].get(s)) for i in range(len(ITERATIONS))]
                st = [(at[i].get(s) or {}).get('status', '-') for i in range(len(ITERATIONS))]
                return ' / '.join(f'{x:.4f}' if x else st[i] for i, x in enumerate(v))
            milp = at[0].get('checkmate_milp')
            mark = '*'
            if milp is None:
                milp, mark = earlier.get(b), ''
            milp_v = over(milp)
            milp_text = (f"{milp_v:.4f} ({milp['status']}){mark}" if milp_v else
                         (f"{milp['status']}{mark}" if milp else 'not run'))
            lp = at[0].get('lp_bound')
            lp_v = lp.get('bound_overhead') if lp else None
            ref, ref_name = (milp_v, 'MILP') if milp_v else (lp_v, 'LB')

            def ratio(s, i):
                x = over(at[ORDINAL_INDEX[i]].get(s))
                if not (x and ref):
                    return '-'
                return f'{x / ref:.4f}' + ('' if ref_name == 'MILP' else ' (LB)')
            md.append(f'| {short(stem)} | {frac:.3f} | ' +
                      ' | '.join(dcell(s) for s in DTR_STRATEGIES) +
                      f" | {milp_text} | {'≥%.4f' % lp_v if lp_v else '-'} | " +
                      ' | '.join(ratio(s, i) for s, i in RATIOS) + ' |')
            rows_out.append({'graph': stem, 'budget_bytes': b, 'budget_fraction': frac,
                             'milp': milp_v, 'lp_bound': lp_v,
                             **{f'{s}@{it}': over(at[i].get(s)) for s in DTR_STRATEGIES
                                for i, it in enumerate(ITERATIONS)}})
    return rows_out


# ---- 3. overhead --------------------------------------------------------------------------

def overhead_table(a, md):
    rows = json.load(open(a.out / 'steps-overhead.json'))
    md.append('Per-call overhead (bench/micro/overhead, median ns per call minus the bare '
              'operator body; the step tracker is on unless "steps off"):\n')
    md.append('| scenario | heuristic | cost | call ns | overhead ns |')
    md.append('|---|---|---|---|---|')
    for r in rows:
        md.append(f"| {r['scenario']} | {r['heuristic']} | {r['cost']} | {r['call_ns']:.1f} | "
                  f"{r['overhead_ns']:.1f} |")
    return rows


# ---- 4. loop (recorded training loops) ----------------------------------------------------

def loop_logs():
    return sorted(str(p) for p in (BENCH / 'trace/traces').glob('*-s[0-9]*.log'))


def run_loop(a):
    cmd = [a.build / 'bench/replay/dtr-replay'] + sum((['--heuristic', p] for p in REPLAY_POLICIES_3), [])
    cmd += REPLAY_DEFAULTS + sum((['--ratio', r] for r in LOOP_RATIOS), [])
    run(cmd + ['--json', a.out / 'steps-loop.json'] + loop_logs(), stdout=subprocess.DEVNULL)


def loop_table(a, md):
    with open(a.out / 'steps-loop.json') as f:
        rows = json.load(f)
    md.append('Recorded training loops (bench/trace/traces, `dtr_trace.py --steps N`), default '
              'release and restore; cells: the steady state (steps 2 and later over their logged '
              'compute), or why the run stopped and in which step.\n')
    summary = {}
    for log in sorted({r['log'] for r in rows}):
        md.append(f'`{log}`:\n')
        md.append('| policy | ' + ' | '.join(f'{x:g}' for x in LOOP_RATIOS) + ' |')
        md.append('|---|' + '---|' * len(LOOP_RATIOS))
        for p in REPLAY_POLICIES_3:
            cells = []
            for x in LOOP_RATIOS:
                r = next((r for r in rows if r['log'] == log and r['heuristic'] == p and
                          r['ratio'] == x), None)
                if r is None:
                    cells.append('-')
                elif r['status'] == 'ok':
                    cells.append(f"{r['steady_slowdown']:.3f}")
                    summary[f'{log} {p}@{x:g}'] = r['steady_slowdown']
                else:
                    cells.append(f"{r['status']} (step {len(r.get('step_slowdowns', [])) or 1})")
            md.append(f'| `{p}` | ' + ' | '.join(cells) + ' |')
        md.append('')
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--build', type=Path, default=Path('build'), help='the meson build directory')
    ap.add_argument('--shared', type=Path, default=os.environ.get('DTR_SHARED'),
                    help='the shared data (default: $DTR_SHARED)')
    ap.add_argument('--out', type=Path, default=BENCH / 'replay/results')
    ap.add_argument('--no-run', action='store_true', help='tabulate the JSON already in --out')
    ap.add_argument('--skip', action='append', default=[],
                    choices=['replay', 'optimal', 'overhead', 'loop'], help='a section not to run')
    ap.add_argument('--milp-graph', action='append', default=None,
                    help='graphs whose MILP is solved here (short names; default vgg16)')
    ap.add_argument('--milp-time-limit', type=float, default=120, help='CPU s per MILP solve')
    a = ap.parse_args()
    a.milp_graph = a.milp_graph or ['vgg16']
    a.out.mkdir(parents=True, exist_ok=True)
    if not a.no_run:
        needs_shared = 'replay' not in a.skip or 'optimal' not in a.skip
        if needs_shared and (a.shared is None or not Path(a.shared).is_dir()):
            sys.exit('steps_table.py: no shared data: pass --shared DIR or set DTR_SHARED '
                     '(or --skip replay --skip optimal)')
        shared = Path(a.shared) if needs_shared else None
        needed = {'replay': 'bench/replay/dtr-replay', 'optimal': 'bench/optimal/dtr-optimal',
                  'overhead': 'bench/micro/overhead', 'loop': 'bench/replay/dtr-replay'}
        for section, binary in needed.items():
            if section not in a.skip and not (a.build / binary).is_file():
                sys.exit(f'steps_table.py: {a.build / binary} not built (ninja -C {a.build} '
                         f'{binary}), or pass --skip {section}')
        if 'replay' not in a.skip:
            logs = sorted(str(p) for p in (shared / 'dtr-logs').glob('*.log'))
            if not logs:
                sys.exit(f'steps_table.py: no logs in {shared / "dtr-logs"}')
            run_replay(a, logs)
        if 'optimal' not in a.skip:
            run_optimal(a, shared / 'checkmate-graphs')
        if 'overhead' not in a.skip:
            run([a.build / 'bench/micro/overhead', '--json', a.out / 'steps-overhead.json'],
                stdout=subprocess.DEVNULL)
        if 'loop' not in a.skip:
            run_loop(a)
    md, summary = ['# Steps (issue 33): the runtime\'s default against the online policies\n'], {}
    if (a.out / 'steps-paper-1.json').exists() and (a.out / 'steps-paper-3.json').exists():
        md.append('## Paper logs\n')
        summary['replay'] = {f'{c}@{r:g}': v for (c, r), v in replay_tables(a, md).items()}
    if any(a.out.glob('steps-optimal-*-it2.json')):
        md.append('\n## Checkmate graphs\n')
        summary['optimal'] = optimal_tables(a, md)
    if (a.out / 'steps-overhead.json').exists():
        md.append('\n## Per-call overhead\n')
        summary['overhead'] = overhead_table(a, md)
    if (a.out / 'steps-loop.json').exists():
        md.append('\n## Recorded training loops\n')
        summary['loop'] = loop_table(a, md)
    text = '\n'.join(md) + '\n'
    (a.out / 'steps.md').write_text(text)
    with open(a.out / 'steps-summary.json', 'w') as f:
        json.dump(summary, f, indent=1)
    print(text)


if __name__ == '__main__':
    main()
