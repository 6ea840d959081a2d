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

``equiv.ops.verify.draws.run_draws`` asks the candidate's runner for this probe (that module,
which the gate's plan reads at its start, imports no torch; this one runs where the candidate is
called and imports torch at its top). ``verifier_function`` is what a feature asks this op for
(``Op.features("caller")``: the MTP harness), ``HostTriple`` the inputs it sends a worker.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from equiv.errors import EquivError
from equiv.ops.verify.draws import INPUT_NAMES, calling_of, window_seeds
from equiv.ops.verify.recipes import VerifyRecipe
from equiv.run import Seeded, runner_for
from equiv.run.seeded import Relabel, int64_problem, seeded_calls
from equiv.run.spec import runner_target
from equiv.run.timeouts import DEFAULT_TIMEOUT_S

# a rewritten history's first call: the same geometry, other contents (the law under other token names)
OTHER_CONTENTS = Relabel(tokens=(0,), tables=(1, 2))
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
                                        lambda out: int64_problem(out, want, dev, shape_note="[B, n+1]"),
                                        guarded=payload.get("guarded", True),
                                        calling=calling_of(payload["seeds"], dev), relabel=OTHER_CONTENTS)
    outs = [o.cpu().numpy() for o in outs]
    stacked = np.stack(outs) if outs else np.zeros((0, *want), dtype=np.int64)
    return {"outputs": stacked, "problem": problem, "cause": cause}


@dataclass(frozen=True)
class HostTriple:
    """A verifier's inputs as host arrays, built again on the runner's device (an ``equiv.run``
    input description, for callers that hold live tensors: the MTP harness)."""

    draft_token_ids: np.ndarray
    draft_probs: np.ndarray | None
    target_probs: np.ndarray

    def build(self, device="cpu"):
        def put(a):
            return None if a is None else torch.from_numpy(np.ascontiguousarray(a)).to(device)
        return put(self.draft_token_ids), put(self.draft_probs), put(self.target_probs)


def verifier_function(candidate, device: str, timeout: float | None = DEFAULT_TIMEOUT_S):
    """``call(d, q, p, seed) -> output tensor on p's device`` for ``candidate``: ours and a
    callable run in this process on the live tensors; a user's spec runs in its supervised worker
    on a copy. A call that goes wrong raises ``EquivError`` with the runner's one-line problem."""
    runner = runner_for(runner_target(candidate, "verify"), device=device, timeout=timeout, op="verify")
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
