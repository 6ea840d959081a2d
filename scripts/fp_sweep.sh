#!/usr/bin/env bash
# False positives of an op's quick gate over seeds, spread over a host's cores, one process per
# slice of seeds, each process one thread (OMP_NUM_THREADS=1), niced:
#   verify     scripts/verify_joint_calibration.py --parts null --draws plan --whole (every
#              statistical case of the seed's plan drawn from the exact law, the whole judge)
#   draft_topk the quick gate's tolerance stage on a correct built-in path (FP_CANDIDATE, default
#              softmax_topk), one `equiv gate --stages tolerance --seed S` per seed (FP_STAGES
#              widens it, e.g. tolerance,mtp); a line per seed: seed, exit code, seconds
# Usage: scripts/fp_sweep.sh OP FIRST COUNT PROCS OUTDIR [LIMIT_S]
# LIMIT_S (default 3600) ends every process then; what finished is in OUTDIR/*.jsonl / *.txt.
set -u
op=${1:?op}; first=${2:?first seed}; count=${3:?seeds}; procs=${4:?processes}; out=${5:?folder}
limit=${6:-3600}
mkdir -p "$out"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
export EQUIV_CACHE=${EQUIV_CACHE:-0}   # every seed its own plan: a disk cache would only be written and pruned
per=$(( (count + procs - 1) / procs ))
slice() {  # slice FIRST N
    local s=$1 n=$2
    case "$op" in
    verify)
        python3 scripts/verify_joint_calibration.py --parts null --draws plan --whole \
            --seeds "$n" --first-seed "$s" --out "$out/chain_fp_$s.jsonl" >"$out/chain_fp_$s.log" 2>&1 ;;
    draft_topk)
        for ((seed = s; seed < s + n; seed++)); do
            t0=$(date +%s%N)
            python3 -m equiv gate --candidate "${FP_CANDIDATE:-softmax_topk}" --device cpu --seed "$seed" \
                --stages "${FP_STAGES:-tolerance}" --json "$out/draft_$seed.json" >"$out/draft_$seed.log" 2>&1
            rc=$?
            echo "$seed rc=$rc $(( ($(date +%s%N) - t0) / 1000000 )) ms" >>"$out/draft_fp_$s.txt"
            [ "$rc" = 0 ] && rm -f "$out/draft_$seed.log" "$out/draft_$seed.json"
        done ;;
    *) echo "fp_sweep: unknown op $op (verify or draft_topk)" >&2; return 2 ;;
    esac
}
for ((i = 0; i < procs; i++)); do
    s=$(( first + i * per ))
    n=$(( per < first + count - s ? per : first + count - s ))
    (( n > 0 )) || continue
    timeout -k 5 "$limit" nice -n 15 bash -c "$(declare -f slice); op=$op out=$out; slice $s $n" &
done
wait
