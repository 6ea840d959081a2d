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

from equiv.memory import rows_per_call
from equiv.ops.verify.draws import DrawsBase
from equiv.run import CandidateSpec, runner_for
from equiv.run.calling import budget_windows, deal, key_of
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


def call_windows(recipe, seeds, device) -> list:
    """``[(start, stop), ...]``: the calls of a recipe's rows when they do not fit one call under
    the memory budget (``equiv.memory.rows_per_call`` of ``recipe.bytes_per_row()``: an ``iid`` /
    ``wor`` EAGLE-sized tree at V ~ 150000 holds 36 MB a row): balanced windows, the first split
    as one call's rows are (``last_rows_apart``); ``[]`` when they fit (one probe, which splits
    them itself)."""
    if rows_per_call(recipe.bytes_per_row(), device) >= recipe.batch:
        return []
    return budget_windows(recipe.batch, recipe.bytes_per_row(), seeds[0] if len(seeds) else 0, device)


def run_draws(candidate, recipe, seeds, *, device: str, timeout: float | None, guarded: bool = True) -> TreeDraws:
    """``draw`` for ``candidate`` (a spec, ``Candidate`` or callable) through its runner. Rows
    that do not fit one call go in windows (``call_windows``), window ``j`` of the call seeded
    ``s`` with the generator seed ``s + j * WINDOW_SEED_STRIDE`` (as the chain's run_draws), each
    row built as in the whole call; the outputs are joined, so the judge sees every row."""
    target = runner_target(candidate, "verify_tree")
    seeds = [int(s) for s in seeds]
    budget = None if timeout is None else timeout * max(len(seeds), 1)
    runner = runner_for(target, device=device, timeout=budget, op="verify_tree")
    D = recipe.trees().max_depth
    empty = np.zeros((0, recipe.batch, D + 1), dtype=np.int64)
    windows = call_windows(recipe, seeds, device)
    parts = []
    for j, rows in enumerate(windows or [None]):
        payload = {"recipe": str(recipe), "seeds": seeds, "guarded": guarded}
        where = ""
        if rows is not None:
            payload.update(rows=list(rows), window=j)
            where = f" (rows {rows[0]}-{rows[1] - 1} of {recipe.batch}, call {j + 1} of the {len(windows)} it was sent in)"
        got = runner.probe("equiv.ops.verify_tree.calls:draw", payload, timeout=budget)
        if not got.ok:
            return TreeDraws(str(recipe), tuple(seeds), empty, empty, f"{got.problem}{where}", "crash or hang")
        v = got.value
        if v["problem"]:
            if rows is not None:
                return TreeDraws(str(recipe), tuple(seeds), empty, empty, f"{v['problem']}{where}", v.get("cause"))
            return TreeDraws(str(recipe), tuple(seeds), v["paths"], v["outputs"], v["problem"], v.get("cause"))
        parts.append((v["paths"], v["outputs"]))
    if len(parts) == 1:
        return TreeDraws(str(recipe), tuple(seeds), *parts[0])
    return TreeDraws(str(recipe), tuple(seeds), np.concatenate([p for p, _ in parts], axis=1),
                     np.concatenate([o for _, o in parts], axis=1))


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
