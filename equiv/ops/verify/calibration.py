"""How often the verify judge fails a correct sampler, and how often it catches a biased one.

Plan. A *run* is the statistical stage of the gate (``plans.statistical_cases(budget, law=law)``)
judged once under ``law`` (``lossless`` by default; its cases draw every row's drafts from the
draft law once per recipe, so runs share drafts and differ in generator seeds), with its own
generator seeds: run ``r`` calls each case with seeds ``seed + r * 10**6 + c``
(the recipes stay the same: the exact laws are computed once). For speed every case is built
once per chunk of runs and called for all their seeds in one probe (``calls.draw``); each run's
outputs are then judged alone (``judge.judge_draws``), in a pool of processes.

- ``false positives``: runs of ``torch_sampler`` (a correct sampler); a run fails when any check
  fails. The family-wise alpha of a run is ``judge.FAMILY_ALPHA = 1e-4``; the floors make the real
  rate lower still.
- ``power``: runs of ``biased_sampler(shape, tv)``: ``torch_sampler`` whose drawn token (the
  recovered token at the first rejection, or the bonus) comes from ``(1 - e) L + e A`` instead of
  its exact law ``L``, where ``A`` is an alternative law and ``e = tv / TV(A, L)``, so the drawn
  token's law is exactly ``tv`` away from ``L`` in total variation (less where ``TV(A, L) < tv``:
  a near-point-mass law; the table reports the mean TV actually reached). Shapes of ``A``:
  ``sharper`` (``L**2``: mass moves to the head, a temperature under 1), ``flatter``
  (``sqrt(L)``: mass moves to the tail) and ``swap_top2`` (the two most likely tokens trade
  probabilities).

``python -m equiv.ops.verify.calibration --device cuda`` prints the table docs/verify.md quotes.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from multiprocessing import get_context

import numpy as np
import torch

from equiv.atomic import atomic_write
from equiv.devices import resolve_device
from equiv.ops.verify.calls import draw
from equiv.ops.verify.draws import Draws
from equiv.ops.verify.judge import judge_draws
from equiv.ops.verify.laws import _law, _stops
from equiv.ops.verify.paths import acceptance_ratio, drawn_law, emit, first_rejection, inverse_cdf, torch_sampler
from equiv.ops.verify.plans import statistical_cases
from equiv.reference.verify import residual
from equiv.stats.values import scipy_stats
from equiv.validation import check_choice

SHAPES = ("sharper", "flatter", "swap_top2")
_RUN_STRIDE = 10 ** 6


def _alternative(law, shape: str):
    """``A`` for rows of a normalised float64 ``law`` (torch or NumPy, same code)."""
    if shape == "sharper":
        alt = law * law
    elif shape == "flatter":
        alt = law ** 0.5
    elif shape == "swap_top2":                   # only where the second token has mass: the
        numpy = isinstance(law, np.ndarray)          # support must stay the law's
        top = (np.argsort(-law, axis=1, kind="stable")[:, :2] if numpy
               else law.topk(2, dim=1).indices)
        take = (lambda t, i: np.take_along_axis(t, i, 1)) if numpy else (lambda t, i: t.gather(1, i))
        a, b = take(law, top[:, :1]), take(law, top[:, 1:])
        where = np.where if numpy else __import__("torch").where
        new_a, new_b = where(b > 0, b, a), where(b > 0, a, b)
        alt = law.copy() if numpy else law.clone()
        if numpy:
            np.put_along_axis(alt, top[:, :1], new_a, 1)
            np.put_along_axis(alt, top[:, 1:], new_b, 1)
        else:
            alt.scatter_(1, top[:, :1], new_a).scatter_(1, top[:, 1:], new_b)
        return alt
    else:
        raise ValueError(f"shape={shape!r} is unknown: choose from {', '.join(SHAPES)}")
    return alt / alt.sum(1, keepdims=True) if isinstance(alt, np.ndarray) else alt / alt.sum(1, keepdim=True)


AT = ("drawn", "emitted")


def biased_sampler(shape: str, tv: float, at: str = "drawn"):
    """A verifier whose drawn tokens are biased by ``tv`` in total variation (module docstring):
    ``at="drawn"``: the drawn token's law is ``tv`` from its exact law; ``at="emitted"``: the
    bias of the drawn token is scaled so that every position the verifier reaches emits a law
    ``tv`` from the target's ``p_j`` (averaged over drafts drawn from ``q``: the law of the
    position is ``min(p, q) + Z ((1 - e) R + e A)`` with ``Z = sum max(0, p - q)``, so
    ``e = tv / (Z TV(A, R))``; ``Z = 1`` at the bonus) -- what the losslessness judge sees."""

    _alternative(np.ones((1, 2)) / 2, shape)                  # an unknown shape fails here
    check_choice("at", at, AT)

    def biased(d, q, p, g):
        u = torch.rand(d.shape, generator=g, device=p.device)
        u_draw = torch.rand((d.shape[0], 1), generator=g, device=p.device, dtype=torch.float64)
        stop = first_rejection(acceptance_ratio(d, q, p), u)
        law = drawn_law(d, q, p, stop).double()
        mass = law.sum(1, keepdim=True)
        law = law / mass
        alt = _alternative(law, shape)
        dist = 0.5 * (alt - law).abs().sum(1, keepdim=True)
        if at == "emitted":                       # the residual's share of the position's law
            rows = torch.arange(d.shape[0], device=p.device)
            dist = dist * mass / p[rows, stop].double().sum(1, keepdim=True)
        e = torch.where(dist > 0, (tv / dist).clamp(max=1.0), torch.zeros_like(dist))
        return emit(d, stop, inverse_cdf((1 - e) * law + e * alt, u_draw))
    biased.__name__ = f"biased_{shape}_{tv:g}" + ("_emitted" if at == "emitted" else "")
    return biased


def reached_tv(cases, drawn, shape: str, tv: float, at: str = "drawn") -> float:
    """Mean TV between the biased and the exact law over the tokens the runs drew (``at="drawn"``:
    of the drawn token; ``"emitted"``: of the position's law, ``Z`` times the drawn token's)."""
    total = weight = 0.0
    for case, dr in zip(cases, drawn):
        r = case.recipe
        laws, share = _drawn_laws(r)
        drawable = laws.sum(1) > 0                           # residuals never drawn have no law
        dist = np.zeros(laws.shape[0])
        dist[drawable] = 0.5 * np.abs(_alternative(laws[drawable], shape) - laws[drawable]).sum(1)
        if at == "emitted":
            dist = dist * share
        stop = _stops(r, dr.outputs)
        level = (np.broadcast_to(r.rows(), stop.shape) * (r.n + 1) + stop).ravel()
        total += np.minimum(dist, tv)[level].sum()
        weight += level.size
    return total / max(weight, 1)


def _drawn_laws(recipe):
    """``(laws [L, V], share [L])``: each level's drawn law (the reference's, normalised) and its
    mass relative to ``p_j`` (``Z``, the residual's; 1 at the bonus)."""
    pr = recipe.make_problems()
    p = pr.target.astype(np.float64)
    share = np.ones(p.shape[:2])
    share[:, :-1] = residual(pr.tokens, pr.draft, pr.target).sum(-1) / p[:, :-1].sum(-1)
    return _law(recipe, True).drawn.reshape(-1, recipe.vocab), share.reshape(-1)


def _judge_run(args):
    cases, drawn, seed, law = args
    v = judge_draws(cases, drawn, spec="calibration", device="-", seed=seed, law=law)
    return [c.name for c in v.failed]


def run_calibration(fn, cases, runs: int, *, device: str, seed: int = 0, chunk: int = 50,
                    workers: int = 1, law: str = "lossless", guarded: bool = True) -> list:
    """The failed checks of each of ``runs`` runs of ``fn`` on ``cases`` (module docstring);
    ``guarded=False`` skips the guard bands (our own samplers: they write nothing)."""

    failures = []
    pool = get_context("fork").Pool(workers) if workers > 1 else None
    pending = []
    try:
        for lo in range(0, runs, chunk):
            span = range(lo, min(lo + chunk, runs))
            per_run = [[] for _ in span]
            for case in cases:
                # The replay (the last seed) is the contract's check, not the statistics': one
                # call per seed here, its first output stands in for the replay (our samplers).
                k = case.calls
                seeds = [s + (seed + r) * _RUN_STRIDE for r in span for s in case.seeds[:k]]
                got = _draw(fn, device, case.recipe, seeds, guarded)
                for i, r in enumerate(span):
                    outs = got["outputs"][i * k:(i + 1) * k]
                    problem = got["problem"] if len(outs) < k else None
                    again = case.replay and len(outs)
                    outs = np.concatenate([outs, outs[:1]]) if again else outs
                    mine = seeds[i * k:(i + 1) * k]
                    per_run[i].append(Draws(str(case.recipe), tuple(mine + mine[:1] if again else mine), outs,
                                            problem))
            jobs = [(cases, per_run[i], seed + r, law) for i, r in enumerate(span)]
            if pool:                              # judged while the next chunk draws
                pending.append(pool.map_async(_judge_run, jobs))
            else:
                failures += [_judge_run(j) for j in jobs]
        for p in pending:
            failures += p.get()
    finally:
        if pool:
            pool.close()
    return failures


def _row(label, failures, runs, extra=None) -> dict:
    beta = scipy_stats().beta
    k = sum(bool(f) for f in failures)
    upper = float(beta.ppf(0.95, k + 1, runs - k)) if k < runs else 1.0   # one-sided 95 % bounds
    lower = float(beta.ppf(0.05, k, runs - k + 1)) if k > 0 else 0.0      # (Clopper-Pearson)
    checks = sorted({c for f in failures for c in f})
    return {**label, "runs": runs, "failed_runs": k, "rate": k / runs, "upper95": upper,
            "lower95": lower, "checks_failed": checks, **(extra or {})}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m equiv.ops.verify.calibration", description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--runs", type=int, default=1000, help="runs of the correct sampler per budget")
    ap.add_argument("--null-budgets", default="quick,full")
    ap.add_argument("--power-budget", default="full")
    ap.add_argument("--power-runs", type=int, default=100)
    ap.add_argument("--tv", default="0.01,0.02,0.03")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--vocabs", default="129280,32000", help="power at each V (tv 0.02 only for all but the first)")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--law", default="lossless", help="lossless (default) or token (the docs' earlier rows)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    for flag, value, least in (("--runs", args.runs, 0), ("--power-runs", args.power_runs, 0),
                               ("--workers", args.workers, 1)):
        if value < least:
            ap.error(f"{flag}={value} is invalid: give {least} or more" + (" (0 skips that part)" if not least else ""))
    device = resolve_device(args.device)
    rows = []

    def timed(label, fn, cases, runs, extra=None):
        t0 = time.perf_counter()
        fails = run_calibration(fn, cases, runs, device=device, seed=args.seed, workers=args.workers, law=args.law)
        row = _row(label, fails, runs, {"seconds": round(time.perf_counter() - t0, 1), **(extra or {})})
        rows.append(row)
        print(json.dumps(row), flush=True)

    for budget in filter(None, args.null_budgets.split(",") if args.runs else ()):
        timed({"verifier": "torch_sampler", "budget": budget, "shape": "-", "tv": 0.0, "vocab": "plan"},
              torch_sampler, statistical_cases(budget, law=args.law), args.runs)
    vocabs = [int(v) for v in args.vocabs.split(",") if v] if args.power_runs else []
    for i, vocab in enumerate(vocabs):
        cases = [replace(c, recipe=c.recipe.with_(vocab=vocab)) for c in statistical_cases(args.power_budget, law=args.law)]
        for tv in [float(t) for t in args.tv.split(",")] if i == 0 else [0.02]:
            for shape in args.shapes.split(","):
                fn = biased_sampler(shape, tv)
                probe = run_draws_once(fn, cases, device)
                timed({"verifier": fn.__name__, "budget": args.power_budget, "shape": shape, "tv": tv,
                       "vocab": vocab}, fn, cases, args.power_runs,
                      {"reached_tv": round(reached_tv(cases, probe, shape, tv), 5)})
    if args.json:
        atomic_write(args.json, json.dumps({"device": device, "rows": rows}, indent=2) + "\n")
    return 0


def _draw(fn, device, recipe, seeds, guarded=True) -> dict:
    """``calls.draw``'s answer for ``fn`` on ``recipe``: a verifier called on ``device``, or a
    ``law_draws.LawSampler`` drawing its law on the host."""
    if getattr(fn, "on_host", False):
        return {"outputs": fn.draws(recipe, seeds), "problem": None}
    return draw(fn, device, {"recipe": str(recipe), "seeds": list(seeds), "guarded": guarded})


def run_draws_once(fn, cases, device):
    return [Draws(str(c.recipe), c.seeds, _draw(fn, device, c.recipe, c.seeds)["outputs"]) for c in cases]


if __name__ == "__main__":
    raise SystemExit(main())
