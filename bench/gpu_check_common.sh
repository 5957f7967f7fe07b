# SPDX-License-Identifier: Apache-2.0
# Sourced by gpu_check.sh and gpu_check_torch.sh: each step under a time limit, its verdict in
# the summary. Uses the caller's `start`, `summary` and `failed`.

elapsed() { echo $(($(date +%s) - start)); }

# run_step NAME LIMIT_SECONDS LOGFILE COMMAND...: runs COMMAND under a time limit, appends its
# output to LOGFILE (and to the main log), records the verdict. Never exits the script.
run_step() {
    local name=$1 limit=$2 file=$3
    shift 3
    local t0 rc=0
    t0=$(date +%s)
    echo
    echo "=== [$(elapsed)s] $name (limit ${limit}s): $*"
    timeout --kill-after=10 "$limit" "$@" > >(tee -a "$file") 2>&1 || rc=$?
    local verdict=PASS
    case $rc in
        0) ;;
        77) verdict="SKIP (exit 77: no usable device)"; failed=1 ;;
        124 | 137) verdict="TIMEOUT after ${limit}s"; failed=1 ;;
        *) verdict="FAIL (exit $rc)"; failed=1 ;;
    esac
    summary+=("$(printf '%-34s %-34s %4ss' "$name" "$verdict" $(($(date +%s) - t0)))")
    echo "=== $name: $verdict"
    return 0
}
