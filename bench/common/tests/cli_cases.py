# SPDX-License-Identifier: Apache-2.0
"""The tools' command-line tests share this runner: each case is a command line, the exit
status it must end with, and a text its output must hold (stdout for status 0, stderr
otherwise). Imported by bench/*/tests/*_cli*.py, which add this folder to sys.path."""
import subprocess


def run_cases(program, cases, label=lambda args: ' '.join(args), also=None):
    """Runs every case, prints one line each and a last 'N passed, N failed' line.

    `label(args)` names a case in the report; `also(args)`, when given, is a further check
    for each run that ended with status 0 as expected. Returns the exit status: 1 if any
    case failed."""
    failures = 0
    for args, status, text in cases:
        r = subprocess.run([program, *args], capture_output=True, text=True)
        shown = r.stdout if status == 0 else r.stderr
        ok = r.returncode == status and text in shown
        if ok and status == 0 and also is not None:
            ok = also(args)
        print(f'{"ok" if ok else "FAILED"}: {label(args)}: exit {r.returncode} (expected {status})')
        if not ok:
            print(f'  expected {"stdout" if status == 0 else "stderr"} to contain: {text}')
            print('  stdout: ' + r.stdout[-1500:])
            print('  stderr: ' + r.stderr[-1500:])
        failures += not ok
    print(f'{len(cases) - failures} passed, {failures} failed')
    return 1 if failures else 0
