"""How the judge calls a verifier: seeded calls on one input recipe, through the runner.

Plan. ``draw(fn, device, payload)`` is a *probe* of ``equiv.run``: our trusted code that the
runner runs next to the live callable (in the supervised worker for a user's verifier,
in-process for ours). It builds the recipe's inputs once on ``device``, each inside a guard band
(``equiv.run.guard.Guarded``: the one rule for "modified its input"), and calls
``fn(draft_token_ids, draft_probs, target_probs, generator)`` once per seed with a fresh
``torch.Generator`` on that device. After every call it checks what the contract fixes without
statistics -- a ``torch.Tensor``, int64, ``[B, n+1]``, on the inputs' device -- and the guard
bands, after the device synchronized. It returns plain values (they cross the process boundary):
``{"outputs": [calls, B, n+1] int64, "problem": one line or None, "cause": its kind}`` --
``cause`` is data the diagnosis reads: ``"raise"``, ``"output type"`` or ``"input write"``
(the runner's own failures -- hang, exit, signal -- are ``"crash or hang"``). A repeated seed is how the
judge asks whether the same generator seed gives the same output.

``run_draws`` asks the candidate's runner for that probe, under a time-out of ``timeout`` per
call: a verifier that hangs, exits, is killed or raises a ``BaseException`` becomes a ``Draws``
with the runner's one-line problem, and the judge goes on. A recipe too large for one call under
the memory budget (``equiv.memory``: ``--max-gpu-memory``, the inputs' bytes times its working
copies) goes in windows of rows, one probe each, joined again: the same rows, every one built as
in the whole batch; only the generator seeds of the windows after the first differ.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from equiv.memory import row_windows, rows_per_call
from equiv.run.calling import Relabel, deal, key_of
from equiv.run.seeded import seeded_calls

from equiv.run.timeouts import DEFAULT_TIMEOUT_S
from equiv.errors import CandidateLoadError, EquivError
from equiv.ops.verify.recipes import VerifyRecipe
from equiv.run import CandidateSpec, Seeded, runner_for
from equiv.run.load import Candidate

INPUT_NAMES = ("draft_token_ids", "draft_probs", "target_probs")
SEED_UNIT = 1000                 # plans.py: case i's generator seeds from 1000 * (s + i) on


def calling_of(seeds, device="cpu"):
    """The calling classes of the case whose calls use ``seeds`` (``equiv.run.calling.deal``):
    deterministic from the case, so its REPRO line replays them."""
    return deal(key_of(seeds[0], SEED_UNIT), len(seeds), len(INPUT_NAMES), device)


# a rewritten history's first call: the same geometry, other contents (the law under other token names)
OTHER_CONTENTS = Relabel(tokens=(0,), tables=(1, 2))
# The generator seeds of a call's windows of rows (run_draws): s, s + 2**20, s + 2 * 2**20, ... A
# plan's seeds span less than 2**20 (1000 per case), and the stride stays within 32 bits: torch's
# CPU generator keeps only a seed's low 32 bits, so a stride of 2**40 gave every window the same
# draws (the tail test then failed torch_sampler: 65 tail tokens drawn twice where 1.8 were allowed).
WINDOW_SEED_STRIDE = 2 ** 20


@dataclass(frozen=True)
class Draws:
    """Outputs of seeded calls on one recipe. ``outputs`` is ``[calls, B, n+1]`` int64 for the
    calls that ran well; ``problem`` the first contract problem (one line), else None."""

    recipe: str
    seeds: tuple
    outputs: np.ndarray
    problem: str | None = None
    cause: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


def _shape_problem(out, want, device) -> str | None:
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch

    if not isinstance(out, torch.Tensor):
        return f"returned a {type(out).__name__}, not a torch.Tensor of token ids"
    if out.dtype != torch.int64:
        return f"returned dtype {str(out.dtype).replace('torch.', '')}, not int64"
    if tuple(out.shape) != want:
        return f"returned shape {list(out.shape)}, not {list(want)} ([B, n+1])"
    if out.device != device:
        return f"returned a tensor on {out.device}, not on the inputs' device {device}"
    return None


def window_seeds(payload) -> list:
    """The generator seeds of a probe's calls: window ``j`` of a call seeded ``s`` (``run_draws``)
    draws with ``s + j * WINDOW_SEED_STRIDE``; the first window, and a whole call, with ``s``."""
    return [int(s) + payload.get("window", 0) * WINDOW_SEED_STRIDE for s in payload["seeds"]]


def draw(fn, device, payload) -> dict:
    """The probe (module docstring): ``payload = {"recipe": str, "seeds": [int, ...]}``,
    ``"rows": [start, stop]`` and ``"window": j`` to build and call those rows of the batch alone
    (``run_draws``: every window is called as the whole call would be, with ``window_seeds``), and
    ``"guarded": False`` to skip the guard bands (the calibration's own trusted samplers only)."""
    recipe = VerifyRecipe.parse(payload["recipe"])
    rows = payload.get("rows")                       # a window of rows (run_draws), else all
    built = recipe.build(device, rows=rows)
    dev = built[2].device
    want = (recipe.batch if rows is None else rows[1] - rows[0], recipe.n + 1)
    outs, problem, cause = seeded_calls(fn, built, INPUT_NAMES, window_seeds(payload),
                                        lambda out: _shape_problem(out, want, dev),
                                        guarded=payload.get("guarded", True),
                                        calling=calling_of(payload["seeds"], dev), relabel=OTHER_CONTENTS)
    outs = [o.cpu().numpy() for o in outs]
    stacked = np.stack(outs) if outs else np.zeros((0, *want), dtype=np.int64)
    return {"outputs": stacked, "problem": problem, "cause": cause}


def runner_target(candidate):
    """What the runner is asked for: the spec (a user's verifier runs in the worker, ours in
    process), or the callable itself when the caller handed one."""
    if isinstance(candidate, Candidate):             # named by a spec: its runner; else the callable
        try:
            return CandidateSpec.parse(candidate.spec, "verify")
        except CandidateLoadError:
            return candidate.fn
    return CandidateSpec.parse(candidate, "verify")


def bytes_per_row(recipe) -> int:
    """The input bytes of one row of ``recipe``: target ``[n+1, V]`` and draft ``[n, V]`` float32
    with their padding, draft tokens ``[n]`` int64 (what ``equiv.memory.rows_per_call`` divides)."""
    width = recipe.vocab + recipe.pad
    floats = (recipe.n + 1 + (recipe.n if recipe.draft == "probs" else 0)) * width
    return 4 * floats + 8 * (recipe.n + recipe.pad)


def run_draws(candidate, recipe, seeds, *, device: str, timeout: float | None) -> Draws:
    """``draw`` for ``candidate`` (a spec, ``Candidate`` or callable) through its runner. A recipe
    whose rows do not fit one call under the memory budget (``equiv.memory.rows_per_call``) is
    sent in windows of rows: window ``j`` of the call seeded ``s`` draws with the generator seed
    ``s + j * WINDOW_SEED_STRIDE``, and the windows' outputs are joined, so the judge sees every
    row of the recipe, each built as in one call, in one ``[calls, B, n+1]`` array."""
    seeds = [int(s) for s in seeds]
    windows = row_windows(recipe.batch, rows_per_call(bytes_per_row(recipe), device))
    budget = None if timeout is None else timeout * max(len(seeds), 1)
    runner = runner_for(runner_target(candidate), device=device, timeout=budget, op="verify")
    empty = np.zeros((0, recipe.batch, recipe.n + 1), dtype=np.int64)
    parts = []
    for j, (start, stop) in enumerate(windows):
        payload = {"recipe": str(recipe), "seeds": seeds}
        where = ""
        if len(windows) > 1:
            payload.update(rows=[start, stop], window=j)
            where = f" (rows {start}-{stop - 1} of {recipe.batch}, one of {len(windows)} calls under the memory budget)"
        got = runner.probe("equiv.ops.verify.calls:draw", payload, timeout=budget)
        if not got.ok:
            return Draws(str(recipe), tuple(seeds), empty, f"{got.problem}{where}", "crash or hang")
        if got.value["problem"] and len(windows) > 1:
            return Draws(str(recipe), tuple(seeds), empty, f"{got.value['problem']}{where}", got.value.get("cause"))
        if got.value["problem"]:
            return Draws(str(recipe), tuple(seeds), got.value["outputs"], got.value["problem"], got.value.get("cause"))
        parts.append(got.value["outputs"])
    return Draws(str(recipe), tuple(seeds), parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1))


@dataclass(frozen=True)
class HostTriple:
    """A verifier's inputs as host arrays, built again on the runner's device (an ``equiv.run``
    input description, for callers that hold live tensors: the MTP harness)."""

    draft_token_ids: np.ndarray
    draft_probs: np.ndarray | None
    target_probs: np.ndarray

    def build(self, device="cpu"):
        # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
        import torch

        def put(a):
            return None if a is None else torch.from_numpy(np.ascontiguousarray(a)).to(device)
        return put(self.draft_token_ids), put(self.draft_probs), put(self.target_probs)


def verifier_function(candidate, device: str, timeout: float | None = DEFAULT_TIMEOUT_S):
    """``call(d, q, p, seed) -> output tensor on p's device`` for ``candidate``: ours and a
    callable run in this process on the live tensors; a user's spec runs in its supervised worker
    on a copy. A call that goes wrong raises ``EquivError`` with the runner's one-line problem."""
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch

    runner = runner_for(runner_target(candidate), device=device, timeout=timeout, op="verify")
    if not runner.isolated:
        def local(d, q, p, seed):
            return runner.fn(d, q, p, torch.Generator(device=p.device).manual_seed(int(seed)))
        return local

    def isolated(d, q, p, seed):
        host = HostTriple(d.cpu().numpy(), None if q is None else q.cpu().numpy(), p.cpu().numpy())
        got = runner.call(host, Seeded(int(seed)), names=INPUT_NAMES)
        if not got.ok:
            raise EquivError(f"the verifier {got.problem}")
        out = got.value
        if getattr(out, "dtype", None) != "int64" or tuple(out.shape) != (d.shape[0], d.shape[1] + 1):
            raise EquivError(f"the verifier returned {getattr(out, 'dtype', type(out).__name__)} "
                             f"{list(getattr(out, 'shape', ()))}, not int64 [B, n+1]")
        return torch.from_numpy(out.values).to(p.device)
    return isolated
