"""The diagnosis's calibration table (docs/diagnosis.md): each candidate of the zoo through the real
gate (or ``--mini``, the diagnosis's own mini gate), then the diagnosis, against the kinds expected.

    python scripts/diagnosis_calibration.py [NAME ...] [--mini] [--device=cuda]
"""
import sys

from equiv.gate import run_gate
from equiv.ops.draft_topk.diagnose.calibrate import EXPECTED_KINDS, calibrate


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    gate = None if "--mini" in argv else (lambda spec, k, device: run_gate(spec, k=k, device=device, seed=0).checks)
    device = next((a.split("=", 1)[1] for a in argv if a.startswith("--device=")), "cpu")
    names = [a for a in argv if not a.startswith("--")] or list(EXPECTED_KINDS)
    print("| candidate | defects found | as expected | trigger | failing checks | gate s | diagnosis s |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for name in names:
        row = calibrate([name], gate=gate, device=device)[0]
        rows.append(row)
        print(row.line(), flush=True)
    bad = [r.name for r in rows if not r.ok]
    print(f"\n{len(rows) - len(bad)} / {len(rows)} as expected" + (f"; mismatched: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
