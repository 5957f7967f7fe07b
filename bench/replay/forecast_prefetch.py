#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The runtime's prefetch from the forecast against none and against the program's own hints.

usage: forecast_prefetch.py [--build DIR] [--shared DIR] [--out DIR] [--no-run]

Replays the eight paper logs (DTR_SHARED/dtr-logs) for three steps under the runtime's default
(its policy, release and restore) with a host tier (--offload auto, 5 us latency, 25 and
50 GB/s, copies ahead of eviction at age 32, as docs/results.md's offload grid), in four ways:

- none: no prefetch at all;
- hints: the program's hints read off the log (--prefetch 128: after each operator, the
  offloaded inputs of the next 128 records), what a framework that looks ahead itself gets;
- forecast N: no hints; the runtime prefetches what the next N calls of the step it recorded
  read, and the offloaded inputs of the recomputations those reads will run (--prefetch-ahead
  N, runtime_options::prefetch_ahead), from the second step on.

Cells are the steady state (steps 2 and 3 over two baseline steps). Writes
offload-<bw>-<way>.json under --out (default bench/replay/results/forecast-prefetch) and
prints the geometric means per ratio, then each log at 0.3 and 0.2 with the copy-backs
prefetched and the reads' wait for copy-backs (over the baseline compute of three steps).
"""
import argparse, json, os, subprocess, sys
from pathlib import Path

from default_table import geomean

HERE = Path(__file__).resolve().parent
RATIOS = [0.5, 0.3, 0.2, 0.15]
BANDWIDTHS = [50, 25]  # GB/s
WAYS = [('none', []), ('hints 128', ['--prefetch', '128']),
        ('forecast 32', ['--prefetch-ahead', '32']), ('forecast 64', ['--prefetch-ahead', '64'])]
COMMON = ['--heuristic', 'dtr_next_use', '--search', 'indexed', '--dealloc', 'keep-once-bound',
          '--restore-pins', 'yield', '--steps', '3', '--offload', 'auto',
          '--offload-latency', '5000', '--offload-ahead', '32', '--jobs', '1']


def file_name(bw, way):
    return f"offload-{bw}-{way.replace(' ', '')}.json"


def run(binary, logs, out):
    for bw in BANDWIDTHS:
        for way, flags in WAYS:
            cmd = [str(binary), *COMMON, '--offload-bandwidth', f'{bw}e9', *flags,
                   '--json', str(out / file_name(bw, way))]
            for r in RATIOS:
                cmd += ['--ratio', str(r)]
            subprocess.run(cmd + [str(p) for p in logs], check=True, stdout=subprocess.DEVNULL)


def short(log):
    return log.split('-')[0].replace('tv_', '')


def load(out, bw, way):
    path = out / file_name(bw, way)
    if not path.exists():
        sys.exit(f'forecast_prefetch.py: {path} not found: run without --no-run first')
    cells = {}
    for c in json.loads(path.read_text()):
        cells[(short(c['log']), float(c['ratio']))] = c
    return cells


def finished(c):
    return c is not None and c['status'] == 'ok' and c.get('steady_slowdown', 0) > 0


def header(lines, title, first_column):
    """A table's title and head: one column per way of prefetching."""
    lines.append(f'\n{title}\n')
    lines.append(f'| {first_column} | ' + ' | '.join(w for w, _ in WAYS) + ' |')
    lines.append('|---' * (len(WAYS) + 1) + '|')


def tables(out):
    lines = []
    for bw in BANDWIDTHS:
        data = {way: load(out, bw, way) for way, _ in WAYS}
        logs = sorted({log for (log, _) in data['none']})
        header(lines, f'{bw} GB/s: geometric mean of the steady state over the logs that '
               'finish (how many)', 'ratio')
        for r in RATIOS:
            row = []
            for way, _ in WAYS:
                v = [data[way][(log, r)]['steady_slowdown'] for log in logs
                     if finished(data[way].get((log, r)))]
                gm = geomean(v)
                row.append(f'{len(v)}/{len(logs)} ' + (f'{gm:.3f}' if gm is not None else '-'))
            lines.append(f'| {r} | ' + ' | '.join(row) + ' |')
        for r in (0.3, 0.2):
            header(lines, f'{bw} GB/s at {r}: steady slowdown, copy-backs prefetched (hints: '
                   "by the program's hints; forecast: by the runtime, after the slash those "
                   "that were inputs of recomputations), reads' wait for copy-backs over the "
                   'baseline of three steps', 'log')
            for log in logs:
                row = []
                for way, _ in WAYS:
                    c = data[way].get((log, r))
                    if not finished(c):
                        row.append(c['status'] if c else '-')
                        continue
                    wait = c.get('copy_back_stall_ns', 0) / (3 * c['baseline_compute_ns'])
                    n = (f"{c.get('forecast_prefetches', 0)}/"
                         f"{c.get('forecast_recompute_prefetches', 0)}"
                         if way.startswith('forecast') else c.get('prefetches', 0))
                    row.append(f"{c['steady_slowdown']:.3f} ({n}, {wait:.3f})")
                lines.append(f'| {log} | ' + ' | '.join(row) + ' |')
    return '\n'.join(lines) + '\n'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--build', default='build', help='meson build directory (default build)')
    ap.add_argument('--shared', default=os.environ.get('DTR_SHARED'),
                    help='the shared data (default $DTR_SHARED)')
    ap.add_argument('--out', default=str(HERE / 'results' / 'forecast-prefetch'))
    ap.add_argument('--no-run', action='store_true', help='tabulate the JSON already in --out')
    args = ap.parse_args()
    out = Path(args.out)
    if not args.no_run:
        if not args.shared:
            sys.exit('forecast_prefetch.py: the paper logs are in the shared data: set DTR_SHARED '
                     'or pass --shared DIR (or --no-run to tabulate --out)')
        logs = sorted((Path(args.shared) / 'dtr-logs').glob('*.log'))
        if not logs:
            sys.exit(f'forecast_prefetch.py: no *.log under {Path(args.shared) / "dtr-logs"}')
        binary = Path(args.build) / 'bench' / 'replay' / 'dtr-replay'
        if not binary.exists():
            sys.exit(f'forecast_prefetch.py: {binary} not found: build it first '
                     '(ninja -C BUILD bench/replay/dtr-replay) or pass --build')
        out.mkdir(parents=True, exist_ok=True)
        run(binary, logs, out)
    text = tables(out)
    print(text, end='')
    (out / 'tables.md').write_text(text)


if __name__ == '__main__':
    main()
