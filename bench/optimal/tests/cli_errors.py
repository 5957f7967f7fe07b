#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""dtr-optimal's answers to bad command lines: exit status 2 and a message naming the
argument, or 1 and a message naming the graph when nothing asked for applies to it; never a
crash. The control runs a valid command line to the end, so that the refusals cannot pass
because the program fails anyway.

usage: cli_errors.py DTR_OPTIMAL"""
import json, os, sys, tempfile

# The runner the tools' command-line tests share (bench/common/tests/cli_cases.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'common',
                                'tests'))
from cli_cases import run_cases  # noqa: E402

# A three-node training graph (Checkmate's model schema) and a forward-only one.
TRAINING = {
    "directed": True, "graph": {"name": "tiny"},
    "nodes": [
        {"name": "conv", "backward": False, "cost_cpu": 5, "cost_ram": 100, "id": 0},
        {"name": "loss", "backward": True, "cost_cpu": 1.5, "cost_ram": 4, "id": 1},
        {"name": "conv_backward", "backward": True, "cost_cpu": 7, "cost_ram": 100, "id": 2}],
    "links": [{"source": 0, "target": 1}, {"source": 1, "target": 2},
              {"source": 0, "target": 2}],
}
FORWARD = {
    "directed": True, "graph": {"name": "forward"},
    "nodes": [
        {"name": "a", "backward": False, "cost_cpu": 1, "cost_ram": 8, "id": 0},
        {"name": "b", "backward": False, "cost_cpu": 1, "cost_ram": 8, "id": 1}],
    "links": [{"source": 0, "target": 1}],
}


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    program = argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        training = os.path.join(tmp, 'tiny.json')
        forward = os.path.join(tmp, 'forward.json')
        for path, graph in ((training, TRAINING), (forward, FORWARD)):
            with open(path, 'w') as f:
                json.dump(graph, f)
        cases = [
            # (arguments, expected exit status, text expected on stderr, or on stdout for 0)
            ([training, '--budgets', '2', '--strategies', 'checkpoint_all,dtr:lru'], 0,
             'checkpoint_all'),
            ([training, '--strategies', ''], 2, 'an empty strategy name'),
            ([training, '--strategies', ','], 2, '--strategies'),
            ([training, '--strategies', 'nosuch'], 2, "no strategy named 'nosuch'"),
            ([training, '--strategies', 'dtr:nosuch'], 2, "no strategy named 'dtr:nosuch'"),
            ([training, '--budgets', '2', '--budget-index', ''], 2, '--budget-index'),
            ([training, '--budgets', '2', '--budget-index', '2'], 2,
             '--budget-index: 2 is not a budget of the sweep'),
            ([training, '--budgets', '2', '--budget-index', '-1'], 2, '--budget-index'),
            ([forward, '--budgets', '2', '--strategies', 'chen_sqrtn_ap'], 1,
             'none of the strategies asked for'),
        ]
        return run_cases(program, cases,
                         label=lambda args: ' '.join(repr(a) if a == '' else a for a in args[1:]))

if __name__ == '__main__':
    sys.exit(main(sys.argv))
