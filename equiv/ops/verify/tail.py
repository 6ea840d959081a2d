"""Repeats among tail draws: the test that sees a law squeezed onto a few tail tokens.

Plan. Binned tests (PIT bins, rank cells) see how much mass lies in each bin, not how it is
spread over the tokens inside a bin: a sampler whose draw can only land on a few hundred of the
~129k tail tokens (a cumulative sum in bfloat16 stalls, so most tail tokens get no mass and a
few get a lot) moves a total variation of 0.06-0.42 inside bins that barely change. What such a
law changes is how often two draws of the same law hit the same tail token.

For each *level* (one exact law ``L`` and the ``N`` draws the judge has of it), the tail is the
tokens with ``L(x) < 1 / (TAIL_SPREAD * N)``: each expects at most 1/64 of a draw, so a repeat
there is rare under ``L``. The statistic is the number of *repeated tail tokens*, ``R = #{x in
the tail : n_x >= 2}``, summed over levels. Each token is drawn twice or more with probability at
most ``C(N, 2) L(x)^2``, so ``E[R] <= mu = sum_levels C(N, 2) s2`` (``s2 = sum_tail L(x)^2``).
The indicators ``1[n_x >= 2]`` are non-decreasing functions of disjoint coordinates of a
multinomial, which are negatively associated (Joag-Dev and Proschan), and the levels are
independent, so ``R`` obeys the Chernoff bound of a sum of independent indicators of mean at most
``mu``: ``P(R >= r) <= exp(-mu) (e mu / r)^r`` for ``r > mu``. That is the test's p-value: a
bound that holds at every count, clumps included. (Before 2026-12-05 the statistic was the
number of repeated *pairs* with a Poisson p-value: one tail token drawn three times among four
tail draws made 3 pairs where 0.012 were allowed, p = 3e-7, and failed a correct run of the
whole plan at seed 581; a triple's probability is ``C(N, 3) L(x)^3``, far above what a Poisson
law of mean 0.012 gives three events.) A test fails only when significant AND ``R >
TAIL_RATIO_FLOOR * mu`` (the effect-size floor: at least twice the repeated tokens the law
allows). One pooled test and one per group, Bonferroni over them at the alpha the judge gives
(judge.py: a fifth of ``FAMILY_ALPHA``).
"""
from __future__ import annotations

import numpy as np

TAIL_SPREAD = 64
TAIL_RATIO_FLOOR = 2.0


def level_repeats(sorted_laws, level, rank) -> list:
    """Per level of ``level`` (draw ``i`` has law ``sorted_laws[level[i]]``, sorted by decreasing
    probability, and rank ``rank[i]`` in it): ``(repeated tail tokens, their mean's bound mu,
    0.0, tail_draws)`` (the third field, once a variance excess, is kept for the records' shape)."""
    out = []
    for lv in np.unique(level):
        ranks = rank[level == lv]
        n = ranks.size
        law = sorted_laws[lv]
        first_tail = int(np.count_nonzero(law >= 1.0 / (TAIL_SPREAD * n)))
        tail = law[first_tail:]
        drawn = ranks[ranks >= first_tail]
        _, counts = np.unique(drawn, return_counts=True)
        observed = float(np.count_nonzero(counts >= 2))
        mean = n * (n - 1) / 2 * float((tail ** 2).sum())
        out.append((observed, mean, 0.0, int(drawn.size)))
    return out


def chernoff_p(observed: float, mean: float) -> float:
    """``P(R >= observed)`` bounded for a sum of negatively associated indicators of mean at
    most ``mean``: ``exp(-mean) (e mean / observed)^observed`` above the mean, else 1."""
    if observed <= mean:
        return 1.0
    if mean <= 0:
        return 0.0
    return float(min(1.0, np.exp(observed - mean + observed * np.log(mean / observed))))


def repeat_tests(records: dict, alpha: float, floor: float = TAIL_RATIO_FLOOR) -> list:
    """``records[group] = [(observed, mean, extra, tail_draws), ...]``: one test per group and a
    pooled one, Bonferroni over them; each a dict with ``failed``."""
    groups = {"pooled": [r for rs in records.values() for r in rs], **records}
    raw = []
    for label, rs in groups.items():
        if not rs or len(groups) == 2 and label != "pooled":
            continue                                      # one group: the pooled test is it
        obs, mean, extra, draws = (sum(r[i] for r in rs) for i in range(4))
        if draws == 0:
            continue
        allowed = mean + extra
        p = chernoff_p(obs, allowed)
        raw.append((label, obs, allowed, draws, p))
    level = alpha / max(len(raw), 1)
    return [{"group": g, "repeats": o, "allowed": a, "tail_draws": d, "p_value": p, "level": level,
             "ratio": o / a if a > 0 else float("inf") if o else 0.0,
             "failed": p < level and o > floor * a} for g, o, a, d, p in raw]
