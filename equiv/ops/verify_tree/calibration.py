"""Calibration of the tree judge's statistics: false positives and power, from host draws.

Plan. Every lossless tree verifier gives the continued text the same law -- the target's
sequence law -- so the statistics' null distribution does not depend on which lossless verifier
ran: ``host_run(cases, seed)`` draws each case's texts on the host straight from the exact law
(``judge.continued`` with nothing emitted), feeds them to the judge's statistical tests at the
gate's family-wise alpha, and says which checks failed. Over many seeds that is the false-positive
rate of the statistical stage for every built-in at once (the exact checks cannot fail a correct
verifier). ``host_run(..., bias=kind, delta=d)`` draws every token instead from a law at total
variation ``d`` from the target's (``BIASES``): ``head`` moves ``d`` of mass from the top token
to the second, ``tail`` mixes ``d`` of mass uniformly over 4096 fixed tokens of each law. The
share of seeds that fail is the power at ``d``. scripts/verify_tree_calibration.py prints the
tables; docs/verify_tree.md records them.
"""
from __future__ import annotations

import functools

import numpy as np

from equiv.ops.verify.recipes import cdf_draw
from equiv.ops.verify_tree.judge import Case, Findings, Stats, continued, statistical_checks, statistics_of_texts
from equiv.ops.verify_tree.recipes import TreeRecipe

BIASES = ("head", "tail")
_SALT = 7027


@functools.lru_cache(maxsize=16)
def _biased_cdf(recipe, bias: str, delta: float) -> np.ndarray:
    m = recipe.model()
    p = m.target.copy()
    K, V = p.shape
    if bias == "head":
        order = np.argsort(-p, axis=1)[:, :2]
        rows = np.arange(K)
        d = np.minimum(delta, p[rows, order[:, 0]])
        p[rows, order[:, 0]] -= d
        p[rows, order[:, 1]] += d
    elif bias == "tail":
        rng = np.random.default_rng([recipe.seed, _SALT, K])
        spread = np.zeros_like(p)
        for k in range(K):
            spread[k, rng.choice(V, size=min(4096, V), replace=False)] = 1.0 / min(4096, V)
        p = (1 - delta) * p + delta * spread
    else:
        raise ValueError(f"bias={bias!r}: one of {BIASES}")
    return np.cumsum(p / p.sum(1, keepdims=True), axis=1)


def host_run(cases, seed: int, bias: str | None = None, delta: float = 0.0) -> tuple:
    """``(failed check names, efficiency-free stats)`` of the judge's statistical tests on texts
    drawn on the host for ``cases`` (module docstring)."""
    found, stats = Findings("host", "cpu", "host"), Stats()
    rng = np.random.default_rng([seed, _SALT])
    for case in cases:
        r = case.recipe
        L = r.trees().max_depth + 1
        outs = np.zeros((case.calls, r.batch, L), dtype=np.int64)      # every call's rows
        k = np.full((case.calls, r.batch), -1, dtype=np.int64)
        draw = None
        if bias is not None:
            cdf = _biased_cdf(r, bias, float(delta))

            def draw(law, n, g, cdf=cdf):
                return cdf_draw(cdf[law], g.random(n))
        statistics_of_texts(case, *continued(r, k, outs, rng, draw), stats, rng)
    checks = statistical_checks(found, stats, None)
    failed = tuple(sorted({c.name for c in checks if not c.passed} | set(found.first)))
    return failed


def false_positives(cases_of_seed, seeds) -> dict:
    """``{"runs", "failures": [(seed, checks)]}`` over ``seeds``."""
    failures = []
    for s in seeds:
        got = host_run(cases_of_seed(s), s)
        if got:
            failures.append((int(s), list(got)))
    return {"runs": len(list(seeds)), "failures": failures}


def power(cases, deltas, seeds, biases=BIASES) -> list:
    """One row per (bias, delta): the share of ``seeds`` whose host texts fail the statistics."""
    rows = []
    for bias in biases:
        for d in deltas:
            hits = sum(bool(host_run(cases, s, bias, d)) for s in seeds)
            rows.append({"bias": bias, "tv": d, "detected": hits / len(seeds), "seeds": len(seeds),
                         "rows": sum(c.recipe.batch for c in cases)})
    return rows


def power_cases(vocab: int = 129280, batch: int = 2000, seed: int = 0) -> list:
    """The power table's cases: one ``topk`` case at ``vocab`` (host draws need no ``B x N x V``
    tensor, so its rows are a GPU plan's, not the CPU gate's 8)."""
    r = TreeRecipe(family="realistic", seed=seed, batch=batch, vocab=vocab, nodes=6, depth=2, fanout=3)
    return [Case(r, 1, seed, statistical=True)]
