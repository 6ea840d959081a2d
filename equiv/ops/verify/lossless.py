"""The losslessness judge: does the emitted text have the target model's law?

Plan. Losslessness is what users rely on, and it is a property of the verifier *with drafts
drawn from the draft law*: so the judge's statistical cases use ``drafts=sampled`` recipes
(every row draws its own drafts from ``draft_probs``, or from the hidden draft law of a one-hot
drafter; recipes.py). The judge reads each output row up to its last emitted token (the first
``-1`` or the end) and continues it past that token with fresh draws from the target, in this
(the verdict) process with its own seeded generator. The judge's targets are context-free, so a
lossless verifier makes every continued row ``[n+1]`` a draw of the product law ``p_0 x p_1 x
... x p_n`` of its problem. Any verifier with that property passes -- token-level rejection
sampling, block verification, an exponential race -- whatever it accepts per draft.

Checks (the exact ones per call; the statistical ones pooled over the plan):

- ``support`` (exact): no emitted token has target probability 0 at its position;
- ``contract``'s layout read as text (``layout_problem``): the accepted drafts, one token, then
  ``-1``; the text ends at the first ``-1``, so a verifier that stops without a rejection (an
  accept-length cap) may draw the draft itself from the full target there (``text_stops``);
- ``greedy`` (exact): on one-hot targets every emitted token is the target's argmax: greedy
  decoding's text or a prefix of it. Acceptance need not be maximal: a lossless verifier may
  stop earlier (a cap on the accept length) and the pass line counts the rows that did
  (``greedy_shortfall``), an efficiency figure;
- ``marginal`` (chi-square): every position's tokens against ``p_j``, as the token law's
  ``distribution`` check does for drawn tokens (randomized PIT in ``PIT_BINS`` bins and rank
  cells, pooled and per (family, position));
- ``joint`` (chi-square): the randomized PITs of neighbouring positions ``(j, j+1)`` binned
  ``JOINT_BINS x JOINT_BINS``: uniform on the square when the positions are independent with the
  right marginals; it sees a verifier whose positions are each right but tied together;
- ``tail`` (Poisson): repeats among tail draws of each position's law (tail.py).

The marginal check also runs *score* tests (``score_tests``), the power behind a total variation
of 0.01 at V = 129280: binned tests spread their degrees of freedom over every way a law can be
wrong, while a bias moves mass one way. For each continued token ``x`` at level ``(problem,
position j)`` two fixed functions of the token, known before the call (``SCORES``): ``target``,
``p_j(x)`` (mass moved to or from the target's head: a temperature), and ``drawn``, the law the
token-level algorithm draws from at ``j`` (``max(0, p_j - q_j)`` renormalised, ``p_n`` at the
bonus; ``p_j`` when ``q`` is not given or leaves no residual): mass moved within what a sampler
draws, where its bugs live. A third, ``side``, is ``1[p_j(x) > q_j(x)]`` at a draft position
(0 at the bonus and where ``q`` is not given): the target's mass on the tokens only a rejection
emits more of. A verifier that accepts too often (a threshold off by a factor, a second code
path for long chains) moves mass from those tokens to the ones the drafter over-proposes, and
one that accepts too rarely moves it back: the direction this score reads, whatever the noise
between ``p`` and ``q`` that the other two see only weighted by it. Such a bug starts at some
position and keeps on, so ``side`` is tested on each family's positions from ``m`` on
(``from position m``, every ``m`` drawn), not position by position. None of the scores depends
on a row's drafts, so under a lossless verifier each continued token's score has the exact
mean and variance that ``p_j`` gives it, whatever the verifier is; the sum over a group of
tokens is tested two-sided with Bernstein's inequality (``|s - mean| <= max s``), which holds
at every sample size and skew -- a normal approximation would not, on a confident law whose
rare tokens carry the whole variance.

Family-wise error (``judge.FAMILY_ALPHA = 1e-4`` per judge run): a fifth each to the marginal
PIT tests, the marginal rank-cell tests, the score tests, the joint tests and the tail tests,
Bonferroni inside each (the score tests: half to the two pooled tests, half to the groups'); a
test fails only when significant AND its effect passes its floor (binned total variation
``> LOSSLESS_TVD_FLOOR = 0.002``; for a score, the total variation its shift implies at least,
``|sum (s - mean)| / sum max s > SCORE_FLOOR``; for the tail, ``tail.TAIL_RATIO_FLOOR``). The
floors are a fifth of the token law's: a total variation of 0.01 spread over the positions a
verifier emits and the judge continues is a binned 0.003-0.006.
"""
from __future__ import annotations

import numpy as np

from equiv.ops.verify.laws import RANK_EDGES, sorted_table
from equiv.ops.verify.recipes import cdf_draw, problem_cache
from equiv.ops.verify.tail import level_repeats
from equiv.stats import Labels, bernstein_p, cells_test, pit

JOINT_BINS = 4
LOSSLESS_TVD_FLOOR = 0.002
SCORES = ("target", "drawn", "side")
SUFFIX_SCORES = ("side", "children")            # tested on positions m.. (module docstring; children: the tree's)
SCORE_FLOOR = 0.002


@problem_cache(maxsize=32)            # a GPU plan has ~17 distinct problem sets
def target_table(recipe):
    """Each ``p_{i,j}`` (level ``i (n+1) + j``) normalised and sorted by decreasing probability,
    each token's rank, each rank cell's mass, and the CDF in vocabulary order (continuations)."""
    P, n, V = recipe.n_problems, recipe.n, recipe.vocab
    laws = recipe.make_problems().target.astype(np.float64).reshape(P * (n + 1), V)
    laws = laws / laws.sum(1, keepdims=True)
    sorted_laws, rank_of, cell_mass = sorted_table(laws)
    return sorted_laws, rank_of, cell_mass, np.cumsum(laws, axis=1)


@problem_cache(maxsize=32)
def score_table(recipe):
    """``(scores [3, L, V] float32, mean [3, L], var [3, L], top [3, L])``: the ``SCORES`` of
    every level ``i (n+1) + j`` as functions of the token, and their exact mean, variance and
    maximum under ``p_j`` (module docstring)."""
    pr = recipe.make_problems()
    P, n, V = recipe.n_problems, recipe.n, recipe.vocab
    p = pr.target.astype(np.float64)
    p = p / p.sum(-1, keepdims=True)
    drawn = p.copy()
    side = np.zeros_like(p)
    if pr.draft is not None:
        q = pr.draft.astype(np.float64)
        res = np.maximum(0.0, pr.target[:, :n].astype(np.float64) - q)
        mass = res.sum(-1, keepdims=True)
        drawn[:, :n] = np.where(mass > 0, res / np.where(mass > 0, mass, 1.0), p[:, :n])
        side[:, :n] = res > 0
    scores = np.stack([p, drawn, side]).reshape(len(SCORES), P * (n + 1), V).astype(np.float32)
    law = p.reshape(1, P * (n + 1), V)
    s64 = scores.astype(np.float64)
    mean = (law * s64).sum(-1)
    var = np.maximum((law * s64 * s64).sum(-1) - mean ** 2, 0.0)
    return scores, mean, var, s64.max(-1)


def text_stops(recipe, outputs):
    """``[C, B]``: the position of each row's last emitted token, read as text: the text runs up
    to the first ``-1`` (the whole row when there is none). It is the token law's first
    rejection wherever the token after the accepted drafts differs from the draft there; it
    differs where a verifier stopped without a rejection (an accept-length cap) and drew the
    draft itself from the full target: a text one token shorter, which the token law would read
    as one more accepted draft followed by a misplaced ``-1``."""
    minus = outputs == -1
    return np.where(minus.any(-1), minus.argmax(-1), recipe.n + 1) - 1


def layout_problem(recipe, outputs) -> tuple | None:
    """``(call, row, message)`` of the first output that is not a text (the accepted drafts, one
    token in ``[0, V)``, then ``-1``), else None."""
    n, V = recipe.n, recipe.vocab
    stop = text_stops(recipe, outputs)
    tok = np.take_along_axis(outputs, stop.clip(min=0)[..., None], axis=-1)[..., 0]
    drafts = recipe.row_tokens()
    pos = np.arange(n + 1)[None, None, :]
    off = (pos[..., :n] < stop[..., None]) & (outputs[..., :n] != drafts[None])
    for bad, say in (
        (stop < 0, lambda c, b: "position 0 holds -1: the output emits no token (a text has at least one)"),
        (off.any(-1), lambda c, b: _off_message(outputs[c, b], drafts[b], off[c, b], stop[c, b])),
        ((tok < 0) | (tok >= V), lambda c, b: f"position {stop[c, b]} holds token {tok[c, b]}, outside [0, {V})"),
        (((pos > stop[..., None] + 1) & (outputs != -1)).any(-1), lambda c, b: _after_message(outputs[c, b], stop[c, b])),
    ):
        if bad.any():
            c, b = (int(v[0]) for v in np.nonzero(bad))
            return c, b, say(c, b)
    return None


def _off_message(row, drafts, off, stop) -> str:
    j = int(np.flatnonzero(off)[0])
    return (f"position {j} holds token {row[j]}, not the draft {drafts[j]}, yet the text goes on to position "
            f"{stop}: after the token that ends the text (a rejection's) every position must be -1")


def _after_message(row, stop) -> str:
    j = int(stop + 2 + np.flatnonzero(row[stop + 2:] != -1)[0])
    return f"position {j} holds token {row[j]} after the -1 at position {stop + 1}: it must be -1"


def _emitted(recipe, outputs):
    stop = text_stops(recipe, outputs)
    return stop, np.arange(recipe.n + 1)[None, None, :] <= stop[..., None]


def support_problem(recipe, outputs) -> tuple | None:
    """``(call, row, message)`` of the first emitted token of target probability 0, else None."""
    _, emitted = _emitted(recipe, outputs)
    pr = recipe.make_problems()
    prob = np.broadcast_to(recipe.rows()[None, :, None], outputs.shape)
    pos = np.broadcast_to(np.arange(recipe.n + 1), outputs.shape)
    p_tok = pr.target[prob, pos, np.where(emitted, outputs, 0)]
    bad = emitted & ~(p_tok > 0)
    if bad.any():
        c, b, j = (int(v[0]) for v in np.nonzero(bad))
        return c, b, (f"position {j} emitted token {outputs[c, b, j]} whose target probability is 0: "
                      f"no lossless verifier emits it")
    return None


def greedy_problem(recipe, outputs) -> tuple | None:
    """One-hot targets: ``(call, row, message)`` of an emitted token that is not the argmax."""
    _, emitted = _emitted(recipe, outputs)
    argmax = recipe.make_problems().target.argmax(-1)[recipe.rows()]           # [B, n+1]
    bad = emitted & (outputs != argmax[None])
    if bad.any():
        c, b, j = (int(v[0]) for v in np.nonzero(bad))
        return c, b, (f"position {j} emitted {outputs[c, b, j]} where the one-hot target allows only "
                      f"{argmax[b, j]} (temperature 0: greedy decoding's token)")
    return None


def greedy_shortfall(recipe, outputs) -> int:
    """One-hot targets: how many rows emit a shorter text than greedy decoding (every token the
    argmax, fewer of them: an efficiency figure, not a defect)."""
    argmax = recipe.make_problems().target.argmax(-1)[recipe.rows()]            # [B, n+1]
    greedy_length = np.cumprod(recipe.row_tokens() == argmax[:, :recipe.n], axis=-1).sum(-1) + 1
    return int((text_stops(recipe, outputs) + 1 < greedy_length[None]).sum())


def continued(recipe, outputs, rng) -> tuple:
    """``(sequences [C*B, n+1], levels [C*B, n+1])``: each row continued past its last emitted
    token with draws from the target (module docstring)."""
    n = recipe.n
    stop, emitted = _emitted(recipe, outputs)
    _, _, _, cdf = target_table(recipe)
    seq = outputs.copy()
    level = np.broadcast_to(recipe.rows()[None, :, None] * (n + 1) + np.arange(n + 1), outputs.shape)
    need = ~emitted
    for lv in np.unique(level[need]):
        at = need & (level == lv)
        seq[at] = cdf_draw(cdf[lv], rng.random(int(at.sum())))
    return seq.reshape(-1, n + 1), np.ascontiguousarray(level).reshape(-1, n + 1)


def lossless_values(recipe, outputs, rng) -> dict:
    """The continued rows mapped to what the tests need (PITs, groups, rank cells, joint cells,
    tail repeats, scores)."""
    sorted_laws, rank_of, cell_mass, _ = target_table(recipe)
    scores, mean, var, top = score_table(recipe)
    seq, level = continued(recipe, outputs, rng)
    lv, tok = level.ravel(), seq.ravel()
    rank = rank_of[lv, tok]
    u = pit(sorted_laws, lv, rank, rng)
    pos = np.broadcast_to(np.arange(recipe.n + 1), seq.shape)
    groups = Labels([f"{recipe.family}:position{j}" for j in range(recipe.n + 1)], pos.ravel())
    k = np.minimum((u * JOINT_BINS).astype(np.int64), JOINT_BINS - 1).reshape(seq.shape)
    joint = {f"{recipe.family}:positions {j},{j + 1}": k[:, j] * JOINT_BINS + k[:, j + 1]
             for j in range(recipe.n)}
    return {"u": u, "groups": groups, "joint": joint,
            "cells": (np.searchsorted(np.array(RANK_EDGES), rank, side="right") - 1),
            "expected": cell_mass[lv],
            "tail": level_repeats(sorted_laws, lv, rank),
            "scores": {kind: (scores[i, lv, tok] - mean[i, lv], var[i, lv], top[i, lv])
                       for i, kind in enumerate(SCORES)}}


def _suffix_groups(groups) -> dict | None:
    """``{"FAMILY:from positionM": mask}`` for every family and position ``M >= 1`` among the
    labels ``FAMILY:positionJ``; None when a label has another form (the caller's per-label
    groups then)."""
    labels = Labels.of(groups)
    parsed = {label: label.rpartition(":position") for label in labels.present()}
    if not parsed or any(not sep or not pos.isdigit() for _, sep, pos in parsed.values()):
        return None
    families = sorted({fam for fam, _, _ in parsed.values()})
    # per name of the table (a name no token carries: -1, never selected)
    family = labels.per_token([families.index(parsed[n][0]) if n in parsed else -1 for n in labels.names])
    position = labels.per_token([int(parsed[n][2]) if n in parsed else -1 for n in labels.names])
    out = {}
    for f, fam in enumerate(families):
        mine = family == f
        for m in sorted({int(pos) for name, (g, _, pos) in parsed.items() if g == fam}):   # 0: the family as a whole
            out[f"{fam}:from position{m}"] = mine & (position >= m)
    return out


def score_tests(scores: dict, groups, alpha: float, floor: float = SCORE_FLOOR) -> list:
    """``scores[kind] = (s - mean, var, max s)`` per token, ``groups`` its group label: per kind,
    pooled and per group, the Bernstein test of the sum (module docstring); a kind of
    ``SUFFIX_SCORES`` per family's positions from ``m`` on instead of per group. Half of
    ``alpha`` to the pooled tests, half to the groups', Bonferroni inside each half."""
    groups = Labels.of(groups)
    labels = groups.present()
    per_label = {label: groups.mask(label) for label in labels} if len(labels) > 1 else {}
    suffixes = _suffix_groups(groups) if any(kind in SUFFIX_SCORES for kind in scores) else None
    raw = []
    for kind, (dev, var, top) in scores.items():
        masks = suffixes if kind in SUFFIX_SCORES and suffixes is not None else per_label
        for label in ["pooled"] + list(masks):
            sel = slice(None) if label == "pooled" else masks[label]
            d, v, m = dev[sel], var[sel], top[sel]
            if d.size == 0 or not (v.sum() > 0 or np.any(d != 0)):
                continue                           # every token of a point mass: nothing to test
            total = float(d.sum())
            raw.append({"group": label, "score": kind, "n": int(d.size), "shift": total,
                        "z": total / float(np.sqrt(v.sum())) if v.sum() > 0 else float("inf"),
                        "p_value": bernstein_p(total, float(v.sum()), float(m.max())),
                        "tv_bound": abs(total) / max(float(m.sum()), 1e-300)})
    pooled = sum(t["group"] == "pooled" for t in raw)
    out = []
    for t in raw:
        half = alpha / 2 if pooled < len(raw) else alpha
        level = half / max(pooled if t["group"] == "pooled" else len(raw) - pooled, 1)
        out.append({**t, "level": level, "failed": t["p_value"] < level and t["tv_bound"] > floor})
    return out


def joint_tests(joint: dict, alpha: float, floor: float) -> list:
    """Chi-square of each neighbouring pair's binned PITs against the uniform square, pooled and
    per group, Bonferroni over the tests."""
    cells = JOINT_BINS * JOINT_BINS
    pooled = {"pooled": np.concatenate(list(joint.values()))} if joint else {}
    raw = []
    for label, got in {**pooled, **joint}.items():
        if got.size < 5 * cells:
            continue
        res = cells_test(np.bincount(got, minlength=cells).astype(float), np.full(cells, got.size / cells))
        if res is not None:
            raw.append((label, int(got.size)) + res)
    level = alpha / max(len(raw), 1)
    return [{"group": g, "n": n, "chi2": c, "df": df, "p_value": p, "tvd": t, "level": level,
             "failed": p < level and t > floor} for g, n, c, df, p, t in raw]
