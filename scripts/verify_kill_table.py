"""Print the verify kill table: for every mutant, legal variant and built-in, the failing checks
and the defect kinds (one per cause) under both laws, on the quick plan with V capped at
``--vocab-cap`` (1025: the plan tests/ops/verify/test_verify_mutants.py runs; 0: uncapped, the real gate).

    PYTHONPATH=. python3 scripts/verify_kill_table.py [--vocab-cap 1025] [--device cpu]
"""
import argparse
from dataclasses import replace

from equiv.ops.verify.defects import diagnose
from equiv.ops.verify.judge import run_judge
from equiv.ops.verify.mutants import LEGAL_VARIANTS, MUTANTS
from equiv.ops.verify.paths import VERIFIERS
from equiv.ops.verify.plans import plan


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab-cap", type=int, default=1025)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    cap = args.vocab_cap or 10 ** 9
    plans = {law: [replace(c, recipe=c.recipe.with_(vocab=min(c.recipe.vocab, cap))) for c in plan("quick", law=law)]
             for law in ("lossless", "token")}
    print("| verifier | lossless (default): failing checks | defects by cause | --law token: failing checks | defects by cause |")
    print("|---|---|---|---|---|")
    subjects = {**{n: m for n, m in MUTANTS.items()}, **LEGAL_VARIANTS,
                **{n: f for n, f in VERIFIERS.items() if n != "reference_sampler"}}
    for name, fn in subjects.items():
        cells = []
        for law in ("lossless", "token"):
            v = run_judge(fn, plans[law], device=args.device, spec=name, law=law)
            failed = ", ".join(c.name for c in v.failed) or ("PASS, note" if v.notes else "PASS")
            kinds = ", ".join(d.kind for d in diagnose(v).defects) or "-"
            cells += [failed, kinds]
        print(f"| `{name}` | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
