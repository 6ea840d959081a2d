#!/usr/bin/env bash
# Batched GPU session for the integration checks. Usage: scripts/gpu_run.sh MODE OUTDIR
#   suite: the whole test suite (tests/ and properties/) with --equiv-device cuda, ci profile
#   gates: the pre-merge gate on the built-in paths (timed), the nightly-sweep throughput on one
#          GPU, and the default `equiv mtp` run twice (its table, its time, its determinism)
# Everything is written under a scratch folder and packed into OUTDIR/MODE.tar.gz (the device
# tool brings back only a few files); a table of wall times is printed last.
set -uo pipefail
mode="${1:?usage: scripts/gpu_run.sh suite|gates OUTDIR}"
dest="${2:?usage: scripts/gpu_run.sh suite|gates OUTDIR}"
out=$(mktemp -d)
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.log" 2>&1 || export PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/env.txt"
python3 -c "import torch, triton, numpy, hypothesis; print('torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__, 'hypothesis', hypothesis.__version__)" | tee -a "$out/env.txt"

declare -a times
step() {  # step NAME TIMEOUT_S COMMAND...
    local name=$1 limit=$2; shift 2
    local t0=$(date +%s%N)
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    local t1=$(date +%s%N)
    times+=("$(printf '%-28s rc=%-3s %7d ms' "$name" "$rc" "$(( (t1 - t0) / 1000000 ))")")
}

if [ "$mode" = suite ]; then
    step suite 540 env HYPOTHESIS_PROFILE=ci python3 -m pytest -q -p no:cacheprovider --equiv-device cuda \
         --junitxml="$out/suite-junit.xml"
    tail -n 25 "$out/suite.log"
    step sweep_gpu1 120 env HYPOTHESIS_PROFILE=ci python3 -m pytest --pyargs equiv.properties -q -p no:cacheprovider \
         --equiv-device cuda -n 1 --equiv-sweep-json "$out/sweep-gpu1.json"
    cat "$out/sweep-gpu1.json" 2>/dev/null | grep -E '"(examples|examples_per_s|wall_s|n_workers|balance_slowest_over_fastest)"' 
else
    for c in hardcoded_one identity_top1 fused_triton; do
        step "gate_$c" 120 python3 -m equiv gate --candidate "$c" --device cuda --json "$out/gate-$c.json"
    done
    step sweep_gpu1 180 env HYPOTHESIS_PROFILE=ci python3 -m pytest --pyargs equiv.properties -q -p no:cacheprovider \
         --equiv-device cuda -n 1 --equiv-shards 4 --equiv-sweep-json "$out/sweep-gpu1.json"
    step mtp_default 300 python3 -m equiv mtp --device cuda --json "$out/mtp_default.json" --plot "$out/mtp_default.png"
    step mtp_default_again 300 python3 -m equiv mtp --device cuda --json "$out/mtp_default_again.json"
    cmp -s "$out/mtp_default.json" "$out/mtp_default_again.json" && echo "mtp JSON identical across runs" || echo "mtp JSON DIFFERS"
    tail -n 20 "$out/mtp_default.log"
    cat "$out/sweep-gpu1.json" 2>/dev/null | head -30
    tail -n 4 "$out"/gate_*.log
fi
for t in "${times[@]}"; do echo "$t"; done | tee "$out/times.txt"
tar -czf "$dest/$mode.tar.gz" -C "$out" .
