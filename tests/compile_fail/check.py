#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compiles each snippet and checks that it fails with the message its `// expect:` line
names (or, for `// expect: compiles`, that it builds and runs). The errors a backend or
policy author meets are part of the library's interface.

usage: check.py INCLUDE_DIR SNIPPET.cpp... -- COMPILER [COMPILER_ARGS...]"""
import os, re, subprocess, sys, tempfile

def main(argv):
    if '--' not in argv or argv.index('--') < 3 or argv.index('--') == len(argv) - 1:
        print(__doc__)
        return 2
    i = argv.index('--')
    include, snippets, compiler = argv[1], argv[2:i], argv[i + 1:]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in snippets:
            with open(path) as f:
                m = re.search(r'^// expect: (.*)$', f.read(), re.M)
            if not m:
                print(f'{path}: no "// expect:" line')
                failures += 1
                continue
            expect = m.group(1).strip()
            exe = os.path.join(tmp, os.path.basename(path) + '.out')
            cmd = [*compiler, '-std=c++20', '-I', include, path, '-o', exe]
            r = subprocess.run(cmd, capture_output=True, text=True)
            name = os.path.basename(path)
            if expect == 'compiles':
                ok = r.returncode == 0 and subprocess.run([exe]).returncode == 0
                print(f'{name}: {"ok" if ok else "FAILED"} (expected to compile and run)')
                if not ok:
                    print(r.stderr[-3000:])
            else:
                ok = r.returncode != 0 and expect in r.stderr
                errors = [l for l in r.stderr.splitlines() if 'error' in l]
                print(f'{name}: {"ok" if ok else "FAILED"}: {errors[0] if errors else "compiled"}')
                if not ok:
                    print(f'  expected an error containing: {expect}')
                    print(r.stderr[-3000:])
            failures += not ok
    print(f'{len(snippets) - failures} passed, {failures} failed')
    return 1 if failures else 0

if __name__ == '__main__':
    sys.exit(main(sys.argv))
