#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The TreeLSTM's interleaved overhead run under three glibc malloc settings, alternating:
# none, a larger per-thread cache (tcache_count=2000), and that with the heap kept (no trim,
# no mmap). Prints per run the plain and bridged median step CPU (ms) and the median ratio.
# Usage, from the repository root with dtr_torch importable: tcrun.sh ROUNDS [PYTHON]
set -euo pipefail
rounds=${1:?usage: tcrun.sh ROUNDS [PYTHON]}
py=${2:-python3}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for _ in $(seq "$rounds"); do
    for v in none tc tc_trim; do
        case $v in
            none) unset GLIBC_TUNABLES ;;
            tc) export GLIBC_TUNABLES=glibc.malloc.tcache_count=2000 ;;
            tc_trim) export GLIBC_TUNABLES=glibc.malloc.tcache_count=2000:glibc.malloc.trim_threshold=4000000000:glibc.malloc.mmap_threshold=4000000000 ;;
        esac
        "$py" examples/torch/overhead.py --model treelstm --batch 4 --pairs 8 >"$out" 2>&1
        "$py" - "$v" "$out" <<'PY'
import re, statistics, sys
text = open(sys.argv[2]).read()
plain = [float(x) for x in re.findall(r"plain \d+ ms \(CPU (\d+)\)", text)]
bridge = [float(x) for x in re.findall(r"bridge \d+ ms \(CPU (\d+)\)", text)]
ratio = re.search(r"median ratio [0-9.]+ \(CPU ([0-9.]+)\)", text)
if not (plain and bridge and ratio):
    sys.exit("tcrun.sh: overhead.py printed no pairs:\n" + text[-2000:])
print(sys.argv[1], "plain", statistics.median(plain), "bridge", statistics.median(bridge),
      "ratio", ratio.group(1))
PY
    done
done
