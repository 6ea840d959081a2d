"""Repeats among tail draws: the test that sees a law squeezed onto a few tail tokens.

Plan. Binned tests (PIT bins, rank cells) see how much mass lies in each bin, not how it is
spread over the tokens inside a bin: a sampler whose draw can only land on a few hundred of the
~129k tail tokens (a cumulative sum in bfloat16 stalls, so most tail tokens get no mass and a
few get a lot) moves a total variation of 0.06-0.42 inside bins that barely change. What such a
law changes is how often two draws of the same law hit the same tail token.

For each *level* (one exact law ``L`` and the ``N`` draws the judge has of it), the tail is the
tokens with ``L(x) < 1 / (TAIL_SPREAD * N)``: each expects at most 1/64 of a draw, so a repeat
there is rare under ``L``. The statistic is the number of repeated pairs among tail draws,
``C = sum_x n_x (n_x - 1) / 2`` over tail tokens ``x``, summed over levels. Its exact mean under
``L`` is ``sum_levels C(N, 2) s2`` with ``s2 = sum_tail L(x)^2``; its variance exceeds the mean
by at most ``N (N - 1) (N - 2) s3`` (``s3 = sum_tail L(x)^3``, under 2/64 of the mean by the
choice of tail). ``C`` is a sum of rare, weakly dependent indicators, so it is close to Poisson
(Chen-Stein); the test takes ``P(Poisson(mu + extra) >= C)`` with that excess added to the mean,
which is conservative. A test fails only when significant AND ``C > TAIL_RATIO_FLOOR * (mu +
extra)`` (the effect-size floor: at least twice the repeats the law allows). One pooled test and
one per group, Bonferroni over them at the alpha the judge gives (judge.py: a quarter of
``FAMILY_ALPHA``).
"""
from __future__ import annotations

import numpy as np

TAIL_SPREAD = 64
TAIL_RATIO_FLOOR = 2.0


def level_repeats(sorted_laws, level, rank) -> list:
    """Per level of ``level`` (draw ``i`` has law ``sorted_laws[level[i]]``, sorted by decreasing
    probability, and rank ``rank[i]`` in it): ``(observed, mean, extra, tail_draws)``."""
    out = []
    for lv in np.unique(level):
        ranks = rank[level == lv]
        n = ranks.size
        law = sorted_laws[lv]
        first_tail = int(np.count_nonzero(law >= 1.0 / (TAIL_SPREAD * n)))
        tail = law[first_tail:]
        drawn = ranks[ranks >= first_tail]
        _, counts = np.unique(drawn, return_counts=True)
        observed = float((counts * (counts - 1) / 2).sum())
        mean = n * (n - 1) / 2 * float((tail ** 2).sum())
        extra = n * (n - 1) * (n - 2) * float((tail ** 3).sum())
        out.append((observed, mean, extra, int(drawn.size)))
    return out


def repeat_tests(records: dict, alpha: float, floor: float = TAIL_RATIO_FLOOR) -> list:
    """``records[group] = [(observed, mean, extra, tail_draws), ...]``: one test per group and a
    pooled one, Bonferroni over them; each a dict with ``failed``."""
    from scipy.stats import poisson

    groups = {"pooled": [r for rs in records.values() for r in rs], **records}
    raw = []
    for label, rs in groups.items():
        if not rs or len(groups) == 2 and label != "pooled":
            continue                                      # one group: the pooled test is it
        obs, mean, extra, draws = (sum(r[i] for r in rs) for i in range(4))
        if draws == 0:
            continue
        allowed = mean + extra
        p = float(poisson.sf(obs - 1, allowed)) if obs > 0 else 1.0
        raw.append((label, obs, allowed, draws, p))
    level = alpha / max(len(raw), 1)
    return [{"group": g, "repeats": o, "allowed": a, "tail_draws": d, "p_value": p, "level": level,
             "ratio": o / a if a > 0 else float("inf") if o else 0.0,
             "failed": p < level and o > floor * a} for g, o, a, d, p in raw]
