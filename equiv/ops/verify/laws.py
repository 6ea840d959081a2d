"""The exact law of a verifier's outputs, read per recipe: what ``judge`` and ``lossless`` test.

Per recipe (``reference/verify.py``: the float64 law): ``_law`` caches the acceptance
probabilities and the law of each drawn token; ``layout_problem``, ``support_problem`` and
``greedy_problem`` are the exact checks of one output set; ``acceptance_counts``, ``pit_values``,
``rank_fit`` and ``acceptance_family`` turn outputs into the statistical tests (significance AND
an effect floor: ``ACCEPT_FLOOR``, ``TVD_FLOOR``). ``judge.py`` spends the family-wise alpha.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from equiv.errors import InvalidArgument
from equiv.ops.verify.recipes import VerifyRecipe, problem_cache
from equiv.ops.verify.tail import level_repeats
from equiv.reference import verify as ref
from equiv.reference.verify import deterministic_output
from equiv.stats import Labels, cells_test, pit
from equiv.stats.values import binom_test

ACCEPT_FLOOR = 0.01
TVD_FLOOR = 0.01
PIT_BINS = 20
RANK_EDGES = (0, 1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 256, 1024, 8192)   # cells [e_k, e_k+1) of ranks
_PIT_SALT = 4093


@dataclass(frozen=True)
class _Law:
    """What the judge needs of one recipe's exact law, per problem (reference/verify.py)."""

    alpha: np.ndarray            # [P, n]
    drawn: np.ndarray | None     # [P, n+1, V] law of the drawn token (None when not needed)


@problem_cache(maxsize=32)
def _law(recipe: VerifyRecipe, with_drawn: bool) -> _Law:
    pr = recipe.make_problems()
    try:
        alpha = ref.acceptance_probabilities(pr.tokens, pr.draft, pr.target)
        return _Law(alpha, ref.drawn_laws(pr.tokens, pr.draft, pr.target) if with_drawn else None)
    except ValueError as exc:                      # the recipe, not the candidate, is at fault
        raise InvalidArgument(f"verify recipe {recipe} has no well-defined law: {exc}") from None


def _stops(recipe, outputs):
    """``[C, B]`` first position whose token is not the draft (n when none)."""
    d = recipe.row_tokens()
    match = outputs[..., : recipe.n] == d[None]
    return np.cumprod(match, axis=-1).sum(axis=-1)


def layout_problem(recipe, outputs) -> tuple | None:
    """``(call, row, message)`` of the first broken ``-1`` layout, else None."""
    n, V = recipe.n, recipe.vocab
    stop = _stops(recipe, outputs)
    tok = np.take_along_axis(outputs, stop[..., None], axis=-1)[..., 0]
    after = np.arange(n + 1)[None, None, :] > stop[..., None]
    for bad, say in (
        (tok == -1, lambda c, b: f"position {stop[c, b]} holds -1 but no rejection came before it: "
                                 f"it must hold the recovered or bonus token"),
        ((tok < 0) | (tok >= V), lambda c, b: f"position {stop[c, b]} holds token {tok[c, b]}, outside [0, {V})"),
        ((after & (outputs != -1)).any(-1), lambda c, b: _after_message(outputs[c, b], stop[c, b])),
    ):
        if bad.any():
            c, b = (int(v[0]) for v in np.nonzero(bad))
            return c, b, say(c, b)
    return None


def _after_message(row, s) -> str:
    j = int(s + 1 + np.flatnonzero(row[s + 1:] != -1)[0])
    return f"position {j} holds token {row[j]} after the rejection at position {s}: it must be -1"


def row_alpha(recipe, law: _Law | None = None) -> np.ndarray:
    """``[B, n]`` float64: each row's acceptance probabilities ``min(1, p(d) / q(d))`` for its
    own drafts (the reference's for fixed drafts)."""
    if recipe.drafts == "fixed":
        return (law or _law(recipe, False)).alpha[recipe.rows()]
    pr, d, rows = recipe.make_problems(), recipe.row_tokens(), recipe.rows()[:, None]
    j = np.arange(recipe.n)[None, :]
    p_d = pr.target[rows, j, d].astype(np.float64)
    q_d = 1.0 if pr.draft is None else pr.draft[rows, j, d].astype(np.float64)
    return np.minimum(1.0, p_d / q_d)


def support_problem(recipe, outputs, law: _Law | None) -> tuple | None:
    """``(call, row, message)`` of the first outcome of probability zero, else None."""
    pr = recipe.make_problems()
    n = recipe.n
    rows = recipe.rows()
    tokens = recipe.row_tokens()
    alpha = row_alpha(recipe, law)                                           # [B, n]
    stop = _stops(recipe, outputs)
    C, B = stop.shape
    reached_accept = np.arange(n)[None, None, :] < stop[..., None]
    bad = reached_accept & (alpha[None] == 0)
    if bad.any():
        c, b, j = (int(v[0]) for v in np.nonzero(bad))
        return c, b, (f"position {j} accepted draft {outputs[c, b, j]} whose target probability is 0 "
                      f"(acceptance probability 0)")
    rejected = stop < n
    at = np.minimum(stop, n - 1)
    alpha_at = np.take_along_axis(np.broadcast_to(alpha, (C, B, n)), at[..., None], -1)[..., 0]
    bad = rejected & (alpha_at >= 1)
    if bad.any():
        c, b = (int(v[0]) for v in np.nonzero(bad))
        return c, b, (f"position {stop[c, b]} rejected draft {tokens[b, stop[c, b]]} although "
                      f"p >= q there (acceptance probability 1)")
    tok = np.take_along_axis(outputs, stop[..., None], axis=-1)[..., 0]
    prob = np.broadcast_to(rows, (C, B))
    p_tok = pr.target[prob, stop, tok].astype(np.float64)
    if pr.draft is None:
        d_at = np.take_along_axis(np.broadcast_to(tokens, (C, B, n)), at[..., None], -1)[..., 0]
        q_tok = np.where(rejected & (tok == d_at), 1.0, 0.0)
    else:
        q_tok = np.where(rejected, pr.draft[prob, at, tok].astype(np.float64), 0.0)
    bad = ~(p_tok > q_tok)
    if bad.any():
        c, b = (int(v[0]) for v in np.nonzero(bad))
        s = int(stop[c, b])
        what = "the residual max(0, p - q)" if s < n else "the bonus law p_n"
        return c, b, (f"position {s} drew token {tok[c, b]} of probability 0 under {what} "
                      f"(p={p_tok[c, b]:.6g}, q={q_tok[c, b]:.6g})")
    return None


def greedy_problem(recipe, outputs) -> tuple | None:
    """One-hot targets: ``(call, row, message)`` where the output is not greedy decoding's."""
    pr = recipe.make_problems()
    want = deterministic_output(pr.tokens, pr.draft, pr.target)[recipe.rows()]
    bad = (outputs != want[None]).any(-1)
    if bad.any():
        c, b = (int(v[0]) for v in np.nonzero(bad))
        return c, b, (f"emitted {outputs[c, b].tolist()} where greedy verification gives "
                      f"{want[b].tolist()} (drafts {pr.tokens[recipe.rows()[b]].tolist()})")
    return None


def acceptance_counts(recipe, outputs, law: _Law) -> list:
    """One record per (problem, position) with ``0 < alpha < 1``: trials, successes, alpha."""
    stop = _stops(recipe, outputs)
    rows = recipe.rows()
    out = []
    for i in range(recipe.n_problems):
        s = stop[:, rows == i].ravel()
        for j in range(recipe.n):
            a = float(law.alpha[i, j])
            trials = int((s >= j).sum())
            if 0.0 < a < 1.0 and trials:
                out.append({"recipe": str(recipe), "problem": i, "position": j, "trials": trials,
                            "successes": int((s > j).sum()), "alpha": a})
    return out


@problem_cache(maxsize=32)
def _pit_table(recipe):
    """Each drawn law of ``recipe`` sorted by decreasing probability, each token's rank, and the
    mass of each rank cell (``RANK_EDGES``)."""
    P, n, V = recipe.n_problems, recipe.n, recipe.vocab
    laws = _law(recipe, True).drawn.reshape(P * (n + 1), V).copy()
    laws[laws.sum(1) == 0, 0] = 1.0                           # residuals never drawn (alpha == 1)
    return sorted_table(laws)


def sorted_table(laws):
    """``(sorted_laws, rank_of, cell_mass)`` of normalised ``laws [L, V]`` (rank cells: ``RANK_EDGES``)."""
    V = laws.shape[1]
    order = np.argsort(-laws, axis=1, kind="stable")
    rank_of = np.empty_like(order)
    np.put_along_axis(rank_of, order, np.arange(V)[None, :].repeat(laws.shape[0], 0), axis=1)
    sorted_laws = np.take_along_axis(laws, order, axis=1)
    below = np.concatenate([np.zeros((laws.shape[0], 1)), np.cumsum(sorted_laws, axis=1)], axis=1)
    edges = np.minimum(np.array(RANK_EDGES + (V,)), V)
    return sorted_laws, rank_of, np.diff(below[:, edges], axis=1)


def pit_values(recipe, outputs, rng) -> tuple:
    """For every drawn token of ``outputs`` (layout already checked): its PIT value, its group
    label (family and slot), its rank cell, the expected mass of every rank cell, and the tail
    repeats of each drawn law (tail.py)."""
    n = recipe.n
    sorted_laws, rank_of, cell_mass = _pit_table(recipe)
    stop = _stops(recipe, outputs)
    tok = np.take_along_axis(outputs, stop[..., None], axis=-1)[..., 0].ravel()
    level = (np.broadcast_to(recipe.rows(), stop.shape) * (n + 1) + stop).ravel()
    rank = rank_of[level, tok]
    u = pit(sorted_laws, level, rank, rng)
    slot = stop.ravel()
    groups = Labels([f"{recipe.family}:residual{j}" for j in range(n)] + [f"{recipe.family}:bonus"], slot)
    cell = np.searchsorted(np.array(RANK_EDGES), rank, side="right") - 1
    return u, groups, cell, cell_mass[level], level_repeats(sorted_laws, level, rank)


def rank_fit(cells, expected, groups, alpha: float, floor: float = TVD_FLOOR) -> list:
    """Chi-square of the drawn tokens' rank cells against their exact expected counts, pooled and
    per group, Bonferroni over the tests. Draws from different laws pool soundly: their cell
    counts vary less than one multinomial's, so the test is conservative."""
    C = expected.shape[1]
    raw = []
    labels = Labels.of(groups)
    for label in ["pooled"] + labels.present():
        sel = slice(None) if label == "pooled" else labels.mask(label)
        n = int(np.count_nonzero(sel)) if label != "pooled" else int(cells.size)
        if n < 5 * PIT_BINS:
            continue
        got = cells_test(np.bincount(cells[sel], minlength=C).astype(float), expected[sel].sum(0))
        if got is not None:
            raw.append((label, n) + got)
    level = alpha / max(len(raw), 1)
    return [{"group": g, "n": n, "chi2": c, "df": df, "p_value": p, "tvd": t, "level": level,
             "failed": p < level and t > floor} for g, n, c, df, p, t in raw]


def acceptance_family(records, alpha: float, floor: float = ACCEPT_FLOOR) -> list:
    """Exact two-sided binomial test per record, Bonferroni over the records; each record gains
    ``rate``, ``p_value``, ``failed``."""
    level = alpha / max(len(records), 1)
    out = []
    for r in records:
        p = binom_test(r["successes"], r["trials"], r["alpha"])
        rate = r["successes"] / r["trials"]
        out.append({**r, "rate": rate, "p_value": p, "level": level,
                    "failed": p < level and abs(rate - r["alpha"]) > floor})
    return out
