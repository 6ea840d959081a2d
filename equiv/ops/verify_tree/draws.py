"""How the judge asks for seeded calls of a tree verifier on one recipe, and what comes back.

Plan. ``run_draws`` asks the candidate's runner for the probe ``equiv.ops.verify_tree.calls:draw``
(``calls.py``: it runs where the candidate is called, with torch) and returns a ``TreeDraws``:
the accepted paths and outputs of each call, or the runner's one-line problem (a hang, an exit, a
signal: ``crash or hang``). ``declaration`` reads what a verifier declares (its ``drafts`` and
``targets`` attributes, the probe ``declared``); ``calling_of`` deals a case's calling classes
from its first seed. This module imports no torch: the gate's plan reads it at its start.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from equiv.ops.verify.draws import DrawsBase
from equiv.run import CandidateSpec, runner_for
from equiv.run.calling import deal, key_of
from equiv.run.spec import runner_target

INPUT_NAMES = ("parents", "draft_token_ids", "draft_probs", "target_probs")
SEED_UNIT = 100                  # plans.py: slot i's generator seeds from 1000 s + 100 i on


def calling_of(seeds, device="cpu"):
    """The calling classes of the case whose calls use ``seeds`` (``equiv.run.calling.deal``):
    deterministic from the case, so its REPRO line replays them."""
    return deal(key_of(seeds[0], SEED_UNIT), len(seeds), len(INPUT_NAMES), device)


@dataclass(frozen=True)
class TreeDraws(DrawsBase):
    recipe: str
    seeds: tuple
    paths: np.ndarray
    outputs: np.ndarray
    problem: str | None = None
    cause: str | None = None


def run_draws(candidate, recipe, seeds, *, device: str, timeout: float | None, guarded: bool = True) -> TreeDraws:
    """``draw`` for ``candidate`` (a spec, ``Candidate`` or callable) through its runner."""
    target = runner_target(candidate, "verify_tree")
    payload = {"recipe": str(recipe), "seeds": [int(s) for s in seeds], "guarded": guarded}
    budget = None if timeout is None else timeout * max(len(payload["seeds"]), 1)
    runner = runner_for(target, device=device, timeout=budget, op="verify_tree")
    got = runner.probe("equiv.ops.verify_tree.calls:draw", payload, timeout=budget)
    want = (0, recipe.batch, recipe.trees().max_depth + 1)
    if not got.ok:
        empty = np.zeros(want, dtype=np.int64)
        return TreeDraws(str(recipe), tuple(payload["seeds"]), empty, empty, f"{got.problem}", "crash or hang")
    v = got.value
    return TreeDraws(str(recipe), tuple(payload["seeds"]), v["paths"], v["outputs"], v["problem"], v.get("cause"))


def declared(fn, device, payload) -> dict:
    """The probe that reads what a verifier declares: its ``drafts`` and ``targets`` attributes."""
    drafts, targets = getattr(fn, "drafts", None), getattr(fn, "targets", None)
    return {"drafts": drafts if isinstance(drafts, str) else None,
            "targets": targets if isinstance(targets, str) else None}


def declaration(candidate, *, device: str, timeout: float | None) -> dict:
    """``declared`` for ``candidate`` through its runner ({} when the runner cannot answer)."""
    if callable(candidate) and not isinstance(candidate, CandidateSpec):
        return declared(getattr(candidate, "fn", candidate), device, {})
    runner = runner_for(CandidateSpec.parse(candidate, "verify_tree"), device=device, timeout=timeout,
                        op="verify_tree")
    got = runner.probe("equiv.ops.verify_tree.calls:declared", {}, timeout=timeout)
    return got.value if got.ok else {}
