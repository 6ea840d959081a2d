"""How the judge asks for seeded calls of a verifier on one input recipe, and what comes back.

Plan. ``run_draws`` asks the candidate's runner for the probe ``equiv.ops.verify.calls:draw``
(``calls.py``: it runs where the candidate is called, with torch), under a time-out of ``timeout``
per call: a verifier that hangs, exits, is killed or raises a ``BaseException`` becomes a
``Draws`` with the runner's one-line problem, and the judge goes on. A recipe too large for one
call under the memory budget (``equiv.memory``: ``--max-gpu-memory``, the inputs' bytes times its
working copies) goes in windows of rows, one probe each, joined again: the same rows, every one
built as in the whole batch; only the generator seeds of the windows after the first differ
(``window_seeds``). A call of ``equiv.run.calling.SPLIT_FROM`` rows or more also sends its last
row alone and the 2-4 rows before it as a call of their own (``equiv.run.calling.last_rows_apart``):
every case then meets the batch classes 1 and 2-4 that engines run at low load, where the exact
checks see them (a verifier that squeezes a batch of one to a vector passed every plan before:
the coverage said "not reached: 1"); a law wrong only at batch 1 is not seen (one row a case).
``calling_of`` deals a case's calling classes from its first seed. This module imports no
torch: the gate's plan reads it at its start.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from equiv.run import runner_for
from equiv.run.calling import budget_windows, deal, key_of, window_seed
from equiv.run.spec import runner_target

INPUT_NAMES = ("draft_token_ids", "draft_probs", "target_probs")
SEED_UNIT = 1000                 # plans.py: case i's generator seeds from 1000 * (s + i) on


def calling_of(seeds, device="cpu"):
    """The calling classes of the case whose calls use ``seeds`` (``equiv.run.calling.deal``):
    deterministic from the case, so its REPRO line replays them."""
    return deal(key_of(seeds[0], SEED_UNIT), len(seeds), len(INPUT_NAMES), device)




class DrawsBase:
    """What the chain's and the tree's draws records share: ``ok`` when the calls met the contract."""

    problem: str | None

    @property
    def ok(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class Draws(DrawsBase):
    """Outputs of seeded calls on one recipe. ``outputs`` is ``[calls, B, n+1]`` int64 for the
    calls that ran well; ``problem`` the first contract problem (one line), else None."""

    recipe: str
    seeds: tuple
    outputs: np.ndarray
    problem: str | None = None
    cause: str | None = None


def window_seeds(payload) -> list:
    """The generator seeds of a probe's calls: window ``j`` of a call seeded ``s`` (``run_draws``)
    draws with ``s + j * WINDOW_SEED_STRIDE``; the first window, and a whole call, with ``s``."""
    return [window_seed(s, payload.get("window", 0)) for s in payload["seeds"]]


def bytes_per_row(recipe) -> int:
    """The input bytes of one row of ``recipe``: target ``[n+1, V]`` and draft ``[n, V]`` float32
    with their padding, draft tokens ``[n]`` int64 (what ``equiv.memory.rows_per_call`` divides)."""
    width = recipe.vocab + recipe.pad
    floats = (recipe.n + 1 + (recipe.n if recipe.draft == "probs" else 0)) * width
    return 4 * floats + 8 * (recipe.n + recipe.pad)


def call_windows(recipe, seeds, device) -> list:
    """``[(start, stop), ...]``: the calls of a recipe's rows (module docstring): windows under
    the memory budget, the last split into its rows but the last 3-5, 2-4 rows (by the first
    seed) and its last row, when it holds ``SPLIT_FROM`` rows or more."""
    return budget_windows(recipe.batch, bytes_per_row(recipe), seeds[0] if len(seeds) else 0, device)


def run_draws(candidate, recipe, seeds, *, device: str, timeout: float | None) -> Draws:
    """``draw`` for ``candidate`` (a spec, ``Candidate`` or callable) through its runner. A recipe
    whose rows do not fit one call under the memory budget (``equiv.memory.rows_per_call``) is
    sent in windows of rows, and the last rows of a call apart (``call_windows``): window ``j``
    of the call seeded ``s`` draws with the generator seed ``s + j * WINDOW_SEED_STRIDE``, and
    the windows' outputs are joined, so the judge sees every row of the recipe, each built as in
    one call, in one ``[calls, B, n+1]`` array."""
    seeds = [int(s) for s in seeds]
    windows = call_windows(recipe, seeds, device)
    budget = None if timeout is None else timeout * max(len(seeds), 1)
    runner = runner_for(runner_target(candidate, "verify"), device=device, timeout=budget, op="verify")
    empty = np.zeros((0, recipe.batch, recipe.n + 1), dtype=np.int64)
    parts = []
    for j, (start, stop) in enumerate(windows):
        payload = {"recipe": str(recipe), "seeds": seeds}
        where = ""
        if len(windows) > 1:
            payload.update(rows=[start, stop], window=j)
            where = f" (rows {start}-{stop - 1} of {recipe.batch}, call {j + 1} of the {len(windows)} it was sent in)"
        got = runner.probe("equiv.ops.verify.calls:draw", payload, timeout=budget)
        if not got.ok:
            return Draws(str(recipe), tuple(seeds), empty, f"{got.problem}{where}", "crash or hang")
        if got.value["problem"] and len(windows) > 1:
            return Draws(str(recipe), tuple(seeds), empty, f"{got.value['problem']}{where}", got.value.get("cause"))
        if got.value["problem"]:
            return Draws(str(recipe), tuple(seeds), got.value["outputs"], got.value["problem"], got.value.get("cause"))
        parts.append(got.value["outputs"])
    return Draws(str(recipe), tuple(seeds), parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1))
