#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Regenerate the committed traces in bench/trace/traces/ and check them.
# Usage: bench/trace/record_all.sh [python]   (default: /usr/bin/python3, Debian's torch)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
py=${1:-/usr/bin/python3}
# one intra-op thread and the fastest of three runs per operator: steadier times on a shared machine
"$py" "$here/dtr_trace.py" --all --threads 1 --repeat 3 --out-dir "$here/traces"
"$py" "$here/check_log.py" --require-backward "$here"/traces/*.log
