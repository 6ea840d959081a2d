"""The judge of a verifier: contract, support, greedy, acceptance and distribution.

Plan. A verdict rests on seeded calls of the candidate on input recipes (``calls.run_draws``),
each output set checked against the exact law of ``equiv.reference.verify``:

1. ``contract`` (exact): a tensor, int64, ``[B, n+1]``, on the inputs' device, inputs unchanged
   (``calls.draw``); the ``-1`` layout: with ``s`` the first position whose token differs from
   the draft (``n`` when none), ``out[s]`` is a token in ``[0, V)`` and every later position is
   ``-1``; the same generator seed gives the same output (the first seed is called again last).
2. ``support`` (exact): nothing of probability zero happens: a draft with ``p = 0`` accepted, a
   draft with ``p >= q`` rejected, a drawn token outside ``max(0, p - q) > 0`` (the residual) or
   ``p_n > 0`` (the bonus). A float32 sampler cannot trip it by rounding: ``p >= q`` iff
   ``fl(p / q) >= 1`` and ``p > q`` iff ``fl(p - q) > 0``.
3. ``greedy`` (exact): on one-hot targets (temperature 0) the output is the one the law allows:
   accept while the draft is the target's argmax, then that argmax, then ``-1``: token for token
   what greedy decoding emits.
4. ``acceptance`` (binomial): every (problem, position) whose acceptance probability
   ``alpha = min(1, p(d) / q(d))`` lies strictly in (0, 1): successes among the rows that reached
   the position, exact two-sided binomial test against ``alpha``. The law is conditional on the
   recipe's draft tokens; averaged over drafts drawn from ``q`` it is ``sum_x min(p, q)``.
5. ``distribution`` (chi-square): each drawn token (the recovered one at the first rejection, or
   the bonus) is compared with its exact law, tokens ordered by decreasing probability, two ways,
   each pooled over recipes and once per (family, slot) group: its randomized PIT, uniform under
   the law (``equiv.mtp.statistics.sampling_fit``, ``PIT_BINS`` bins): it sees mass moved between
   head and tail; and its rank cell (``RANK_EDGES``: rank 0, 1, 2, 3, 4-5, ... 8192+) against the
   exact expected count of each cell (``rank_fit``): it sees mass moved between single head
   tokens, which laws of different shapes would cancel in pooled PIT bins.

The law of a position splits exactly into (4) and the law of the drawn token given that it was
drawn, so (5) tests the residual at full strength instead of diluting it under the acceptance mass.

Family-wise error: one judge run spends ``FAMILY_ALPHA = 1e-4``: half on the acceptance tests, a
quarter on the PIT tests, a quarter on the rank-cell tests, Bonferroni-split inside each; a statistical test fails only when
it is significant AND its effect passes a floor (``ACCEPT_FLOOR = 0.01`` absolute on a rate,
``TVD_FLOOR = 0.01`` binned total variation), so it is neither flaky nor blind. The measured
false-positive rate and power are in docs/verify.md.
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

import numpy as np

from equiv.errors import InvalidArgument
from equiv.mtp.statistics import pit, sampling_fit
from equiv.ops.verify.calls import run_draws
from equiv.ops.verify.recipes import VerifyRecipe

CHECKS = ("contract", "support", "greedy", "acceptance", "distribution")
FAMILY_ALPHA = 1e-4
ACCEPT_FLOOR = 0.01
TVD_FLOOR = 0.01
PIT_BINS = 20
RANK_EDGES = (0, 1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 256, 1024, 8192)   # cells [e_k, e_k+1) of ranks
_PIT_SALT = 4093


@dataclass(frozen=True)
class VerifyCheck:
    """One check of the judge: ``detail`` is one line; a failure names its ``recipe`` and ``repro``."""

    check: str
    passed: bool
    detail: str
    recipe: str | None = None
    repro: str | None = None
    evidence: dict | None = None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    """Every check of one judge run, with what ran (recipes, calls, rows) and where."""

    candidate: str
    device: str
    seed: int
    checks: tuple
    recipes: int
    calls: int
    rows: int

    @property
    def passed(self) -> bool:
        return bool(self.checks) and self.calls > 0 and all(c.passed for c in self.checks)

    @property
    def failed(self) -> list:
        return [c for c in self.checks if not c.passed]

    def summary(self) -> str:
        lines = [f"{self.candidate} on {self.device}: {'PASS' if self.passed else 'FAIL'} "
                 f"({self.recipes} recipes, {self.calls} calls, {self.rows} rows judged)"]
        for c in self.checks:
            lines.append(f"  {c.check:<12} {'pass' if c.passed else 'FAIL':<5} {c.detail}")
        lines += [c.repro for c in self.failed if c.repro]
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"candidate": self.candidate, "device": self.device, "seed": self.seed,
                "passed": self.passed, "recipes": self.recipes, "calls": self.calls, "rows": self.rows,
                "checks": [c.to_json() for c in self.checks]}


def repro_line(spec: str, recipe, calls: int, seed: int, device: str) -> str:
    return (f"REPRO: equiv check --op verify --candidate {spec} --recipe '{recipe}' --calls {calls} "
            f"--seed {seed} --device {device}")


@dataclass(frozen=True)
class _Law:
    """What the judge needs of one recipe's exact law, per problem (reference/verify.py)."""

    alpha: np.ndarray            # [P, n]
    drawn: np.ndarray | None     # [P, n+1, V] law of the drawn token (None when not needed)


@functools.lru_cache(maxsize=32)
def _law(recipe: VerifyRecipe, with_drawn: bool) -> _Law:
    from equiv.reference import verify as ref

    pr = recipe.make_problems()
    try:
        alpha = ref.acceptance_probabilities(pr.tokens, pr.draft, pr.target)
        return _Law(alpha, ref.drawn_laws(pr.tokens, pr.draft, pr.target) if with_drawn else None)
    except ValueError as exc:                      # the recipe, not the candidate, is at fault
        raise InvalidArgument(f"verify recipe {recipe} has no well-defined law: {exc}") from None


def _stops(recipe, outputs):
    """``[C, B]`` first position whose token is not the draft (n when none)."""
    d = recipe.make_problems().tokens[recipe.rows()]
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


def support_problem(recipe, outputs, law: _Law) -> tuple | None:
    """``(call, row, message)`` of the first outcome of probability zero, else None."""
    pr = recipe.make_problems()
    n = recipe.n
    rows = recipe.rows()
    alpha = law.alpha[rows]                                                  # [B, n]
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
        return c, b, (f"position {stop[c, b]} rejected draft {pr.tokens[rows[b], stop[c, b]]} although "
                      f"p >= q there (acceptance probability 1)")
    tok = np.take_along_axis(outputs, stop[..., None], axis=-1)[..., 0]
    prob = np.broadcast_to(rows, (C, B))
    p_tok = pr.target[prob, stop, tok].astype(np.float64)
    if pr.draft is None:
        q_tok = np.where(rejected & (tok == pr.tokens[prob, at]), 1.0, 0.0)
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
    from equiv.reference.verify import deterministic_output

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


@functools.lru_cache(maxsize=32)
def _pit_table(recipe):
    """Each drawn law of ``recipe`` sorted by decreasing probability, each token's rank, and the
    mass of each rank cell (``RANK_EDGES``)."""
    P, n, V = recipe.n_problems, recipe.n, recipe.vocab
    laws = _law(recipe, True).drawn.reshape(P * (n + 1), V).copy()
    laws[laws.sum(1) == 0, 0] = 1.0                           # residuals never drawn (alpha == 1)
    order = np.argsort(-laws, axis=1, kind="stable")
    rank_of = np.empty_like(order)
    np.put_along_axis(rank_of, order, np.arange(V)[None, :].repeat(laws.shape[0], 0), axis=1)
    sorted_laws = np.take_along_axis(laws, order, axis=1)
    below = np.concatenate([np.zeros((laws.shape[0], 1)), np.cumsum(sorted_laws, axis=1)], axis=1)
    edges = np.minimum(np.array(RANK_EDGES + (V,)), V)
    return sorted_laws, rank_of, np.diff(below[:, edges], axis=1)


def pit_values(recipe, outputs, rng) -> tuple:
    """For every drawn token of ``outputs`` (layout already checked): its PIT value, its group
    label (family and slot), its rank cell and the expected mass of every rank cell."""
    n = recipe.n
    sorted_laws, rank_of, cell_mass = _pit_table(recipe)
    stop = _stops(recipe, outputs)
    tok = np.take_along_axis(outputs, stop[..., None], axis=-1)[..., 0].ravel()
    level = (np.broadcast_to(recipe.rows(), stop.shape) * (n + 1) + stop).ravel()
    rank = rank_of[level, tok]
    u = pit(sorted_laws, level, rank, rng)
    slot = stop.ravel()
    groups = np.where(slot == n, f"{recipe.family}:bonus", np.char.add(f"{recipe.family}:residual", slot.astype(str)))
    cell = np.searchsorted(np.array(RANK_EDGES), rank, side="right") - 1
    return u, groups, cell, cell_mass[level]


def _cells_test(observed, expected):
    """Pearson's chi-square of counts against expected counts, the tail cells merged until each
    expects >= 5; ``(chi2, df, p, tvd)`` or None when fewer than two cells are left."""
    from scipy.stats import chi2 as chi2_dist

    obs, exp, acc_o, acc_e = [], [], 0.0, 0.0
    for o, e in zip(observed[::-1], expected[::-1]):
        acc_o, acc_e = acc_o + o, acc_e + e
        if acc_e >= 5:
            obs.append(acc_o)
            exp.append(acc_e)
            acc_o = acc_e = 0.0
    if obs:
        obs[-1] += acc_o
        exp[-1] += acc_e
    if len(obs) < 2:
        return None
    obs, exp = np.array(obs), np.array(exp)
    stat = float(((obs - exp) ** 2 / exp).sum())
    return stat, len(obs) - 1, float(chi2_dist.sf(stat, len(obs) - 1)), float(0.5 * np.abs(obs - exp).sum() / obs.sum())


def rank_fit(cells, expected, groups, alpha: float, floor: float = TVD_FLOOR) -> list:
    """Chi-square of the drawn tokens' rank cells against their exact expected counts, pooled and
    per group, Bonferroni over the tests. Draws from different laws pool soundly: their cell
    counts vary less than one multinomial's, so the test is conservative."""
    C = expected.shape[1]
    raw = []
    for label in ["pooled"] + sorted(set(groups.tolist())):
        sel = slice(None) if label == "pooled" else groups == label
        n = int(np.count_nonzero(groups == label)) if label != "pooled" else int(cells.size)
        if n < 5 * PIT_BINS:
            continue
        got = _cells_test(np.bincount(cells[sel], minlength=C).astype(float), expected[sel].sum(0))
        if got is not None:
            raw.append((label, n) + got)
    level = alpha / max(len(raw), 1)
    return [{"group": g, "n": n, "chi2": c, "df": df, "p_value": p, "tvd": t, "level": level,
             "failed": p < level and t > floor} for g, n, c, df, p, t in raw]


def acceptance_family(records, alpha: float, floor: float = ACCEPT_FLOOR) -> list:
    """Exact two-sided binomial test per record, Bonferroni over the records; each record gains
    ``rate``, ``p_value``, ``failed``."""
    from scipy.stats import binomtest

    level = alpha / max(len(records), 1)
    out = []
    for r in records:
        p = float(binomtest(r["successes"], r["trials"], r["alpha"]).pvalue)
        rate = r["successes"] / r["trials"]
        out.append({**r, "rate": rate, "p_value": p, "level": level,
                    "failed": p < level and abs(rate - r["alpha"]) > floor})
    return out


@dataclass(frozen=True)
class Case:
    """One recipe of a plan: ``calls`` seeded calls from ``seed`` on; ``statistical`` when its
    outputs feed the acceptance and distribution tests."""

    recipe: VerifyRecipe
    calls: int
    seed: int
    statistical: bool = False

    @property
    def seeds(self) -> tuple:
        return tuple(range(self.seed, self.seed + self.calls)) + (self.seed,)   # last: the replay


class _Findings:
    """The first failure and the counts of each check, as recipes are judged."""

    def __init__(self, spec, device):
        self.spec, self.device = spec, device
        self.first: dict = {}
        self.ran: dict = {c: 0 for c in CHECKS}

    def fail(self, check, case, found, evidence=None, repro=None):
        if check in self.first:
            return
        call, row, message = found
        where = "" if row is None else f"row {row} of call {call} (seed {case.seed + call}): "
        self.first[check] = VerifyCheck(check, False, f"{where}{message}", str(case.recipe),
                                        repro or repro_line(self.spec, case.recipe, case.calls, case.seed,
                                                            self.device),
                                        {"call": call, "row": row, **(evidence or {})})


def _judge_case(case, draws, found: _Findings, stats: dict, rng) -> None:
    recipe = case.recipe
    if not draws.ok:
        found.fail("contract", case, (len(draws.outputs), None, f"the candidate {draws.problem}"))
        return
    outs = draws.outputs
    found.ran["contract"] += 1
    replay = np.flatnonzero((outs[-1] != outs[0]).any(-1))
    if replay.size:
        found.fail("contract", case, (0, int(replay[0]), f"the same generator seed gave {outs[-1][replay[0]].tolist()} "
                                                         f"then {outs[0][replay[0]].tolist()}"))
    outs = outs[:-1]
    bad = layout_problem(recipe, outs)
    if bad:
        found.fail("contract", case, bad)
        return
    law = _law(recipe, with_drawn=case.statistical)
    found.ran["support"] += outs.shape[0] * outs.shape[1]
    bad = support_problem(recipe, outs, law)
    if bad:
        found.fail("support", case, bad)
    if recipe.family == "onehot_target":
        found.ran["greedy"] += outs.shape[0] * outs.shape[1]
        bad = greedy_problem(recipe, outs)
        if bad:
            found.fail("greedy", case, bad)
    if case.statistical:
        stats["acceptance"] += [{**r, "case": case} for r in acceptance_counts(recipe, outs, law)]
        u, groups, cells, expected = pit_values(recipe, outs, rng)
        stats["u"].append(u)
        stats["groups"].append(groups)
        stats["cells"].append(cells)
        stats["expected"].append(expected)
        stats["cases"].append(case)


def _statistical_checks(found: _Findings, stats: dict, wanted: bool, repro: str | None) -> list:
    checks = []
    if not wanted:
        return checks
    if stats["acceptance"]:
        tests = acceptance_family(stats["acceptance"], FAMILY_ALPHA / 2)
        worst = min(tests, key=lambda t: t["p_value"])
        failed = [t for t in tests if t["failed"]]
        if failed:
            t = failed[0]
            case = t["case"]
            found.fail("acceptance", case, (None, None,
                       f"problem {t['problem']} position {t['position']}: accepted {t['successes']} / "
                       f"{t['trials']} ({t['rate']:.4f}) vs exact {t['alpha']:.4f}, binomial p = "
                       f"{t['p_value']:.3g} < {t['level']:.3g} (alpha {FAMILY_ALPHA / 2:g} over {len(tests)} "
                       f"tests), |diff| {abs(t['rate'] - t['alpha']):.4f} > floor {ACCEPT_FLOOR}"),
                       {k: t[k] for k in ("problem", "position", "trials", "successes", "alpha", "p_value")},
                       repro)
        else:
            checks.append(VerifyCheck("acceptance", True,
                                      f"{len(tests)} binomial tests, {sum(t['trials'] for t in tests)} trials; "
                                      f"smallest p = {worst['p_value']:.3g}, largest |rate - alpha| = "
                                      f"{max(abs(t['rate'] - t['alpha']) for t in tests):.4f}"))
    else:
        checks.append(VerifyCheck("acceptance", False, "nothing checked: no statistical recipe reached "
                                                       "an acceptance probability strictly in (0, 1)"))
    u = np.concatenate(stats["u"]) if stats["u"] else np.zeros(0)
    if u.size >= 5 * PIT_BINS:
        groups = np.concatenate(stats["groups"])
        fit = sampling_fit(u, groups, alpha=FAMILY_ALPHA / 4, tvd_floor=TVD_FLOOR, bins=PIT_BINS)
        ranks = rank_fit(np.concatenate(stats["cells"]), np.concatenate(stats["expected"]), groups,
                         alpha=FAMILY_ALPHA / 4)
        failed = [(t.group, t.n, f"chi-square {t.chi2:.1f} over {t.bins} PIT bins", t.p_value, t.tvd,
                   len(fit.tests)) for t in fit.tests if t.failed]
        failed += [(t["group"], t["n"], f"chi-square {t['chi2']:.1f} over {t['df'] + 1} rank cells",
                    t["p_value"], t["tvd"], len(ranks)) for t in ranks if t["failed"]]
        if failed:
            group, n, what, p, tvd, m = failed[0]
            label = group.split(":")
            cases = [c for c in stats["cases"] if len(label) < 2 or c.recipe.family == label[0]]
            case = cases[0] if cases else stats["cases"][0]
            found.fail("distribution", case, (None, None,
                       f"{group} drawn tokens ({n}): {what}, p = {p:.3g} (alpha {FAMILY_ALPHA / 4:g} over "
                       f"{m} tests), binned TVD {tvd:.4f} > floor {TVD_FLOOR}"),
                       {"pit": fit.to_json(), "rank_cells": ranks}, repro)
        else:
            smallest = min([fit.min_p_value] + [t["p_value"] for t in ranks])
            checks.append(VerifyCheck("distribution", True,
                                      f"{fit.tokens} drawn tokens, {len(fit.tests)} PIT and {len(ranks)} "
                                      f"rank-cell chi-square tests; smallest p = {smallest:.3g}, largest "
                                      f"binned TVD {max([fit.max_tvd] + [t['tvd'] for t in ranks]):.4f}"))
    else:
        checks.append(VerifyCheck("distribution", False, f"nothing checked: {u.size} drawn tokens, fewer "
                                                         f"than the {5 * PIT_BINS} a chi-square needs"))
    return checks


def run_judge(candidate, cases, *, device: str, spec: str | None = None, seed: int = 0,
              timeout: float | None = 60.0, progress=None, repro: str | None = None) -> Verdict:
    """Judge ``candidate`` on ``cases`` (module docstring); ``spec`` names it in REPRO lines.
    ``repro`` is the REPRO of the statistical checks, which pool every case (default: the line
    of the case that the failing test's group points to, exact when there is one case)."""
    spec = spec or getattr(candidate, "spec", None) or getattr(candidate, "__name__", "candidate")
    drawn = []
    for i, case in enumerate(cases):
        drawn.append(run_draws(candidate, case.recipe, case.seeds, device=device, timeout=timeout))
        if progress:
            progress(i + 1, len(cases), str(case.recipe))
        if drawn[-1].problem and "did not return" in drawn[-1].problem:
            break                                            # a hang: the rest would hang too
    return judge_draws(cases, drawn, spec=spec, device=device, seed=seed, repro=repro)


def judge_draws(cases, drawn, *, spec: str, device: str, seed: int = 0, repro: str | None = None) -> Verdict:
    """The verdict on the outputs ``drawn[i]`` of ``cases[i]`` (cases past the end of ``drawn``
    were not run)."""
    found = _Findings(spec, device)
    stats = {"acceptance": [], "u": [], "groups": [], "cells": [], "expected": [], "cases": []}
    rng = np.random.default_rng([seed, _PIT_SALT])
    for case, draws in zip(cases, drawn):
        _judge_case(case, draws, found, stats, rng)
    checks = _statistical_checks(found, stats, any(c.statistical for c in cases), repro)
    ran_detail = {
        "contract": f"{found.ran['contract']} recipes: tensor int64 [B, n+1] on the device, -1 layout, "
                    f"inputs unchanged, same seed -> same output",
        "support": f"{found.ran['support']} outputs: no event of probability zero",
        "greedy": f"{found.ran['greedy']} outputs on one-hot targets: token-identical to greedy decoding",
    }
    out = []
    for check in CHECKS:
        if check in found.first:
            out.append(found.first[check])
        elif check in ran_detail and found.ran[check]:
            out.append(VerifyCheck(check, True, ran_detail[check]))
        elif check in ran_detail and (check != "greedy" or any(c.recipe.family == "onehot_target"
                                                               for c in cases)):
            out.append(VerifyCheck(check, False, "nothing checked: no call returned a usable output"))
        else:
            out += [c for c in checks if c.check == check]
    calls = sum(len(d.outputs) for d in drawn)
    rows = sum(int(np.prod(d.outputs.shape[:2])) for d in drawn)
    return Verdict(spec, device, seed, tuple(out), len(cases), calls, rows)
