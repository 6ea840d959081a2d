#!/usr/bin/env bash
# Batched GPU session for the integration checks. Usage: scripts/gpu_run.sh MODE OUTDIR
#   suite:     the whole test suite (tests/ and properties/; or the tests named after OUTDIR) on
#              cuda with every candidate isolated (EQUIV_ISOLATE=always), in parallel processes
#   timed:     quick gates timed one at a time (whole command, 3 times each: identity_top1,
#              fused_triton cold then warm, a user's torch file from an unrelated folder, the verify
#              op's torch_sampler), then the `equiv bench` table (k = 1, 4, 8); TIMED_GATES (e.g.
#              "user_file"), NO_COLD, NO_VERIFY and NO_BENCH leave parts out
#   verdicts:  gates in parallel: the four built-in paths isolated, every draft mutant (its gate
#              JSON carries the diagnosis's cost), the verify op's paths and mutants; checked by
#              scripts/gate_summary.py; then the GPU probes' table (scripts/gpu_probe_table.py).
#              VERDICT_FILTER (an extended regex on the names) limits the gates
#   reach:     the input space's far end (issue 23): fused_triton on the plan's shape past 2**31
#              elements (bfloat16, equiv check), then its full-budget tolerance stage with the
#              coverage table (REACH_LIMIT seconds at most)
#   calibrate: the verify judge's calibration, one run (false positives, power by shape)
#   tune:      the kernel's variant sweep (equiv/ops/draft_topk/kernels/tune.py, compiled first in 8 processes);
#              TUNE_ARGS (e.g. "--batch 256 --vocab 64640,129280") for other shapes
#   checks:    the tests marked equiv_gpu, then one quick gate per op on cuda, twice each
#   profile:   where a quick gate's time goes: the import time of the CLI, then one gate each
#              (identity_top1, a user's torch file, fused_triton) with every process of it
#              profiled (scripts/profile/sitecustomize.py), read by scripts/profile/report.py;
#              PROFILE_GATES picks others (names: identity user fused softmax verify tree);
#              KEEP_PROF=1 keeps each process's .prof beside the report
# Logs and JSON go to OUTDIR (on the device machine: $OUT); a table of wall times is printed last.
set -uo pipefail
mode="${1:?usage: scripts/gpu_run.sh suite|timed|verdicts|reach|calibrate|profile|tune OUTDIR}"
out="${2:?usage: scripts/gpu_run.sh suite|timed|verdicts|reach|calibrate|profile|tune OUTDIR}"
shift 2                                  # suite: what is left names the tests (default: all)
mkdir -p "$out"
repo=$PWD
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.log" 2>&1 || export PYTHONPATH=$PWD
# The device's packages carry no bytecode caches: every process compiled torch's and scipy's
# sources again (~1000 modules, ~2 s a process). A user's installation has them (pip writes them
# at install), so the runs keep the bytecode in one folder, written by this first import (even
# where PYTHONDONTWRITEBYTECODE is set; the runs after it read the folder).
export PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-/tmp/equiv-pycache}"
env -u PYTHONDONTWRITEBYTECODE python3 -c "import torch, torch.nn, scipy.stats, hypothesis, pytest, triton, equiv.cli, equiv.gate, equiv.pytest.plugin" \
    >/dev/null 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/env.txt"
python3 -c "import torch, triton, numpy, hypothesis; print('torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__, 'hypothesis', hypothesis.__version__)" | tee -a "$out/env.txt"
git -C "$repo" rev-parse --short HEAD 2>/dev/null | sed 's/^/commit /' | tee -a "$out/env.txt"

declare -a times
step() {  # step NAME TIMEOUT_S COMMAND...: runs it, logs to OUTDIR/NAME.log, records rc and wall ms
    local name=$1 limit=$2; shift 2
    local t0=$(date +%s%N)
    timeout -k 5 "$limit" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    local t1=$(date +%s%N)
    times+=("$(printf '%-34s rc=%-3s %8d ms' "$name" "$rc" "$(( (t1 - t0) / 1000000 ))")")
}

user_kernel() {  # a user's correct k = 1-only torch kernel, as a file in an unrelated folder
    cat <<'EOF'
import torch


def k1_only(logits, k):
    if k != 1:
        raise NotImplementedError("k = 1 only")
    x = logits.float()
    m, i = x.max(dim=-1, keepdim=True)
    return 1.0 / torch.exp(x - m).sum(dim=-1, keepdim=True), i
EOF
}

verdicts() {  # verdicts LIST_FILE: one gate per line "NAME ARGS...", 8 at a time; one line each;
              # the isolated_* gates run their built-in path in a worker (EQUIV_ISOLATE=always)
    xargs -P 8 -L 1 bash -c 'n=$1; shift; case $n in isolated_*) export EQUIV_ISOLATE=always;; esac; t0=$(date +%s%N); timeout -k 5 240 python3 -m equiv gate --device cuda --json "'"$out"'/verdict-$n.json" "$@" >"'"$out"'/verdict-$n.log" 2>&1; rc=$?; printf "%-44s rc=%-3s %6d ms\n" "$n" "$rc" "$(( ($(date +%s%N) - t0) / 1000000 ))"' _ <"$1"
}

case "$mode" in
suite)
    step suite "${SUITE_LIMIT:-570}" env HYPOTHESIS_PROFILE=equiv-ci EQUIV_ISOLATE=always python3 -m pytest -q \
         -p no:cacheprovider -n 14 --equiv-device cuda --junitxml="$out/suite-junit.xml" "$@"
    tail -n 30 "$out/suite.log"
    ;;
timed)
    scratch=$(mktemp -d)                 # a user's project: no equiv checkout in sight
    user_kernel >"$scratch/k.py"
    cd "$scratch"
    export TRITON_CACHE_DIR="$scratch/triton-cache"       # empty: the first fused_triton gate compiles
    [ -n "${NO_COLD:-}" ] || step gate_fused_triton_cold 200 python3 -m equiv gate --candidate fused_triton \
         --device cuda --json "$out/gate_fused_triton_cold.json"
    for i in 1 2 3; do
        for g in "identity_top1 identity_top1" "fused_triton_warm fused_triton" "user_file k.py:k1_only"; do
            set -- $g
            [[ " ${TIMED_GATES:-identity_top1 fused_triton_warm user_file} " == *" $1 "* ]] || continue
            step "gate_$1_$i" 120 python3 -m equiv gate --candidate "$2" --device cuda --json "$out/gate_$1_$i.json"
        done
        [ -n "${NO_VERIFY:-}" ] || step "gate_verify_torch_sampler_$i" 120 python3 -m equiv gate --op verify \
            --candidate torch_sampler --device cuda --json "$out/gate_verify_$i.json"
    done
    tail -n 12 "$out/gate_user_file_1.log"
    python3 - "$out" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "gate_*.json"))):
    d = json.load(open(f))
    st = " ".join(f"{k}={v.get('seconds', 0):.1f}" for k, v in (d.get("stages") or {}).items())
    print(f"{os.path.basename(f):36s} {d.get('passed')!s:6s} {st}")
PY
    cd "$repo"
    if [ -z "${NO_BENCH:-}" ]; then
        step bench 240 python3 -m equiv bench --k 1,4,8 --json "$out/bench.json"
        tail -n 40 "$out/bench.log"
    fi
    ;;
verdicts)
    scratch=$(mktemp -d)
    list="$scratch/verdicts.txt"
    for c in softmax_topk hardcoded_one identity_top1 fused_triton; do
        echo "isolated_$c --candidate $c" >>"$list"
    done
    python3 - >>"$list" <<'EOF'
import equiv.ops.draft_topk.mutants as m
for name, mut in {**m.MUTANTS, **m.GPU_MUTANTS}.items():
    print(f"mutant_{name} --candidate equiv.ops.draft_topk.mutants:{name} --k {getattr(mut, 'k', 1)}")
from equiv.ops.verify.mutants import LEGAL_VARIANTS, MUTANTS
from equiv.ops.verify.paths import VERIFIERS
for name in VERIFIERS:
    print(f"verify_{name} --op verify --candidate {name}")
for name in {**MUTANTS, **LEGAL_VARIANTS}:
    print(f"verify_{name} --op verify --candidate equiv.ops.verify.mutants:{name}")
EOF
    echo "== verdicts (rc 0 = PASS, 1 = FAIL)"
    verdicts <(grep -E "${VERDICT_FILTER:-.}" "$list") | tee "$out/verdicts.txt"
    python3 scripts/gate_summary.py "$out" | tee "$out/gate_summary.txt"
    if [ -z "${NO_PROBES:-}" ]; then
        step probes 240 python3 scripts/gpu_probe_table.py "$out/probes.json"
        cat "$out/probes.log"
    fi
    ;;
profile)
    scratch=$(mktemp -d)
    user_kernel >"$scratch/k.py"
    python3 -X importtime -c "import equiv.cli" 2>"$out/importtime.txt"
    sort -t'|' -k2 -n -r "$out/importtime.txt" | head -n 25 >"$out/importtime_top.txt"
    python3 -c "import time; t=time.time(); import torch; a=time.time(); torch.zeros(1, device='cuda'); print(f'import torch {a-t:.2f} s, first CUDA tensor {time.time()-a:.2f} s')" | tee "$out/cuda_init.txt"
    cd "$scratch"
    for g in "identity identity_top1" "user k.py:k1_only" "fused fused_triton" "softmax softmax_topk" \
             "verify torch_sampler --op verify" "tree target_only --op verify_tree"; do
        set -- $g
        [[ " ${PROFILE_GATES:-identity user fused} " == *" $1 "* ]] || continue
        name=$1; shift
        mkdir -p "$out/prof_$name"
        step "prof_$name" 150 env EQUIV_PROF_DIR="$out/prof_$name" PYTHONPATH="$repo/scripts/profile" \
             python3 -m equiv gate --candidate "$@" --device cuda --json "$out/prof_$name/gate.json"
        python3 "$repo/scripts/profile/report.py" "$out/prof_$name" --top 45 >"$out/prof_$name.txt" 2>&1
        [[ -n "${KEEP_PROF:-}" ]] || rm -f "$out/prof_$name"/*.prof
    done
    cd "$repo"
    ;;
tune)
    step tune "${TUNE_LIMIT:-300}" python3 -m equiv.ops.draft_topk.kernels.tune --warm 8 ${TUNE_ARGS:-} "$out/tune.json"
    grep -v '^warm' "$out/tune.log"
    ;;
reach)
    huge=$(python3 -c "from equiv.ops.draft_topk.space import HUGE_SHAPE as s; print(f'batch={s[0]},vocab={s[1]}')")
    step huge_check 300 python3 -m equiv check --candidate fused_triton --device cuda \
         --recipe "gaussian:seed=0,$huge,dtype=bfloat16" --json "$out/huge_check.json"
    tail -n 12 "$out/huge_check.log"
    step full_tolerance "${REACH_LIMIT:-280}" python3 -m equiv gate --candidate fused_triton --device cuda \
         --budget full --stages tolerance --json "$out/full_tolerance.json"
    tail -n 30 "$out/full_tolerance.log"
    ;;
calibrate)
    step calibration 560 python3 -m equiv.ops.verify.calibration --device cuda --workers 14 --seed 1 \
         --runs "${CAL_RUNS:-1000}" --null-budgets quick --power-budget full \
         --power-runs "${CAL_POWER_RUNS:-30}" --tv 0.02 --shapes sharper,flatter,swap_top2 \
         --vocabs 129280 --json "$out/calibration.jsonl"
    tail -n 20 "$out/calibration.log"
    ;;
checks)
    # every test that needs a GPU (the equiv_gpu marker), then one quick gate per op on cuda, each
    # twice (the second warm): the draft top-k (its default k), the chain verifier, the tree verifier
    step gpu_tests "${GPU_TESTS_LIMIT:-300}" env HYPOTHESIS_PROFILE=equiv-ci python3 -m pytest -q \
         -p no:cacheprovider -n 8 -m equiv_gpu --equiv-device cuda tests properties
    tail -n 15 "$out/gpu_tests.log"
    for i in 1 2; do
        step "gate_draft_softmax_topk_$i" 150 python3 -m equiv gate --candidate softmax_topk --device cuda \
             --json "$out/gate_draft_$i.json"
        step "gate_verify_torch_sampler_$i" 150 python3 -m equiv gate --op verify --candidate torch_sampler \
             --device cuda --json "$out/gate_verify_$i.json"
        step "gate_verify_tree_$i" 150 python3 -m equiv gate --op verify_tree --candidate "${TREE_CANDIDATE:-target_only}" \
             --device cuda --json "$out/gate_tree_$i.json"
    done
    ;;
*)
    echo "unknown mode $mode: use suite, timed, verdicts, reach, calibrate, profile or tune" >&2
    exit 2
    ;;
esac
for t in "${times[@]}"; do echo "$t"; done | tee "$out/times.txt"
