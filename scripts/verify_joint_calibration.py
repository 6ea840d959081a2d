"""Calibrate the verify judge's new checks (issue 34) on the CPU: false positives and power.

Plan (each part prints JSON rows as it goes; ``--out FILE`` keeps them):

1. ``null``: for each of ``--seeds`` plan seeds, the quick plan's ``joint exact`` case and its
   ``independence`` case (both drawn from the space for that seed: plans.py) are judged by the
   new checks (``independence``, ``block_law``; ``--whole``: by the whole judge, every check,
   ~3 s a run) on the outputs of a correct verifier, seed ``s`` taking verifier
   ``s % 3`` of ``torch_sampler``, ``block_verification`` (lossless, not the token law) and
   ``correct_other_stream`` (tests/candidates/verify_hostile.py: another random stream); a run
   fails when any check fails. ``--draws law``: the joint case's 2**17 rows are host draws of
   the exact token-level law (``law_draws.LawSampler``, ~10x cheaper than calling a verifier on
   a loaded 2-core CPU); ``--draws product``: the joint case's continued blocks are drawn straight
   from the product law ``p_0 x ... x p_n``, which is what any lossless verifier's continued
   rows are by definition (so the level measured is the block_law test's own); the independence
   case is in every mode the verifiers' own outputs. ``--draws plan``: every statistical case of
   the seed's plan (the wide, marginal, deep and family slots too), drawn from the exact
   token-level law on the host, and the whole judge (every check, the score tests included). The verifiers are called in this process on the host (their
   exact outputs: these are small inputs, V <= 300), which is what makes 1000+ seeds cheap.
2. ``tv``: the emitted-text total variation of each lossy block verifier
   (``verify_hostile.LOSSY``) on each power recipe, by Monte Carlo on ``--tv-rows`` blocks
   against the exact product law (the plug-in bias is shown by the correct sampler's row).
3. ``power``: for each lossy kind and each ``--tv``, the verifier taking its wrong path on a share
   ``tv / TV_kind`` of the rows (``verify_hostile.lossy``: emitted-text TV exactly ``tv``),
   ``--power-runs`` runs over the power recipes (the plan's joint-exact shapes: V = 3, n = 4 and
   V = 2, n = 6 and n = 4), each judged as in 1; the share of runs that fail (the gate's power is
   at least this: it fails when any of its checks fails).

    PYTHONPATH=. python3 scripts/verify_joint_calibration.py --seeds 1000 --power-runs 100
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "candidates"))

import verify_hostile  # noqa: E402  (a test candidate module, found by path)

from equiv.ops.verify.block_law import block_tests, sequence_tests  # noqa: E402
from equiv.ops.verify.draws import Draws  # noqa: E402
from equiv.ops.verify.independence import eligible, independence_tests  # noqa: E402
from equiv.ops.verify.judge import Case, judge_draws  # noqa: E402
from equiv.ops.verify.law_draws import LawSampler  # noqa: E402
from equiv.ops.verify.lossless import continued  # noqa: E402
from equiv.ops.verify.paths import block_verification, torch_sampler  # noqa: E402
from equiv.ops.verify.plans import statistical_cases  # noqa: E402
from equiv.ops.verify.recipes import VerifyRecipe, cdf_draw  # noqa: E402

NULL = (("torch_sampler", torch_sampler), ("block_verification", block_verification),
        ("correct_other_stream", verify_hostile.correct_other_stream))
LAW = LawSampler(None, 0.0)
POWER_RECIPES = tuple(VerifyRecipe(family="realistic", seed=11, batch=2 ** 17 + 77, n=n, vocab=v, problems=1,
                                   noise=noise, drafts="sampled", part=1)
                      for n, v, noise in ((4, 3, 0.55), (6, 2, 0.55), (4, 2, 0.45)))


def outputs(fn, case: Case, seed0: int) -> Draws:
    """``case.calls`` calls with seeds from ``seed0``, the first repeated as the replay; a host
    law sampler (``law_draws.LawSampler``) draws instead of being called."""
    if getattr(fn, "on_host", False):
        outs = fn.draws(case.recipe, list(range(seed0, seed0 + case.calls)))
        seeds = tuple(range(seed0, seed0 + case.calls)) + (seed0,)
        return Draws(str(case.recipe), seeds, np.concatenate([outs, outs[:1]]))
    d, q, p = case.recipe.build("cpu")
    outs = [fn(d, q, p, torch.Generator().manual_seed(seed0 + c)).numpy() for c in range(case.calls)]
    outs.append(outs[0])
    seeds = tuple(range(seed0, seed0 + case.calls)) + (seed0,)
    return Draws(str(case.recipe), seeds, np.stack(outs))


def failed_checks(fn, cases, seed0: int, seed: int, whole: bool = False, law_draws=False) -> list:
    """The failed checks of one run: the new checks alone (``independence``, ``block_law``: fast),
    or with ``whole`` the whole judge (every check; ~3 s a run on the joint case). ``law_draws``:
    the joint case's outputs are host draws of the exact law (``LAW``), not the verifier's;
    ``"all"``: every statistical case's."""
    # a whole plan's laws (V up to 262144) are kept by the sampler: a fresh one per run, or a
    # thousand seeds' laws pile up (two processes ran out of 24 GB after 100-200 seeds)
    law = LawSampler(None, 0.0) if law_draws == "all" else LAW

    def drawer(c):
        return law if (law_draws == "all" and c.statistical) or (law_draws and c.purpose == "joint exact") else fn

    drawn = [outputs(drawer(c), c, seed0 + 100 * i) for i, c in enumerate(cases)]
    if whole:
        v = judge_draws(cases, drawn, spec="calibration", device="cpu", seed=seed)
        return [c.name for c in v.failed]
    pairs = list(zip(cases, drawn))
    out = []
    alike = [(c, d) for c, d in pairs if eligible(c, d)]
    if alike and any(t["failed"] for _, t in independence_tests(alike)):
        out.append("independence")
    stat = [(c, d) for c, d in pairs if c.statistical]
    if stat and any(t["failed"] for _, t in block_tests(stat, seed)):
        out.append("block_law")
    return out


def product_failures(case: Case, seed: int) -> list:
    """The block_law tests on ``case.recipe.batch`` blocks drawn straight from the product law
    ``p_0 x ... x p_n``: what every lossless verifier's continued rows are, by definition, so the
    level measured is the test's own whatever the verifier (``--draws product``)."""
    r = case.recipe
    rng = np.random.default_rng([seed, 0x9D])
    cdf = np.cumsum(r.make_problems().target[0].astype(np.float64), axis=1)
    seq = np.stack([cdf_draw(cdf[j], rng.random(r.batch)) for j in range(r.n + 1)], 1)
    level = np.broadcast_to(np.arange(r.n + 1), seq.shape)
    return ["block_law"] if any(t["failed"] for _, t in sequence_tests([(case, seq, level)])) else []


def block_tv(fn, recipe, rows: int, seed: int = 0) -> float:
    r = recipe.with_(batch=rows)
    d, q, p = r.build("cpu")
    out = fn(d, q, p, torch.Generator().manual_seed(seed)).numpy()[None]
    seq, _ = continued(r, out, np.random.default_rng(seed))
    laws = r.make_problems().target[0].astype(np.float64)
    laws = laws / laws.sum(1, keepdims=True)
    whole = laws[0]
    for j in range(1, r.n + 1):
        whole = np.outer(whole, laws[j]).ravel()
    whole = whole.reshape([r.vocab] * (r.n + 1)).transpose(list(range(r.n, -1, -1))).ravel()
    codes = (seq * (r.vocab ** np.arange(r.n + 1))).sum(1)
    return float(0.5 * np.abs(np.bincount(codes, minlength=whole.size) / codes.size - whole).sum())


def _row(label, fails, runs, extra=None):
    from scipy.stats import beta

    k = sum(bool(f) for f in fails)
    upper = float(beta.ppf(0.95, k + 1, runs - k)) if k < runs else 1.0
    lower = float(beta.ppf(0.05, k, runs - k + 1)) if k > 0 else 0.0
    return {**label, "runs": runs, "failed_runs": k, "rate": k / max(runs, 1), "upper95": upper,
            "lower95": lower, "checks_failed": sorted({c for f in fails for c in f}), **(extra or {})}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--power-runs", type=int, default=100)
    ap.add_argument("--tv", default="0.02,0.05,0.1")
    ap.add_argument("--tv-rows", type=int, default=2 ** 22)
    ap.add_argument("--parts", default="null,tv,power")
    ap.add_argument("--out", default=None)
    ap.add_argument("--whole", action="store_true", help="judge every check, not only the new ones")
    ap.add_argument("--draws", choices=("verifier", "law", "product", "plan"), default="verifier",
                    help="null part: law draws the joint case from the token-level law on the host; product "
                         "draws its continued blocks from the product law (fastest); plan judges the whole "
                         "statistical plan, every case drawn from the law on the host (module docstring)")
    ap.add_argument("--kinds", default=",".join(verify_hostile.LOSSY), help="the lossy kinds of the power part")
    ap.add_argument("--tv-from", default=None, help="a JSON-lines file of an earlier run's tv rows, read instead")
    args = ap.parse_args(argv)
    rows = []

    def emit(row):
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out, "a") as fh:
                fh.write(json.dumps(row) + "\n")

    parts = args.parts.split(",")
    if "null" in parts and args.seeds:
        t0, fails, by = time.perf_counter(), [], {name: [] for name, _ in NULL}
        for s in range(args.first_seed, args.first_seed + args.seeds):
            cases = [c for c in statistical_cases("quick", seed=s)
                     if args.draws == "plan" or c.purpose in ("joint exact", "independence")]
            name, fn = NULL[s % len(NULL)]
            if args.draws == "product":
                joint = [c for c in cases if c.purpose == "joint exact"]
                f = failed_checks(fn, [c for c in cases if c not in joint], 10 ** 6 * (s + 1), s)
                f += product_failures(joint[0], s)
            else:
                f = failed_checks(fn, cases, 10 ** 6 * (s + 1), s, args.whole or args.draws == "plan",
                                  "all" if args.draws == "plan" else args.draws == "law")
            fails.append(f)
            by[name].append(f)
            if (s - args.first_seed + 1) % 25 == 0:
                print(json.dumps({"progress": s - args.first_seed + 1, "failed_so_far": sum(bool(x) for x in fails),
                                  "seconds": round(time.perf_counter() - t0, 1)}), file=sys.stderr, flush=True)
            if f:
                print(json.dumps({"seed": s, "verifier": name, "failed": f}), flush=True)
        emit(_row({"part": "null", "verifiers": [n for n, _ in NULL], "first_seed": args.first_seed,
                   "joint case drawn by": {"law": "the token-level law on the host", "product": "the product law (continued blocks)",
                                           "plan": "the token-level law on the host (every statistical case of the plan, the whole judge)"}.get(args.draws, "the verifier")}, fails,
                  len(fails), {"seconds": round(time.perf_counter() - t0, 1),
                               "by_verifier": {n: sum(bool(x) for x in v) for n, v in by.items()},
                               "runs_by_verifier": {n: len(v) for n, v in by.items()}}))
    full_tv = {}
    if args.tv_from:
        with open(args.tv_from) as fh:
            for line in fh:
                row = json.loads(line)
                if row.get("part") == "tv":
                    full_tv[(row["recipe"], row["verifier"])] = row["tv_monte_carlo"]
    elif "tv" in parts or "power" in parts:
        for r in POWER_RECIPES:
            for name, fn in (("correct_torch", verify_hostile.correct_torch), *verify_hostile.LOSSY.items()):
                got = block_tv(fn if name == "correct_torch" else verify_hostile.lossy(name, 1.0), r, args.tv_rows)
                full_tv[(str(r), name)] = got
                emit({"part": "tv", "recipe": str(r), "verifier": name, "share": 1.0, "tv_monte_carlo": round(got, 4),
                      "rows": args.tv_rows})
    if "power" in parts and args.power_runs:
        for kind in args.kinds.split(","):
            for tv in [float(t) for t in args.tv.split(",")]:
                t0, fails = time.perf_counter(), []
                # the recipes where the kind reaches tv at all (its whole-share TV, less the plug-in bias)
                reach = {str(r): full_tv[(str(r), kind)] - full_tv[(str(r), "correct_torch")] for r in POWER_RECIPES}
                usable = [r for r in POWER_RECIPES if reach[str(r)] >= tv]
                if not usable:
                    emit({"part": "power", "kind": kind, "tv": tv, "runs": 0,
                          "note": f"no power recipe reaches this TV (largest {max(reach.values()):.4f})"})
                    continue
                for run in range(args.power_runs):
                    r = usable[run % len(usable)]
                    share = tv / reach[str(r)]
                    case = Case(r, 1, 0, statistical=True, purpose="joint exact")
                    fails.append(failed_checks(verify_hostile.lossy(kind, share), [case], 7 * 10 ** 6 + run, run, args.whole))
                emit(_row({"part": "power", "kind": kind, "tv": tv}, fails, len(fails),
                          {"seconds": round(time.perf_counter() - t0, 1), "recipes": [str(r) for r in usable]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
