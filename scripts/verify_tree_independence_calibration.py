"""False positives of the tree verifier's ``independence`` check over seeds (docs/verify_tree.md).

Plan. Seed ``s`` takes verifier ``s % 5`` of the built-ins that draw (``target_only``, ``eagle_onehot``,
``specinfer``, ``recursive_rejection``, each under its declared construction: ``eagle_onehot``
declares ``any`` and so gets the three cases) and the test candidate ``numpy_stream_permuted``
(tests/candidates/tree_verifiers_random.py: another random stream, rows permuted); the gate's
independence cases for seed ``s`` (equiv/ops/verify_tree/independence.py: 1000 rows of one tree,
generator seeds ``s``, ``s+1`` and the replay) are called for real, in this process, on the CPU,
and judged by the whole judge (``judge_draws``: contract, support, independence). A run fails when
any check fails. Besides the verdicts each sign test's p-value is kept, so the rejection rate at a
nominal 0.05 per test is printed too (the exact test's level at a size where it can be seen).

    PYTHONPATH=. python3 scripts/verify_tree_independence_calibration.py --seeds 1000 --out fp.jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "candidates"))

import torch  # noqa: E402

import tree_verifiers_random as R  # noqa: E402  (a test candidate module, found by path)

from equiv.ops.verify.independence import independence_tests  # noqa: E402
from equiv.ops.verify_tree import paths  # noqa: E402
from equiv.ops.verify_tree.calls import draw  # noqa: E402
from equiv.ops.verify_tree.draws import TreeDraws  # noqa: E402
from equiv.ops.verify_tree.independence import independence_cases  # noqa: E402
from equiv.ops.verify_tree.judge import judge_draws, rows_alike  # noqa: E402

VERIFIERS = (("target_only", paths.target_only, "topk"), ("eagle_onehot", paths.eagle_onehot, "any"),
             ("specinfer", paths.specinfer, "iid"), ("recursive_rejection", paths.recursive_rejection, "wor"),
             ("numpy_stream_permuted", R.numpy_stream_permuted, "topk"))


def one_run(name, fn, drafts, seed) -> dict:
    cases = independence_cases(drafts, seed)
    drawn = []
    for c in cases:
        got = draw(fn, "cpu", {"recipe": str(c.recipe), "seeds": list(c.seeds), "guarded": False})
        drawn.append(TreeDraws(str(c.recipe), c.seeds, got["paths"], got["outputs"], got["problem"], got["cause"]))
    v = judge_draws(cases, drawn, spec=name, device="cpu", seed=seed, drafts=drafts)
    (ind,) = [c for c in v.checks if c.name == "independence"]
    tests = independence_tests([(c, d) for c, d in zip(cases, drawn) if rows_alike(c, d)])
    return {"verifier": name, "drafts": drafts, "seed": seed, "passed": v.passed,
            "failed": [c.name for c in v.failed], "independence": ind.detail,
            "tests": [(c.recipe.drafts, t["label"], t["units"], t["more"], t["fewer"], t["p_value"]) for c, t in tests]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)            # B = 1000, V = 4: threads only fight over a shared CPU (5x slower)
    t0, runs, failed, ps = time.perf_counter(), 0, [], []
    for s in range(args.start, args.start + args.seeds):
        for name, fn, drafts in (VERIFIERS[s % len(VERIFIERS)],):
            rec = one_run(name, fn, drafts, s)
            runs += 1
            ps += [t[-1] for t in rec["tests"]]
            if not rec["passed"]:
                failed.append((name, s, rec["failed"]))
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps(rec) + "\n")
        if (s - args.start + 1) % 50 == 0:
            print(f"seeds {args.start}..{s}: {len(failed)} failed runs / {runs} ({time.perf_counter() - t0:.0f} s) "
                  f"{failed[:5]}", flush=True)
    print(f"done: {len(failed)} failed runs / {runs} ({time.perf_counter() - t0:.0f} s); sign tests with "
          f"p < 0.05: {sum(p < 0.05 for p in ps)} / {len(ps)}, p < 0.01: {sum(p < 0.01 for p in ps)} / {len(ps)}")


if __name__ == "__main__":
    main()
