#!/usr/bin/env bash
# MTP measurements on one GPU (issue 4): docs/mtp.md's GPU table at V = 129280 (every built-in path x
# every consumer, the default `equiv mtp` run, timed: it must take <= 60 s), its determinism on
# the GPU, the gate's quick budget, per-consumer time and peak memory, the MTP tests on cuda, and
# the sampling statistic at a GPU-sized sample. Usage: scripts/gpu_mtp.sh OUTDIR (on the device
# machine OUTDIR is $OUT). Logs, JSON and PNG go to OUTDIR; a table of wall times is printed last.
set -uo pipefail
out="${1:?usage: scripts/gpu_mtp.sh OUTDIR}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.log" 2>&1 || export PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/env.txt"
python3 -c "import torch, numpy, scipy; print('torch', torch.__version__, 'numpy', numpy.__version__, 'scipy', scipy.__version__)" | tee -a "$out/env.txt"

declare -a times
step() {  # step NAME TIMEOUT_S COMMAND...
    local name=$1 limit=$2; shift 2
    local t0=$(date +%s.%N)
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    local t1=$(date +%s.%N)
    times+=("$(printf '%-26s rc=%-3s %7.1f s' "$name" "$rc" "$(echo "$t1 - $t0" | bc)")")
}

# 1. The default run, exactly as a user types it: docs/mtp.md's GPU table and the <= 60 s figure.
step mtp_default 300 python3 -m equiv mtp --device cuda --json "$out/mtp_default.json" --plot "$out/mtp_default.png"
# 2. Same seed, same JSON, on the GPU too.
step mtp_default_again 300 python3 -m equiv mtp --device cuda --json "$out/mtp_default_again.json"
if cmp -s "$out/mtp_default.json" "$out/mtp_default_again.json"; then echo "identical" >"$out/determinism.txt"
else echo "DIFFERENT" >"$out/determinism.txt"; diff "$out/mtp_default.json" "$out/mtp_default_again.json" | head -40 >>"$out/determinism.txt"; fi
# 3. The gate's quick budget for one candidate (and the reference).
step mtp_quick_identity_top1 120 python3 -m equiv mtp --device cuda --budget quick --paths identity_top1 --json "$out/mtp_quick.json"
# 4. Where the default run's time and memory go, consumer by consumer.
step mtp_profile 300 python3 - "$out" <<'PY'
import json, sys, time
import torch
from equiv.mtp import run_mtp
rows = []
for consumer in ("greedy", "target_only", "confidence", "tree"):
    torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    run = run_mtp(None, [consumer], device="cuda")
    torch.cuda.synchronize()
    rows.append({"consumer": consumer, "seconds": round(time.perf_counter() - t0, 2),
                 "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
                 "paths": run.config["paths"], "passed": run.passed})
    print(rows[-1], flush=True)
json.dump(rows, open(f"{sys.argv[1]}/mtp_profile.json", "w"), indent=2)
PY
# 5. The sampling statistic at a GPU-sized sample (~300k tokens): must still pass (the TVD floor).
step mtp_target_only_large 300 python3 -m equiv mtp --device cuda --consumers target_only --sequences 2048 --rounds 64 --json "$out/mtp_target_only_large.json"
# 6. The MTP tests, with the cuda-marked one running.
step mtp_tests 300 python3 -m pytest -q -p no:cacheprovider tests/mtp/test_mtp_models.py tests/mtp/test_mtp_statistics.py \
     tests/mtp/test_mtp_decoding.py tests/mtp/test_mtp_traces.py tests/mtp/test_mtp_cli.py -rs

for t in "${times[@]}"; do echo "$t"; done | tee "$out/times.txt"
cat "$out/determinism.txt"
tail -n 2 "$out/mtp_default.log"
