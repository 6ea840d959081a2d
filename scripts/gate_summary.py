"""Summarize the verdict JSONs of ``scripts/gpu_run.sh gates``: ``python scripts/gate_summary.py DIR``.

One line per ``DIR/verdict-NAME.json``: the verdict against the one expected (correct paths and
legal variants pass; ``hardcoded_one`` and every mutant fail, except ``batch_dependent_reduction``,
which is within tolerance and fails only when bitwise batch invariance is required), the defects
the diagnosis named, and its cost: the diagnosis's seconds over the rest of the gate's. Then the
totals, and the cost over all failing candidates (total, median, worst). Exit 1 when a verdict is
not the expected one or a verdict file is missing.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

PASSING = {"isolated_softmax_topk", "isolated_identity_top1", "isolated_fused_triton",
           "mutant_batch_dependent_reduction", "verify_torch_sampler", "verify_reference_sampler",
           "verify_exponential_race"}


def main(folder: str) -> int:
    rows, costs, wrong = [], [], []
    logs = sorted(Path(folder).glob("verdict-*.log"))
    for log in logs:
        name = log.stem[len("verdict-"):]
        path = log.with_suffix(".json")
        if not path.exists():
            wrong.append(f"{name}: no verdict JSON (see {log.name})")
            continue
        v = json.loads(path.read_text())
        expect = name in PASSING
        diag = (v.get("diagnosis") or {}).get("duration_s") or 0.0
        total = v.get("duration_s") or 0.0
        share = diag / (total - diag) if v["passed"] is False and total > diag else 0.0
        if not v["passed"]:
            costs.append((share, name, diag, total))
        kinds = ",".join(d["kind"] for d in v.get("defects", []))
        ok = v["passed"] == expect
        if not ok:
            wrong.append(f"{name}: {'PASS' if v['passed'] else 'FAIL'}, expected {'PASS' if expect else 'FAIL'}")
        rows.append(f"{name:<44} {'PASS' if v['passed'] else 'FAIL':<5} {'ok' if ok else 'WRONG':<6}"
                    f"{total:7.1f} s  diag {diag:5.1f} s (+{100 * share:3.0f}%)  {len(v.get('defects', []))} "
                    f"defects {kinds}")
    print("\n".join(rows))
    print(f"{len(rows)} verdicts, {len(rows) - len([w for w in wrong if 'expected' in w])} as expected")
    if costs:
        shares = [c[0] for c in costs]
        diag_s, gate_s = sum(c[2] for c in costs), sum(c[3] - c[2] for c in costs)
        worst = max(costs)
        print(f"diagnosis cost over {len(costs)} failing gates: +{100 * diag_s / gate_s:.0f}% in total "
              f"({diag_s:.1f} s over {gate_s:.1f} s), median +{100 * statistics.median(shares):.0f}%, "
              f"worst +{100 * worst[0]:.0f}% ({worst[1]})")
    for w in wrong:
        print("UNEXPECTED:", w)
    return 1 if wrong or not logs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
