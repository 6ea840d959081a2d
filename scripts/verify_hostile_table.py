"""Run the hostile verifiers of issue 34 through the quick CPU verify gate and print the table.

Plan. Each candidate of ``tests/candidates/verify_hostile.py`` (``EXPECTED``: a hostile one must
FAIL, a correct one must PASS) goes through the gate command as a user runs it,
``python -m equiv gate --op verify --candidate tests/candidates/verify_hostile.py:NAME --device
cpu --json FILE`` (a subprocess: the candidate runs in the gate's supervised worker), at seed
``--seed``; the table shows the verdict, whether it is the expected one, the failing checks,
the defect kinds the diagnosis names and the wall time. Exit 1 when any verdict is unexpected.

    PYTHONPATH=. python3 scripts/verify_hostile_table.py [--names a,b] [--seed 0]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FILE = os.path.join("tests", "candidates", "verify_hostile.py")
# name: (the class it is wrong in, expected verdict)
EXPECTED = {
    "wrong_from_position_3": ("only from position 3 on", "FAIL"),
    "wrong_past_2_17": ("only for V > 131072", "FAIL"),
    "wrong_after_last_64": ("only rows after the last multiple of 64", "FAIL"),
    "wrong_for_n_ge_9": ("only for n >= 9", "FAIL"),
    "rows_share_uniforms": ("row 2i+1 reuses row 2i's uniforms", "FAIL"),
    "calls_share_state": ("successive calls reuse one state", "FAIL"),
    "block_weights_unclamped": ("lossy block, emitted TV ~0.06", "FAIL"),
    "block_keep_unweighted_mass": ("lossy block, emitted TV ~0.03", "FAIL"),
    "block_last_keep_one": ("lossy block, emitted TV ~0.07", "FAIL"),
    "correct_torch": ("correct (torch_sampler)", "PASS"),
    "correct_block": ("correct (block verification)", "PASS"),
    "correct_other_stream": ("correct, another random stream", "PASS"),
}


def run(name: str, seed: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "gate.json")
        cmd = [sys.executable, "-m", "equiv", "gate", "--op", "verify", "--candidate", f"{FILE}:{name}",
               "--device", "cpu", "--seed", str(seed), "--json", out]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        if not os.path.exists(out):
            return {"name": name, "verdict": f"exit {proc.returncode}", "failed": [], "defects": [],
                    "seconds": seconds, "error": proc.stderr.strip().splitlines()[-1:] or [""]}
        with open(out) as fh:
            got = json.load(fh)
    return {"name": name, "verdict": got.get("verdict", "pass" if got["passed"] else "fail").upper(),
            "failed": [c["name"] for c in got["checks"] if not c["passed"]],
            "defects": sorted({d["kind"] for d in got.get("defects", [])}), "seconds": seconds}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--names", default=",".join(EXPECTED))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    names = [n for n in args.names.split(",") if n]
    unknown = [n for n in names if n not in EXPECTED]
    if unknown:
        print(f"--names: {', '.join(unknown)} unknown: choose from {', '.join(EXPECTED)}", file=sys.stderr)
        return 2
    print(f"{'candidate':<28} {'wrong in':<42} {'verdict':<7} {'ok':<3} {'s':>6}  failing checks / defects")
    bad = 0
    for name in names:
        r = run(name, args.seed)
        what, want = EXPECTED[name]
        ok = r["verdict"] == want
        bad += not ok
        print(f"{name:<28} {what:<42} {r['verdict']:<7} {'yes' if ok else 'NO':<3} {r['seconds']:>6.1f}  "
              f"{', '.join(r['failed']) or '-'}" + (f" / {', '.join(r['defects'])}" if r["defects"] else ""),
              flush=True)
    print(f"{len(names) - bad} of {len(names)} verdicts as expected")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
