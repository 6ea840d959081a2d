"""The joint law of the emitted block: tested whole, not only position by position.

Plan. A lossy verifier can keep every position's marginal close to the target's and still move
mass between whole blocks (how often a run of drafts is kept together, what follows two accepted
drafts): the per-position tests (lossless.py) cannot see that, and the neighbouring-PIT ``joint``
test sees only pairs of neighbours in coarse bins. Each row is continued past its last emitted
token with fresh draws from the target (``lossless.continued``: this module's own generator),
so under a lossless verifier a row of a one-problem recipe is a draw of ``p_0 x ... x p_n``.

- *Exact at small V* (``exact_eligible``: drafts sampled per row, one problem, ``V**(n+1) <=
  space.EXACT_CELLS``; the plan's ``joint exact`` case: V = 2 or 3, n 4..7, 2**17+ rows): every
  continued block is one of ``V**(n+1)`` cells, tested against its exact probability
  (``equiv.stats.joint.table_test``), and every pair of positions' two-way margin
  (``margin_tables``): a deviation that lives only after two accepted drafts is a deviation of
  the whole table.
- *At any V* (every statistical lossless case): the *pair score*, per row
  ``T = sum_{j<k} (s_j(x_j) - m_j)(s_k(x_k) - m_k)`` with ``s_j = p_j`` the target score of
  lossless.py (its exact mean ``m_j`` and variance ``v_j`` known): under the product law the rows'
  ``T`` are independent with mean 0 and variance ``sum_{j<k} v_j v_k`` (the cross terms vanish),
  and ``|T| <= sum_{j<k} t_j t_k`` with ``t_j = max |s_j - m_j|``, so Bernstein's inequality over
  the rows gives a p-value at every sample size (as lossless.score_tests). It
  sees blocks whose positions lean to the head together (runs of drafts kept too often) or
  apart. Pooled over cases and per (family, purpose).

Family-wise error: ``BLOCK_ALPHA`` on top of ``judge.FAMILY_ALPHA`` (docs/verify.md), half to the
exact tables (half of that to the whole tables, half to the two-way margins), half to the pair
scores; Bonferroni inside each. A test fails when significant AND its effect passes a floor
(plug-in total variation of the table > ``TABLE_TVD_FLOOR``; for a pair score its shift over its
largest possible shift > lossless.SCORE_FLOOR).
"""
from __future__ import annotations

import numpy as np

from equiv.ops.verify import space
from equiv.ops.verify.lossless import SCORE_FLOOR, continued, layout_problem, score_table
from equiv.stats import bernstein_p
from equiv.stats.joint import margin_tables, table_test

BLOCK_ALPHA = 2e-5
TABLE_TVD_FLOOR = 0.002
_SALT = 0xB10C


def exact_eligible(recipe) -> bool:
    return (recipe.drafts == "sampled" and recipe.n_problems == 1
            and recipe.vocab ** (recipe.n + 1) <= space.EXACT_CELLS)


def sequences(case, draws, seed):
    """``(seq, level)`` of ``continued`` for the case's outputs (a generator of the case's own:
    the same whenever and wherever it is computed), or None where its layout is broken."""
    outs = case.judged(draws.outputs)
    if not draws.ok or not len(outs) or layout_problem(case.recipe, outs):
        return None
    rng = np.random.default_rng([seed, _SALT, case.seed])
    seq, level = continued(case.recipe, outs, rng)
    return seq, level


def block_tests(cases_draws, seed: int, alpha: float = BLOCK_ALPHA) -> list:
    """``[(case, test dict)]`` of the exact tables and the pair scores (module docstring)."""
    items = []
    for case, draws in cases_draws:
        got = sequences(case, draws, seed)
        if got is not None:
            items.append((case,) + got)
    return sequence_tests(items, alpha)


def sequence_tests(items, alpha: float = BLOCK_ALPHA) -> list:
    """The tests of ``block_tests`` on continued blocks ``items = [(case, seq [N, n+1], level
    [N, n+1])]`` (what a lossless verifier's rows become: under the null, draws of the product
    law; the calibration draws them so: scripts/verify_joint_calibration.py)."""
    tables, scores = [], {}
    for case, seq, level in items:
        r = case.recipe
        if exact_eligible(r):
            laws = r.make_problems().target[0].astype(np.float64)
            laws = laws / laws.sum(1, keepdims=True)
            codes = (seq * (r.vocab ** np.arange(r.n + 1))).sum(1)
            whole = laws[0]
            for j in range(1, r.n + 1):
                whole = np.outer(whole, laws[j]).ravel()           # code = sum x_j V**j: x_0 varies fastest
            whole = whole.reshape([r.vocab] * (r.n + 1)).transpose(list(range(r.n, -1, -1))).ravel()
            label = f"{r.family}:V={r.vocab},n={r.n}"
            t = table_test(f"{label}:whole block", codes, whole)
            if t is not None:
                tables.append((case, "whole", t))
            tables += [(case, "margins", m) for m in margin_tables(label, seq, laws)]
        if r.n >= 1:
            sc, mean, var, _ = score_table(r)
            dev = sc[0][level, seq].astype(np.float64) - mean[0][level]               # [rows, n+1]
            v = var[0][level]
            top = np.abs(sc[0].astype(np.float64) - mean[0][:, None]).max(1)[level]
            upper = np.triu_indices(r.n + 1, 1)
            row_sum = ((dev.sum(1) ** 2 - (dev ** 2).sum(1)) / 2)                  # sum_{j<k} dev_j dev_k
            row_bound = (top.sum(1) ** 2 - (top ** 2).sum(1)) / 2                  # |row_sum| <= this
            varsum = float((v.T @ v)[upper].sum())
            for g in ("pooled", f"{r.family}:{case.purpose or 'case'}"):
                acc = scores.setdefault(g, [0.0, 0.0, 0.0, 0.0, 0, case])
                acc[0] += float(row_sum.sum())
                acc[1] += varsum
                acc[2] = max(acc[2], float(row_bound.max()))
                acc[3] += float(row_bound.sum())
                acc[4] += int(dev.shape[0])
    out = []
    n_whole = sum(kind == "whole" for _, kind, _ in tables)
    n_margin = len(tables) - n_whole
    for case, kind, t in tables:
        level = alpha / 4 / max(n_whole if kind == "whole" else n_margin, 1)
        out.append((case, {**t.to_json(), "kind": f"exact table ({kind})", "level": level,
                           "failed": t.p_value < level and t.tvd > TABLE_TVD_FLOOR}))
    for g, (total, var, bound, reach, n, case) in scores.items():
        if var <= 0:
            continue
        p = bernstein_p(total, var, bound)
        level = alpha / 2 / len(scores)
        shift = abs(total) / max(reach, 1e-300)
        out.append((case, {"label": f"{g}:pair score", "kind": "pair score", "n": n, "z": total / np.sqrt(var),
                           "p_value": p, "tv_bound": shift, "level": level,
                           "failed": p < level and shift > SCORE_FLOOR}))
    return out
