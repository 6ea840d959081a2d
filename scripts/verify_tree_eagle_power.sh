#!/usr/bin/env bash
# The power of the tree gate's EAGLE slot (issue 43): the quick gate's statistics stage on the
# large-vocabulary hostile verifiers of tests/candidates/eagle_large_vocab.py and the built-in
# target_only (the control), plan seeds SEEDS, DEVICE (cpu or cuda), in JOBS processes of one
# thread each. Usage: scripts/verify_tree_eagle_power.sh OUTDIR [SEEDS] [DEVICE] [JOBS]
# Prints one line a gate: candidate, seed, exit code, seconds, and the statistics stage's failures.
set -uo pipefail
out="${1:?usage: scripts/verify_tree_eagle_power.sh OUTDIR [SEEDS] [DEVICE] [JOBS]}"
seeds="${2:-0 1 2 3 4 5 6 7}"
device="${3:-cpu}"
jobs="${4:-8}"
mkdir -p "$out"
for s in $seeds; do
    for c in tests/candidates/eagle_large_vocab.py:leaky_mask tests/candidates/eagle_large_vocab.py:stale_mask target_only; do
        echo "$c $s"
    done
done | OMP_NUM_THREADS=1 xargs -P "$jobs" -L 1 bash -c 'c=$1; s=$2; n=$(basename "${c#*:}")-$s; t0=$(date +%s);
    timeout -k 5 580 python3 -m equiv gate --op verify_tree --candidate "$c" --stages statistics --seed "$s" \
        --device '"$device"' --json "'"$out"'/$n.json" >"'"$out"'/$n.log" 2>&1; rc=$?;
    echo "$n rc=$rc $(( $(date +%s) - t0 )) s $(grep -E "FAIL|p = " "'"$out"'/$n.log" | head -3 | tr -s " " | cut -c1-300 | tr "\n" "|")"' _
