#!/usr/bin/env bash
# One batched GPU session: the whole test suite on cuda, the gate on the built-in paths, the
# default MTP run and the nightly-sweep throughput on one GPU. Usage: scripts/gpu_run.sh OUTDIR
# (on the device machine OUTDIR is $OUT). Each step's log goes to OUTDIR; a table of wall times
# is printed last.
set -uo pipefail
out="${1:?usage: scripts/gpu_run.sh OUTDIR}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.log" 2>&1 || export PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/env.txt"
python3 -c "import torch, triton, numpy, hypothesis; print('torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__, 'hypothesis', hypothesis.__version__)" | tee -a "$out/env.txt"

declare -a times
step() {  # step NAME COMMAND...
    local name=$1; shift
    local t0=$(date +%s.%N)
    "$@" >"$out/$name.log" 2>&1
    local rc=$?
    local t1=$(date +%s.%N)
    times+=("$(printf '%-28s rc=%-3s %7.1f s' "$name" "$rc" "$(echo "$t1 - $t0" | bc)")")
}

step suite env HYPOTHESIS_PROFILE=ci python3 -m pytest -q --equiv-device cuda -p no:cacheprovider \
     --junitxml="$out/suite-junit.xml"
step gate_hardcoded_one python3 -m equiv gate --candidate hardcoded_one --device cuda --json "$out/gate-hardcoded_one.json"
step gate_identity_top1 python3 -m equiv gate --candidate identity_top1 --device cuda --json "$out/gate-identity_top1.json"
step gate_fused_triton python3 -m equiv gate --candidate fused_triton --device cuda
step mtp_default python3 -m equiv mtp --device cuda --json "$out/mtp.json" --plot "$out/mtp.png"

for t in "${times[@]}"; do echo "$t"; done | tee "$out/times.txt"
tail -n 3 "$out/suite.log"
