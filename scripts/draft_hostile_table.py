"""Run each draft-step candidate of tests/candidates/draft_contexts.py through the quick CPU gate
and print one row per candidate: the class it is wrong in (or "correct"), the verdict, the stages
that failed, the defects the diagnosis named and the wall time (issue 34's must-show).

    python3 scripts/draft_hostile_table.py [--only NAME,...] [--device cpu] [--json FILE]

A wrong candidate must FAIL and a correct one PASS; the last line counts the rows that did not,
and the exit status is 1 if any did. Each gate is ``python3 -m equiv gate --candidate
tests/candidates/draft_contexts.py:NAME --device cpu --json ...`` in a subprocess, default k.
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
FILE = os.path.join(HERE, "..", "tests", "candidates", "draft_contexts.py")

CANDIDATES = (
    ("wrong_under_inference_mode", "context: inference_mode"),
    ("wrong_under_no_grad", "context: no_grad"),
    ("wrong_off_main_thread", "context: a worker thread"),
    ("wrong_at_half_tile", "V % 128 == 64"),
    ("skips_half_tile", "V % 128 == 64, a small shift (float32 only)"),
    ("wrong_past_4096_rows", "batch > 4096"),
    ("stale_ring_8", "stale 8 calls later"),
    ("switches_after_100_calls", "after 100 calls"),
    ("wrong_at_k_ge_2", "k >= 2"),
    ("correct_reference", "correct"),
    ("correct_refuses_k8", "correct (NotImplementedError at k = 8)"),
    ("correct_declares_k", "correct (supported_k = 1, 2)"),
)


def run_one(name: str, device: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "verdict.json")
        cmd = [sys.executable, "-m", "equiv", "gate", "--candidate", f"{os.path.relpath(FILE)}:{name}",
               "--device", device, "--json", out]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        doc = json.load(open(out)) if os.path.exists(out) else {}
    stages = doc.get("stages", {})
    stages = stages.values() if isinstance(stages, dict) else stages
    failed = [s.get("name", "?") for s in stages if s.get("status") == "FAIL"]
    causes = [d.get("cause") for d in doc.get("defects", [])]
    return {"name": name, "exit": proc.returncode, "passed": doc.get("passed"), "k": doc.get("k"),
            "failed_stages": failed, "defects": causes, "wall_s": round(wall, 1),
            "error": None if doc else (proc.stderr or proc.stdout)[-300:]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help="comma-separated candidate names")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", dest="json_out", default=None)
    args = ap.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    rows, wrong = [], 0
    print(f"{'candidate':<28} {'wrong only':<38} {'verdict':<7} {'k':<9} {'failed stages':<26} "
          f"{'defects named':<28} {'wall s':>6}")
    for name, klass in CANDIDATES:
        if only and name not in only:
            continue
        r = run_one(name, args.device)
        r["class"] = klass
        expect_pass = klass.startswith("correct")
        verdict = "PASS" if r["passed"] else "FAIL" if r["passed"] is False else f"exit {r['exit']}"
        ok = (r["passed"] is True) == expect_pass and r["passed"] is not None
        wrong += not ok
        rows.append(r)
        ks = ",".join(map(str, r["k"] or []))
        print(f"{name:<28} {klass:<38} {verdict:<7} {ks:<9} {','.join(r['failed_stages']) or '-':<26} "
              f"{','.join(r['defects']) or '-':<28} {r['wall_s']:>6}" + ("" if ok else "   <-- unexpected"),
              flush=True)
        if r["error"]:
            print("   " + r["error"].replace("\n", "\n   "))
    print(f"{len(rows)} candidates, {wrong} unexpected verdicts")
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
