"""Shared randomness: rows of one call, and successive calls, must not reuse each other's draws.

Plan. The marginal law of every row can be exact while two rows (or two calls) draw from the same
uniforms: a sampler that gives row ``2i+1`` row ``2i``'s uniforms, or a captured graph that replays
one generator state on every call, emits correlated text across requests. The judge sees it on
rows of *identical inputs* (one problem, drafts fixed: ``plans._independence``, or any fixed-draft
recipe called at least twice): for each problem its rows ``r_0 < r_1 < ...`` are paired, calls
``(0, 1), (2, 3), ...`` are paired, and each (row pair, call pair) is one unit of the swap sign
test (``equiv.stats.joint.swap_sign_test``), exact under independence whatever the verifier's law:

- ``rows (adjacent)``: pairs ``(r_2k, r_2k+1)``; tested pairing: the two rows of one call;
- ``rows (far)``: pairs ``(r_k, r_{k + m/2})`` (m rows of the problem): rows far apart in the batch;
- ``calls``: pairs ``(r_2k, r_2k+1)``; tested pairing: one row in the two calls.

The units read only ``case.recipe.rows()`` (the problem each row copies), ``case.recipe.n_problems``
and ``draws.outputs`` ``[calls, B, W]``, so the tree verifier's judge runs the same tests on its
rows of one tree (equiv/ops/verify_tree/judge.py); ``independence_check`` is the one check both
judges file, named by cause. Two outputs *match* when every position is equal. A test fails when its p-value is under its
share of ``INDEPENDENCE_ALPHA`` (Bonferroni over the tests) AND the match rates differ by more
than ``GAP_FLOOR``. Correct samplers with different random streams pass (the test asks only
that the draws be independent); tests/ops/verify/test_verify_independence.py holds the level and the kill.
"""
from __future__ import annotations

import numpy as np

from equiv.stats.joint import swap_sign_test

INDEPENDENCE_ALPHA = 2e-5       # on top of judge.FAMILY_ALPHA (docs/verify.md)
GAP_FLOOR = 0.01
MIN_UNITS = 50


def eligible(case, draws) -> bool:
    r = case.recipe
    return (r.drafts == "fixed" and draws.ok and len(draws.outputs) >= 3       # two calls and the replay
            and r.batch >= 2 * r.n_problems)


def _units(recipe, outputs):
    """``{label: (same [U], crossed [U])}`` over the row pairs and call pairs (module docstring)."""
    rows = recipe.rows()
    adjacent, far = [], []
    for i in range(recipe.n_problems):
        mine = np.flatnonzero(rows == i)
        m = mine.size - mine.size % 2
        adjacent.append(np.stack([mine[0:m:2], mine[1:m:2]], 1))
        far.append(np.stack([mine[: m // 2], mine[m // 2: m]], 1))
    calls = outputs[: 2 * (len(outputs) // 2)]
    eq = {}
    for label, pairs in (("rows (adjacent)", np.concatenate(adjacent)), ("rows (far)", np.concatenate(far)),
                         ("calls", np.concatenate(adjacent))):
        a, b = pairs[:, 0], pairs[:, 1]
        c0, c1 = calls[0::2], calls[1::2]                      # [K, B, n+1] each

        def match(x, y):
            return (x == y).all(-1)                             # [K, pairs]
        crossed = match(c0[:, a], c1[:, b]).astype(int) + match(c1[:, a], c0[:, b])
        if label == "calls":
            same = match(c0[:, a], c1[:, a]).astype(int) + match(c0[:, b], c1[:, b])
        else:
            same = match(c0[:, a], c0[:, b]).astype(int) + match(c1[:, a], c1[:, b])
        eq[label] = (same.ravel(), crossed.ravel())
    return eq


def independence_tests(cases_draws, alpha: float = INDEPENDENCE_ALPHA) -> list:
    """``[(case, test dict)]`` of every eligible case (``eligible``), Bonferroni over all tests."""
    raw = []
    for case, draws in cases_draws:
        outs = case.judged(draws.outputs)                       # less the replay (Case.judged)
        for label, (same, crossed) in _units(case.recipe, outs).items():
            if same.size >= MIN_UNITS:
                raw.append((case, swap_sign_test(label, same, crossed)))
    level = alpha / max(len(raw), 1)
    return [(case, {**t.to_json(), "level": level,
                    "failed": t.p_value < level and abs(t.rate_gap) > GAP_FLOOR}) for case, t in raw]


def independence_check(rows_alike, found, judged) -> list:
    """The ``independence`` check of a judge over ``rows_alike`` (``[(case, draws)]``, each eligible):
    a failure goes to ``found.fail`` with its cause (``shared randomness between rows`` / ``between
    calls``) and is returned as ``found.first``; a pass is ``judged(name, True, detail)``; ``[]``
    when no test had ``MIN_UNITS`` units."""
    tests = independence_tests(rows_alike)
    bad = [(c, t) for c, t in tests if t["failed"]]
    if bad:
        c, t = bad[0]
        found.fail("independence", c, (None, None,
                   f"{t['label']}: outputs of identical inputs matched {t['same_rate']:.3f} of the time "
                   f"where independent draws match {t['crossed_rate']:.3f} ({t['more']} units more, "
                   f"{t['fewer']} fewer), sign test p = {t['p_value']:.3g} < {t['level']:.3g}"),
                   {"tests": [t for _, t in tests]},
                   cause="shared randomness between calls" if t["label"] == "calls"
                   else "shared randomness between rows")
        return [found.first["independence"]]
    if tests:
        return [judged("independence", True, f"{len(tests)} swap sign tests over "
                                             f"{sum(t['units'] for _, t in tests)} units (rows of identical "
                                             f"inputs, pairs of calls); smallest p = "
                                             f"{min(t['p_value'] for _, t in tests):.3g}")]
    return []
