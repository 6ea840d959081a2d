"""The judge of a verifier: under the losslessness law (default) or the token-level law.

Two laws (``LAWS``). ``lossless`` (the default) judges what users rely on: the emitted text has
the target model's law, whatever the verifier accepts per draft (block verification and other
lossless variants pass); its checks are in lossless.py and ``LOSSLESS_CHECKS``. ``token`` judges
today's stricter per-draft law of token-level rejection sampling, described below; it can find a
defect with fewer draws where it applies. Under ``lossless`` the token law's exact checks still
run, and a verifier that breaks them while passing losslessness gets a *note* naming the
difference (``Verdict.notes``), not a failure. Both laws report *efficiency*: per statistical
recipe, the mean accept length (accepted drafts + 1) against the token-level optimum on the same
drafts, ``sum_k prod_{i<k} alpha_i`` averaged over rows (block verification is at or above it).

The token law. A verdict rests on seeded calls of the candidate on input recipes (``calls.run_draws``),
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
   the law (``equiv.stats.sampling_fit``, ``PIT_BINS`` bins): it sees mass moved between
   head and tail; and its rank cell (``RANK_EDGES``: rank 0, 1, 2, 3, 4-5, ... 8192+) against the
   exact expected count of each cell (``rank_fit``): it sees mass moved between single head
   tokens, which laws of different shapes would cancel in pooled PIT bins.

The law of a position splits exactly into (4) and the law of the drawn token given that it was
drawn, so (5) tests the residual at full strength instead of diluting it under the acceptance mass.

6. ``tail`` (Chernoff): tail tokens drawn twice or more, per drawn law, against a bound on
   their expected count (tail.py): it sees a law squeezed onto a few of the ~129k tail tokens, which bins miss.

Family-wise error: one judge run spends ``FAMILY_ALPHA = 1e-4``; under the token law 0.4 of it on
the acceptance tests, 0.2 each on the PIT, rank-cell and tail tests, Bonferroni-split inside each; a statistical test fails only when
it is significant AND its effect passes a floor (``ACCEPT_FLOOR = 0.01`` absolute on a rate,
``TVD_FLOOR = 0.01`` binned total variation), so it is neither flaky nor blind. Under the lossless
law a fifth each goes to the PIT, rank-cell, score, joint and tail tests, with floors a fifth of
the token law's (lossless.py); their groups are (family, position), and for the wide cases
(vocabularies past 2**17, ``OWN_GROUPS``) (family, purpose, position). The measured false-positive rate and power are in docs/verify.md.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from equiv.checks import Check
from equiv.verdict import Case, FirstFailures, JudgeVerdict
from equiv.ops.verify import lossless
from equiv.ops.verify.beside import ahead, draw_and_judge
from equiv.ops.verify.block_law import sequence_tests, sequences
from equiv.ops.verify.draws import run_draws
from equiv.ops.verify.independence import eligible, independence_check
from equiv.ops.verify.laws import (_PIT_SALT, ACCEPT_FLOOR, PIT_BINS, TVD_FLOOR, _Law, _law, _pit_table, _stops,
                                   acceptance_counts, acceptance_family, greedy_problem, layout_problem,
                                   pit_values, rank_fit, row_alpha, support_problem)
from equiv.ops.verify.lossless import LOSSLESS_TVD_FLOOR, SCORE_FLOOR, joint_tests, score_tests
from equiv.ops.verify.recipes import VerifyRecipe
from equiv.ops.verify.tail import repeat_tests
from equiv.run.timeouts import DEFAULT_TIMEOUT_S
from equiv.stats import Labels, sampling_fit
from equiv.validation import check_choice

CHECKS = ("contract", "support", "greedy", "acceptance", "distribution", "tail")
LOSSLESS_CHECKS = ("contract", "support", "greedy", "marginal", "joint", "tail")
LAWS = ("lossless", "token")
LAW_CHECKS = {"lossless": LOSSLESS_CHECKS, "token": CHECKS}
MORE_CHECKS = ("independence", "block_law")     # under both laws, where their cases ran (_more_checks)
_SHARE = {"token": {"acceptance": 0.4, "pit": 0.2, "rank": 0.2, "tail": 0.2},
          "lossless": {"pit": 0.2, "rank": 0.2, "score": 0.2, "joint": 0.2, "tail": 0.2}}
FAMILY_ALPHA = 1e-4
# purposes whose tokens form groups of their own under the lossless law: the vocabularies past
# 2**17 of the wide cases, a few hundred rows, were pooled with the realistic family's other
# cases (tens of thousands of tokens at smaller V) per position, and a residual cut to its top
# 1024 past V = 160000 (rank cells 3e-12 alone) was lost among them (p 0.009)
OWN_GROUPS = ("wide",)
EFFICIENCY_FLOOR, EFFICIENCY_Z = 0.02, 4.0     # a note (not a failure) below the token optimum
LAYOUT_WHO = "one that stops without a rejection, at an accept-length cap, and draws the draft there does"


def judged(check: str, passed: bool, detail: str, recipe: str | None = None, repro: str | None = None,
           evidence: dict | None = None) -> Check:
    """One check of the judge as the project's ``Check`` (stage ``judge``; the gate files it under
    its own stage): ``detail`` is one line; a failure names its ``recipe`` (text, and parsed as
    ``inputs``), its ``repro`` and its typed ``evidence`` (call, row, cause, position...)."""
    return Check("judge", check, passed, detail, subject=check,
                 inputs=None if recipe is None else VerifyRecipe.parse(recipe), evidence=evidence,
                 repro=repro, recipe=recipe, cause=None if evidence is None else evidence.get("cause"))


@dataclass(frozen=True)
class Verdict(JudgeVerdict):
    """Every check of one judge run, with what ran (recipes, calls, rows) and where."""

    candidate: str
    device: str
    seed: int
    checks: tuple
    recipes: int
    calls: int
    rows: int
    law: str = "lossless"
    notes: tuple = ()
    efficiency: tuple = ()           # one dict per statistical recipe (module docstring)

    def summary(self) -> str:
        return self.summary_of(f"{self.candidate} on {self.device}: {'PASS' if self.passed else 'FAIL'} under the "
                               f"{self.law} law ({self.recipes} recipes, {self.calls} calls, {self.rows} rows judged)",
                               "token optimum")

    def to_json(self) -> dict:
        return {"candidate": self.candidate, "device": self.device, "seed": self.seed,
                "passed": self.passed, "law": self.law, "recipes": self.recipes, "calls": self.calls,
                "rows": self.rows, "checks": [c.to_json() for c in self.checks], "notes": list(self.notes),
                "efficiency": list(self.efficiency)}


def repro_line(spec: str, recipe, calls: int, seed: int, device: str, law: str = "lossless") -> str:
    return (f"REPRO: equiv check --op verify --candidate {spec} --recipe '{recipe}' --calls {calls} "
            f"--seed {seed} --device {device}" + ("" if law == "lossless" else f" --law {law}"))


def _size(recipe) -> int:
    r = VerifyRecipe.parse(recipe) if isinstance(recipe, str) else recipe
    return r.batch * r.n * r.vocab


class _Findings(FirstFailures):
    """The first failure of each check (the smallest recipe showing it: ``FirstFailures``) and the
    counts of each check, as recipes are judged."""

    judged, size = staticmethod(judged), staticmethod(_size)

    def __init__(self, spec, device, law):
        self.spec, self.device, self.law = spec, device, law
        self.first: dict = {}
        self.notes: dict = {}
        self.ran: dict = {c: 0 for c in CHECKS + LOSSLESS_CHECKS}
        self.short = 0                           # greedy rows that stopped before greedy decoding's end

    def seed(self, case, call) -> int:           # the replay (call == calls) is named seed + calls
        return case.seed + call

    def repro(self, case) -> str:
        return repro_line(self.spec, case.recipe, case.calls, case.seed, self.device, self.law)

    def note(self, check, case, found, who="block verification does"):
        if check not in self.notes:
            self.notes[check] = (f"breaks the token-level law ({check}) on {case.recipe}: {found[2]}; "
                                 f"lossless verifiers may ({who}); --law token judges it")


def efficiency(recipe, outputs, law: _Law | None = None, stop=None) -> dict:
    """Mean accept length (accepted drafts + 1) against the token-level optimum on the same drafts;
    ``stop`` the last emitted positions (default: the token law's reading, ``_stops``)."""
    stop = _stops(recipe, outputs) if stop is None else stop
    reach = np.concatenate([np.ones((recipe.batch, 1)), np.cumprod(row_alpha(recipe, law), axis=1)], axis=1)
    got = (stop + 1).ravel().astype(np.float64)
    best = float(reach.sum(1).mean())
    return {"recipe": str(recipe), "rows": int(got.size), "accept_length": float(got.mean()),
            "stderr": float(got.std(ddof=1) / np.sqrt(got.size)) if got.size > 1 else 0.0,
            "token_optimum": best, "ratio": float(got.mean() / best)}


def _judge_case(case, draws, found: _Findings, stats: dict, rng) -> None:
    recipe = case.recipe
    if not draws.ok:
        found.fail("contract", case, (len(draws.outputs), None, f"the candidate {draws.problem}"),
                   cause=draws.cause or "contract")
        return
    outs = draws.outputs
    found.ran["contract"] += 1
    if case.replay:
        replay = np.flatnonzero((outs[-1] != outs[0]).any(-1))
        if replay.size:
            found.fail("contract", case, (0, int(replay[0]), f"the same generator seed gave "
                                          f"{outs[-1][replay[0]].tolist()} then {outs[0][replay[0]].tolist()}"),
                       cause="determinism")
    outs = case.judged(outs)
    token_law = found.law == "token"
    bad = layout_problem(recipe, outs) if token_law else lossless.layout_problem(recipe, outs)
    if bad:
        found.fail("contract", case, bad, cause="-1 layout")
        return
    token_layout = None if token_law else layout_problem(recipe, outs)
    if token_layout:                             # a text the token law reads otherwise (lossless.text_stops)
        found.note("-1 layout", case, token_layout, LAYOUT_WHO)
    law = _law(recipe, case.statistical and token_law) if recipe.drafts == "fixed" else None
    rows = outs.shape[0] * outs.shape[1]
    found.ran["support"] += rows
    bad = None if token_layout else support_problem(recipe, outs, law)   # the token law's reading
    if token_law and bad:
        found.fail("support", case, bad, cause=_support_cause(bad[2]))
    elif bad or token_layout:                    # the token law's support implies the target's
        if bad:
            found.note("support", case, bad)
        bad = lossless.support_problem(recipe, outs)
        if bad:
            found.fail("support", case, bad, cause="emitted law")
    if recipe.family == "onehot_target":
        found.ran["greedy"] += rows
        bad = greedy_problem(recipe, outs) if token_law else lossless.greedy_problem(recipe, outs)
        if bad:
            found.fail("greedy", case, bad, cause="greedy")
        elif not token_law:
            found.short += lossless.greedy_shortfall(recipe, outs)
    if not case.statistical or not token_law and recipe.drafts != "sampled":
        return                                   # losslessness is a law of drafts drawn from q
    stats["cases"].append(case)
    stats["efficiency"].append(efficiency(recipe, outs, law, None if token_law else lossless.text_stops(recipe, outs)))
    if token_law:
        stats["acceptance"] += [{**r, "case": case} for r in acceptance_counts(recipe, outs, law)]
        u, groups, cells, expected, tail = pit_values(recipe, outs, rng)
    else:
        got = lossless.lossless_values(recipe, outs, rng)
        u, groups, cells, expected, tail = (got[k] for k in ("u", "groups", "cells", "expected", "tail"))
        if case.purpose in OWN_GROUPS:           # FAMILY:PURPOSE:positionJ (OWN_GROUPS)
            groups = groups.renamed(lambda g: g.replace(f"{recipe.family}:", f"{recipe.family}:{case.purpose}:", 1))
        for label, pairs in got["joint"].items():
            stats["joint"].setdefault(label, []).append(pairs)
        stats["scores"].append(got["scores"])
    stats["u"].append(u)
    stats["groups"].append(groups)
    stats["cells"].append(cells)
    stats["expected"].append(expected)
    stats["tail"].setdefault(recipe.family, []).extend(tail)


def _support_cause(message: str) -> str:
    # the message is ours (support_problem), written from data; its kind is fixed by the branch
    for key, cause in (("residual", "residual law"), ("bonus", "bonus law"), ("accepted", "acceptance"),
                       ("rejected", "acceptance")):
        if key in message:
            return cause
    return "support"


def _case_of(stats, group):
    label = group.split(":")
    cases = [c for c in stats["cases"] if len(label) < 2 or c.recipe.family == label[0]]
    return cases[0] if cases else stats["cases"][0]


def _binned_checks(found, stats, name, repro, share) -> Check | None:
    """PIT and rank-cell tests of the drawn (token law) or emitted (lossless) tokens, and under
    the lossless law the score tests (lossless.py)."""
    u = np.concatenate(stats["u"]) if stats["u"] else np.zeros(0)
    if u.size < 5 * PIT_BINS:
        return judged(name, False, f"nothing checked: {u.size} tokens, fewer than the {5 * PIT_BINS} "
                                        f"a chi-square needs")
    floor = TVD_FLOOR if found.law == "token" else LOSSLESS_TVD_FLOOR
    groups = Labels.concat(stats["groups"])
    with ThreadPoolExecutor(3) as pool:         # three independent tests, mostly in NumPy
        fit = pool.submit(sampling_fit, u, groups, alpha=FAMILY_ALPHA * share["pit"], tvd_floor=floor,
                          bins=PIT_BINS)
        ranks = pool.submit(rank_fit, np.concatenate(stats["cells"]), np.concatenate(stats["expected"]),
                            groups, alpha=FAMILY_ALPHA * share["rank"], floor=floor)
        scores = pool.submit(score_tests, {k: tuple(np.concatenate([s[k][i] for s in stats["scores"]])
                                                    for i in range(3)) for k in stats["scores"][0]},
                             groups, FAMILY_ALPHA * share["score"]) \
            if "score" in share and stats["scores"] else None
        fit, ranks, scores = fit.result(), ranks.result(), scores.result() if scores else []
    effect = f"binned TVD {{:.4f}} > floor {floor}"
    failed = [(t.group, t.n, f"chi-square {t.chi2:.1f} over {t.bins} PIT bins", t.p_value,
               effect.format(t.tvd), len(fit.tests), share["pit"]) for t in fit.tests if t.failed]
    failed += [(t["group"], t["n"], f"chi-square {t['chi2']:.1f} over {t['df'] + 1} rank cells",
                t["p_value"], effect.format(t["tvd"]), len(ranks), share["rank"]) for t in ranks if t["failed"]]
    # the most significant score group first: of the side score's groups "from position m", the
    # one nearest where a tilt starts (an earlier m fails too, diluted)
    failed += [(t["group"], t["n"], f"{t['score']} score off its exact mean by {t['z']:+.1f} standard deviations "
                f"(Bernstein)", t["p_value"], f"total variation at least {t['tv_bound']:.4f} > floor {SCORE_FLOOR}",
                len(scores), share["score"]) for t in sorted(scores, key=lambda t: t["p_value"]) if t["failed"]]
    if failed:                                   # a group names the cause; the pooled test does not
        group, n, what, p, shown, m, part = min(failed, key=lambda f: f[0] == "pooled")
        found.fail(name, _case_of(stats, group), (None, None,
                   f"{group} tokens ({n}): {what}, p = {p:.3g} (alpha {FAMILY_ALPHA * part:g} over "
                   f"{m} tests), {shown}"),
                   {"group": group, "pit": fit.to_json(), "rank_cells": ranks, "scores": scores}, repro,
                   cause=_group_cause(group))
        return None
    smallest = min([fit.min_p_value] + [t["p_value"] for t in ranks + scores])
    told = f", {len(scores)} score tests (largest |z| {max(abs(t['z']) for t in scores):.1f})" if scores else ""
    return judged(name, True, f"{fit.tokens} tokens, {len(fit.tests)} PIT and {len(ranks)} rank-cell "
                                   f"chi-square tests{told}; smallest p = {smallest:.3g}, largest binned TVD "
                                   f"{max([fit.max_tvd] + [t['tvd'] for t in ranks]):.4f}")


def _group_cause(group: str) -> str:
    slot = group.split(":")[-1]
    if slot.startswith("residual"):
        return "residual law"
    if slot == "bonus":
        return "bonus law"
    if slot.startswith("position"):
        return f"emitted law at {slot.replace('position', 'position ')}"
    if slot.startswith("from position"):         # the side score (lossless.py): accepted vs rejected mass,
        # which a wrong acceptance rule and a wrong residual move alike (the token law's findings say which)
        return f"acceptance or residual from position {slot[len('from position'):]} on"
    return "drawn token law" if slot == "pooled" else slot


def _pooled_check(found, stats, name, tests, what, repro, cause) -> Check | None:
    failed = sorted((t for t in tests if t["failed"]), key=lambda t: t["group"] == "pooled")
    if not tests and name == "tail":             # the other tests saw the draws; no law had a tail
        return judged(name, True, "no draw landed in a tail (tokens of probability under "
                                       "1 / (64 draws)): nothing to repeat at these sizes")
    if not tests:
        return judged(name, False, f"nothing checked: no {what}")
    if failed:
        t = failed[0]
        shown = (f"{t['repeats']:.0f} tail tokens drawn twice or more among {t['tail_draws']} tail draws where "
                 f"the law allows {t['allowed']:.3g} ({t['ratio']:.3g}x), Chernoff p = {t['p_value']:.3g} < "
                 f"{t['level']:.3g}"
                 if name == "tail" else
                 f"chi-square {t['chi2']:.1f} over {t['df'] + 1} cells ({t['n']} pairs), p = {t['p_value']:.3g}"
                 f" < {t['level']:.3g}, binned TVD {t['tvd']:.4f} > floor {LOSSLESS_TVD_FLOOR}")
        found.fail(name, _case_of(stats, t["group"]), (None, None, f"{t['group']}: {shown}"),
                   {"group": t["group"], "tests": tests}, repro, cause=cause(t["group"]))
        return None
    return judged(name, True, f"{len(tests)} {what} tests; smallest p = "
                                   f"{min(t['p_value'] for t in tests):.3g}")


def _acceptance_check(found, stats, repro) -> Check | None:
    part = FAMILY_ALPHA * _SHARE["token"]["acceptance"]
    if not stats["acceptance"]:
        return judged("acceptance", False, "nothing checked: no statistical recipe reached an "
                                                "acceptance probability strictly in (0, 1)")
    tests = acceptance_family(stats["acceptance"], part)
    failed = [t for t in tests if t["failed"]]
    if failed:
        t = failed[0]
        found.fail("acceptance", t["case"], (None, None,
                   f"problem {t['problem']} position {t['position']}: accepted {t['successes']} / "
                   f"{t['trials']} ({t['rate']:.4f}) vs exact {t['alpha']:.4f}, binomial p = "
                   f"{t['p_value']:.3g} < {t['level']:.3g} (alpha {part:g} over {len(tests)} "
                   f"tests), |diff| {abs(t['rate'] - t['alpha']):.4f} > floor {ACCEPT_FLOOR}"),
                   {k: t[k] for k in ("problem", "position", "trials", "successes", "alpha", "p_value")},
                   repro, cause=f"acceptance at position {t['position']}")
        return None
    return judged("acceptance", True, f"{len(tests)} binomial tests, {sum(t['trials'] for t in tests)} "
                                           f"trials; smallest p = {min(t['p_value'] for t in tests):.3g}, "
                                           f"largest |rate - alpha| = "
                                           f"{max(abs(t['rate'] - t['alpha']) for t in tests):.4f}")


def _statistical_checks(found: _Findings, stats: dict, repro: str | None) -> list:
    share = _SHARE[found.law]
    if not stats["cases"]:
        return []
    out = [_binned_checks(found, stats, "distribution" if found.law == "token" else "marginal", repro, share),
           _pooled_check(found, stats, "tail", repeat_tests(stats["tail"], FAMILY_ALPHA * share["tail"]),
                         "tail-repeat", repro, lambda g: "tail concentration")]
    if found.law == "token":
        out.append(_acceptance_check(found, stats, repro))
    else:
        joint = {k: np.concatenate(v) for k, v in stats["joint"].items()}
        out.append(_pooled_check(found, stats, "joint", joint_tests(joint, FAMILY_ALPHA * share["joint"],
                                                                    LOSSLESS_TVD_FLOOR),
                                 "neighbouring-position chi-square", repro,
                                 lambda g: f"joint law of {g.split(':')[-1]}"))
    return [c for c in out if c is not None]


def run_judge(candidate, cases, *, device: str, spec: str | None = None, seed: int = 0,
              timeout: float | None = DEFAULT_TIMEOUT_S, progress=None, repro: str | None = None,
              law: str = "lossless") -> Verdict:
    """Judge ``candidate`` on ``cases`` under ``law`` (module docstring); ``spec`` names it in REPRO
    lines. ``repro`` is the REPRO of the statistical checks, which pool every case (default: the
    line of the case that the failing test's group points to, exact when there is one case)."""
    spec = spec or getattr(candidate, "spec", None) or getattr(candidate, "__name__", "candidate")
    judging = _Judging(spec, device, seed, law)
    with tables_ahead(cases, judging.law):
        drawn = draw_and_judge(cases, lambda case: run_draws(candidate, case.recipe, case.seeds, device=device,
                                                             timeout=timeout), judging.add, progress)
        return judging.verdict(cases, drawn, repro)


def _tables(case, law: str) -> list:
    """What judging ``case`` under ``law`` reads of its recipe's exact law, as calls that make
    it (each cached per problem set: ``recipes.problem_cache``)."""
    r = case.recipe
    if not case.statistical:
        return []
    if law == "lossless":
        return [] if r.drafts != "sampled" else [lambda: lossless.target_table(r), lambda: lossless.score_table(r),
                                                 lambda: _law(r, False)]
    return [lambda: _law(r, True), lambda: _pit_table(r)] if r.drafts == "fixed" else []


def tables_ahead(cases, law: str):
    """``beside.ahead`` of the statistical cases' tables (``_tables``): sorts and scores over the
    vocabulary, most of the judge's host time, made while the candidate is called."""
    return ahead([job for case in cases for job in _tables(case, law)])


def judge_draws(cases, drawn, *, spec: str, device: str, seed: int = 0, repro: str | None = None,
                law: str = "lossless") -> Verdict:
    """The verdict under ``law`` on the outputs ``drawn[i]`` of ``cases[i]`` (cases past the end of
    ``drawn`` were not run)."""
    judging = _Judging(spec, device, seed, law)
    for case, draws in zip(cases, drawn):
        judging.add(case, draws)
    return judging.verdict(cases, drawn, repro)


class _Judging:
    """One verdict in the making: each case's outputs judged as they come (``add``, in the order
    of the cases), then the pooled tests (``verdict``)."""

    def __init__(self, spec: str, device: str, seed: int, law: str):
        self.law = check_choice("law", law, LAWS)
        self.spec, self.device, self.seed = spec, device, seed
        self.found = _Findings(spec, device, self.law)
        self.stats = {"acceptance": [], "u": [], "groups": [], "cells": [], "expected": [], "cases": [],
                      "tail": {}, "joint": {}, "efficiency": [], "scores": []}
        self.rng = np.random.default_rng([seed, _PIT_SALT])
        self.blocks, self._pool = [], None       # each block-law case's continued rows, as they come

    def add(self, case, draws) -> None:
        if self.law == "lossless" and case.statistical and case.recipe.drafts == "sampled":
            # its rows continued for the block tests (block_law.sequences: a generator of the
            # case's own) in one more thread, while this one judges the case and the next draws
            self._pool = self._pool or ThreadPoolExecutor(1)
            self.blocks.append((case, self._pool.submit(sequences, case, draws, self.seed)))
        _judge_case(case, draws, self.found, self.stats, self.rng)

    def verdict(self, cases, drawn, repro) -> Verdict:
        try:
            items = [(case,) + got for case, f in self.blocks if (got := f.result()) is not None]
        finally:
            if self._pool is not None:
                self._pool.shutdown()
        return _verdict(cases, drawn, self.found, self.stats, spec=self.spec, device=self.device,
                        seed=self.seed, repro=repro, law=self.law, blocks=items if self.blocks else None)


def _verdict(cases, drawn, found, stats, *, spec, device, seed, repro, law, blocks) -> Verdict:
    # the block tests (on ``blocks``, the continued rows; None: no case for them) need only the
    # outputs: run in a thread beside the pooled tests (mostly NumPy, which lets go of the GIL),
    # their findings added after them, in the same order as before
    with ThreadPoolExecutor(1) as beside:
        tests = beside.submit(sequence_tests, blocks) if blocks is not None else None
        checks = _statistical_checks(found, stats, repro)
        tests = tests.result() if tests is not None else None
    ran_detail = {
        "contract": f"{found.ran['contract']} recipes: tensor int64 [B, n+1] on the device, -1 layout, "
                    f"inputs unchanged, same seed -> same output",
        "support": f"{found.ran['support']} outputs: no event of probability zero"
                   + (" under the target" if law == "lossless" else ""),
        "greedy": f"{found.ran['greedy']} outputs on one-hot targets: "
                  + ("token-identical to greedy decoding" if law == "token" else
                     f"every emitted token the argmax (greedy decoding's text or a prefix; {found.short} "
                     f"stopped before its end: efficiency, not a defect)"),
    }
    statistical = any(c.statistical for c in cases)
    out = []
    for check in LAW_CHECKS[law]:
        if check in found.first:
            out.append(found.first[check])
        elif check in ran_detail and found.ran[check]:
            out.append(judged(check, True, ran_detail[check]))
        elif check in ran_detail and (check != "greedy" or any(c.recipe.family == "onehot_target"
                                                               for c in cases)):
            out.append(judged(check, False, "nothing checked: no call returned a usable output"))
        elif statistical and check not in ran_detail:
            out += [c for c in checks if c.name == check] or [
                judged(check, False, "nothing checked: no call returned a usable output")]
    out += _more_checks(cases, drawn, found, tests)
    calls = sum(len(d.outputs) for d in drawn)
    rows = sum(int(np.prod(d.outputs.shape[:2])) for d in drawn)
    notes = tuple(found.notes.values()) if not any(not c.passed for c in out) else ()
    notes += tuple(f"accepts fewer drafts than the token-level optimum on {e['recipe']}: accept length "
                   f"{e['accept_length']:.3f} vs {e['token_optimum']:.3f} ({e['ratio']:.3f}x, z = "
                   f"{(e['accept_length'] - e['token_optimum']) / e['stderr']:.1f}): slower, not lossy"
                   for e in stats["efficiency"] if "drafts=sampled" in e["recipe"]     # fixed drafts: no optimum
                   and e["ratio"] < 1 - EFFICIENCY_FLOOR and e["stderr"] > 0
                   and (e["accept_length"] - e["token_optimum"]) / e["stderr"] < -EFFICIENCY_Z)
    return Verdict(spec, device, seed, tuple(out), len(cases), calls, rows, law, notes,
                   tuple(stats["efficiency"]))


def _more_checks(cases, drawn, found: _Findings, tests: list | None) -> list:
    """``independence`` (independence.py) on the cases whose rows have identical inputs and
    ``block_law`` (block_law.py: ``tests``, from ``sequence_tests``) on the statistical ones: one
    check each, present only where such cases ran (a recipe of the other kinds has nothing for
    them to judge)."""
    out = independence_check([(c, d) for c, d in zip(cases, drawn) if eligible(c, d)], found, judged)
    if tests is not None:
        bad = [(c, t) for c, t in tests if t["failed"]]
        if bad:
            c, t = min(bad, key=lambda ct: ct[1]["kind"] == "pair score")
            shown = (f"chi-square {t['chi2']:.1f} over {t['df'] + 1} cells ({t['n']} blocks), p = {t['p_value']:.3g} "
                     f"< {t['level']:.3g}, plug-in TV {t['tvd']:.4f}" if "chi2" in t else
                     f"z = {t['z']:+.1f}, Bernstein p = {t['p_value']:.3g} < {t['level']:.3g}, shift "
                     f"{t['tv_bound']:.4f} > floor")
            found.fail("block_law", c, (None, None, f"{t['label']}: {shown}"), {"tests": [t for _, t in tests]},
                       cause="joint law of the emitted block")
            out.append(found.first["block_law"])
        elif tests:
            exact = [t for _, t in tests if "chi2" in t]
            out.append(judged("block_law", True, f"{len(exact)} exact tables "
                                   f"({sum(t['n'] for t in exact if 'whole' in t['kind'])} blocks), "
                                   f"{len(tests) - len(exact)} pair-score tests; smallest p = "
                                   f"{min(t['p_value'] for _, t in tests):.3g}"))
    return out
