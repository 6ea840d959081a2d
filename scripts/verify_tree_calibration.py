"""Calibration and tables of the verify_tree gate (docs/verify_tree.md prints what this measured).

    python scripts/verify_tree_calibration.py fp --seeds 1000 [--drafts topk]
        false positives of the statistical stage over seeds: texts drawn on the host from the
        exact law (what every lossless built-in emits, continued), the quick plan's cases,
        recipe seeds cycling over 0..2 (the banks), text seeds 0..N-1
    python scripts/verify_tree_calibration.py judge --seeds 20
        the real judge on every built-in under its declaration, quick statistical plan, N seeds
    python scripts/verify_tree_calibration.py power --seeds 50 [--vocab 129280 --batch 2000]
        detected share at TV 0.01 / 0.02 / 0.05 (host draws of biased laws, calibration.BIASES)
    python scripts/verify_tree_calibration.py table [--only NAME,NAME] [--device cpu]
        the gate (statistics stage, quick) on every built-in x construction, and on every mutant
        under its declaration (--only: those built-ins and mutants alone, so that a table can be
        cut over processes)
Each prints a table and appends JSON lines to --out (default: no file).
"""
from __future__ import annotations

import argparse
import json
import time


def _emit(args, record):
    if args.out:
        with open(args.out, "a") as f:
            f.write(json.dumps(record) + "\n")


def fp(args):
    from equiv.ops.verify_tree.calibration import false_positives
    from equiv.ops.verify_tree.plans import statistical_cases

    t0 = time.perf_counter()
    for start in range(args.start, args.start + args.seeds, 50):   # a record per 50 seeds: partial runs count
        seeds = range(start, min(start + 50, args.start + args.seeds))
        got = false_positives(lambda s: statistical_cases("quick", args.drafts, s), seeds)   # a drawn plan a seed
        took = time.perf_counter() - t0
        print(f"false positives ({args.drafts}, host draws of the exact law, quick plan), seeds "
              f"{seeds.start}..{seeds.stop - 1}: {len(got['failures'])} / {got['runs']} ({took:.0f} s) "
              f"{got['failures'][:5]}", flush=True)
        _emit(args, {"kind": "fp", "drafts": args.drafts, "first_seed": seeds.start, **got, "seconds": round(took, 1)})


def judge(args):
    from equiv.ops.verify_tree.judge import run_judge
    from equiv.ops.verify_tree.paths import VERIFIERS
    from equiv.ops.verify_tree.plans import statistical_cases

    for name, fn in VERIFIERS.items():
        drafts, targets = fn.drafts, getattr(fn, "targets", "any")
        bad = []
        t0 = time.perf_counter()
        for s in range(args.seeds):
            v = run_judge(fn, statistical_cases("quick", drafts, s, targets), device="cpu", drafts=drafts,
                          spec=name, seed=s)
            if not v.passed:
                bad.append((s, [c.name for c in v.failed]))
        print(f"{name:<22} drafts={drafts:<5} {len(bad)} failures / {args.seeds} seeds "
              f"({time.perf_counter() - t0:.0f} s) {bad[:3]}")
        _emit(args, {"kind": "judge", "verifier": name, "drafts": drafts, "seeds": args.seeds, "failures": bad})


def power(args):
    from equiv.ops.verify_tree.calibration import power as measure, power_cases

    rows = measure(power_cases(args.vocab, args.batch), (0.01, 0.02, 0.05), range(args.seeds))
    print(f"power at V = {args.vocab}, {args.batch} texts of 3 tokens per seed, {args.seeds} seeds:")
    print(f"{'bias':<6} {'TV':>5} {'detected':>9}")
    for r in rows:
        print(f"{r['bias']:<6} {r['tv']:>5} {r['detected']:>9.2f}")
        _emit(args, {"kind": "power", "vocab": args.vocab, **r})


def table(args):
    from equiv.gate import run_gate
    from equiv.ops.verify_tree.mutants import MUTANTS
    from equiv.ops.verify_tree.paths import VERIFIERS

    print(f"{'verifier':<22} {'declares':<8} " + " ".join(f"{c:<6}" for c in ("topk", "iid", "wor")))
    only = set(args.only.split(",")) if args.only else None
    unknown = (only or set()) - set(VERIFIERS) - set(MUTANTS)
    if unknown:
        raise SystemExit(f"table: --only names {sorted(unknown)}: not a built-in or mutant of verify_tree")
    for name, fn in VERIFIERS.items():
        if only is not None and name not in only:
            continue
        cells = []
        for c in ("topk", "iid", "wor"):
            r = run_gate(name, op="verify_tree", stages="statistics", drafts=c, device=args.device)
            cells.append(_shown(r))
            _emit(args, {"kind": "table", "verifier": name, "drafts": c, "verdict": r.verdict,
                         "failed": list(r.failed.names), "not_judged": list(r.not_judged),
                         "seconds": round(r.duration_s, 1)})
        print(f"{name:<22} {fn.drafts:<8} " + " ".join(f"{x:<6}" for x in cells), flush=True)
    print(f"\n{'mutant':<22} {'verdict':<8} {'seconds':>7}  causes")
    for name in MUTANTS:
        if only is not None and name not in only:
            continue
        r = run_gate(f"equiv.ops.verify_tree.mutants:{name}", op="verify_tree", stages="statistics",
                     device=args.device)
        causes = [d.cause for d in r.diagnosis.defects] if r.diagnosis else list(r.not_judged)
        print(f"{name:<22} {_shown(r):<8} {r.duration_s:>7.1f}  {'; '.join(causes)}", flush=True)
        _emit(args, {"kind": "kill", "mutant": name, "verdict": r.verdict, "causes": causes,
                     "seconds": round(r.duration_s, 1)})


def _shown(result) -> str:
    """A table cell: PASS, FAIL, or NOT JUDGED (the machine's failure, never the verifier's)."""
    return result.verdict.upper()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("fp", "judge", "power", "table"))
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--start", type=int, default=0, help="fp: the first text seed")
    p.add_argument("--drafts", default="topk", choices=("topk", "iid", "wor"))
    p.add_argument("--vocab", type=int, default=129280)
    p.add_argument("--batch", type=int, default=2000)
    p.add_argument("--out", default=None)
    p.add_argument("--device", default="cpu", help="table: the gates' device (default cpu)")
    p.add_argument("--only", default=None, help="table: these built-ins and mutants alone (comma-separated)")
    args = p.parse_args()
    {"fp": fp, "judge": judge, "power": power, "table": table}[args.what](args)


if __name__ == "__main__":
    main()
