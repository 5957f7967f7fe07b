#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""dtr-log-bound's answers to bad command lines and logs: exit status 2 and a message naming
the argument, or 1 and a message naming the log; never a crash. The control runs a valid
command line to the end (its JSON included), so that the refusals cannot pass because the
program fails anyway.

usage: log_bound_cli.py DTR_LOG_BOUND"""
import json, os, sys, tempfile

# The runner the tools' command-line tests share (bench/common/tests/cli_cases.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'common',
                                'tests'))
from cli_cases import run_cases  # noqa: E402

# w (constant); a = f(w); b = g(a); c = h(b, a): a is kept through g or recomputed.
ONE_STEP = '\n'.join(json.dumps(line) for line in [
    {"INSTRUCTION": "ANNOTATE", "ANNOTATION": "START"},
    {"INSTRUCTION": "CONSTANT", "NAME": "w"},
    {"INSTRUCTION": "MEMORY", "NAME": "w", "MEMORY": "100"},
    {"INSTRUCTION": "CALL", "NAME": "f", "ARGS": ["w"], "RESULT": ["a"], "TIME": "10"},
    {"INSTRUCTION": "MEMORY", "NAME": "a", "MEMORY": "100"},
    {"INSTRUCTION": "ALIAS", "NAME": "a", "ALIAS": "-1"},
    {"INSTRUCTION": "CALL", "NAME": "g", "ARGS": ["a"], "RESULT": ["b"], "TIME": "10"},
    {"INSTRUCTION": "MEMORY", "NAME": "b", "MEMORY": "100"},
    {"INSTRUCTION": "ALIAS", "NAME": "b", "ALIAS": "-1"},
    {"INSTRUCTION": "CALL", "NAME": "h", "ARGS": ["b"], "RESULT": ["c"], "TIME": "10"},
    {"INSTRUCTION": "MEMORY", "NAME": "c", "MEMORY": "100"},
    {"INSTRUCTION": "ALIAS", "NAME": "c", "ALIAS": "-1"},
]) + '\n'
TWO_STEPS = ONE_STEP + json.dumps({"INSTRUCTION": "ANNOTATE", "ANNOTATION": "STEP"}) + '\n'


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    program = argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        one, two, bad = (os.path.join(tmp, n) for n in ('one.log', 'two.log', 'bad.log'))
        out = os.path.join(tmp, 'out.json')
        for path, text in ((one, ONE_STEP), (two, TWO_STEPS), (bad, '{"INSTRUCTION": 3}\n')):
            with open(path, 'w') as f:
                f.write(text)
        cases = [
            # (arguments, expected exit status, text expected on stderr, or on stdout for 0)
            ([one, '--ratio', '1', '--ratio', '0.5', '--json', out], 0, 'below floor'),
            ([one, '--ratio', 'x'], 2, "--ratio: must be a positive number, not 'x'"),
            ([one, '--ratio', '-0.5'], 2, '--ratio'),
            ([one, '--time-limit', '0'], 2, '--time-limit'),
            ([one, '--nosuch'], 2, '--nosuch'),
            ([os.path.join(tmp, 'missing.log')], 2, 'missing.log'),
            ([two], 1, 'records 2 training steps'),
            ([bad], 1, 'bad.log:1:'),
        ]
        # The control's JSON: both cells, the one below the floor marked.
        def control_json(args):
            return [c['feasible'] for c in json.load(open(out))] == [True, False]

        return run_cases(program, cases,
                         label=lambda args: ' '.join(os.path.basename(a) for a in args),
                         also=control_json)


if __name__ == '__main__':
    sys.exit(main(sys.argv))
