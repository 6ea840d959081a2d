#!/usr/bin/env bash
# False positives of the chain verifier's whole judge over plan seeds, spread over a host's cores
# (scripts/verify_joint_calibration.py --parts null --draws plan --whole, one process per slice).
# Usage: scripts/device_fp.sh FIRST COUNT PROCS OUTDIR   (each process appends its JSON lines)
set -u
first=${1:?first seed}; count=${2:?seeds}; procs=${3:?processes}; out=${4:?folder}
mkdir -p "$out"
per=$(( (count + procs - 1) / procs ))
for ((i = 0; i < procs; i++)); do
    s=$(( first + i * per ))
    n=$(( per < first + count - s ? per : first + count - s ))
    (( n > 0 )) || continue
    nice -n 15 python3 scripts/verify_joint_calibration.py --parts null --draws plan --whole \
        --seeds "$n" --first-seed "$s" --out "$out/chain_fp_$s.jsonl" >"$out/chain_fp_$s.log" 2>&1 &
done
wait
