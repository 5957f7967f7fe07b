#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that every C++ and CUDA source of the project is formatted as .clang-format says.

Usage: check_format.py CLANG_FORMAT SOURCE_ROOT

Walks include/, examples/, tests/ and bench/ under SOURCE_ROOT (not git, so that a tarball
is checked the same way) and runs `CLANG_FORMAT --dry-run --Werror` on each file. Prints every
file that would change, with clang-format's first complaint, and the command that fixes them.
Exit status: 0 when all are formatted, 1 otherwise, 77 (skipped) when CLANG_FORMAT is not
major version 14: the house style is what Debian 12's clang-format writes, and other versions
break lines differently.
"""
import os
import re
import subprocess
import sys

SUFFIXES = (".hpp", ".cpp", ".h", ".cu", ".cuh")
FOLDERS = ("include", "examples", "tests", "bench")
HOUSE_MAJOR = 14


def sources(root):
    for folder in FOLDERS:
        for parent, dirs, files in os.walk(os.path.join(root, folder)):
            # Build trees a user configured inside the source tree are not sources.
            dirs[:] = sorted(d for d in dirs if not d.startswith(("build", ".")))
            for name in sorted(files):
                if name.endswith(SUFFIXES):
                    yield os.path.join(parent, name)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: check_format.py CLANG_FORMAT SOURCE_ROOT")
    clang_format, root = sys.argv[1], sys.argv[2]
    version = subprocess.run([clang_format, "--version"], capture_output=True, text=True).stdout
    major = re.search(r"version (\d+)", version)
    if not major or int(major.group(1)) != HOUSE_MAJOR:
        print(f"skipped: {clang_format} is {version.strip() or 'of unknown version'}; "
              f"the house style is checked with clang-format {HOUSE_MAJOR}")
        return 77
    checked, unformatted = 0, []
    for path in sources(root):
        checked += 1
        result = subprocess.run([clang_format, "--dry-run", "--Werror", path],
                                capture_output=True, text=True, cwd=root)
        if result.returncode != 0:
            first = next((l for l in result.stderr.splitlines() if "error" in l), "")
            unformatted.append((os.path.relpath(path, root), first))
    for path, complaint in unformatted:
        print(f"not formatted: {path}\n    {complaint}")
    print(f"{checked} files checked, {len(unformatted)} not formatted")
    if unformatted:
        print("fix with: clang-format -i " + " ".join(p for p, _ in unformatted))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
