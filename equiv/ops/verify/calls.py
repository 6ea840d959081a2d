"""The one place that calls a verifier: seeded calls on one input recipe, outputs back as NumPy.

Plan. ``draw(fn, device, payload)`` is a *probe*: trusted code that receives the live callable,
builds the recipe's inputs once on ``device``, keeps a bit copy of them, and calls
``fn(draft_token_ids, draft_probs, target_probs, generator)`` once per seed with a fresh
``torch.Generator`` on that device seeded with it. After every call it checks what the contract
fixes without statistics -- a ``torch.Tensor``, int64, ``[B, n+1]``, on the inputs' device --
and that the inputs are bit-identical to the copy. It returns ``Draws``: the outputs
``[calls, B, n+1]`` int64, or the first problem as one line. A repeated seed in ``seeds`` is how
the judge asks whether the same generator seed gives the same output.

``run_draws`` is the only caller of ``draw``. It runs it in this process under the per-call
time-out of ``equiv.timeouts``; when the supervised worker of ``equiv.run`` is in place it becomes
``runner_for(spec, device=device, timeout=timeout).probe("equiv.ops.verify.calls:draw", payload)``
and nothing else changes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Draws:
    """Outputs of seeded calls on one recipe. ``outputs`` is ``[calls, B, n+1]`` int64 for the
    calls that ran well; ``problem`` the first contract problem (one line), else None."""

    recipe: str
    seeds: tuple
    outputs: np.ndarray
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


def _bits(t):
    import torch

    return t if t.dtype in (torch.int64, torch.int32) else t.view(torch.int32)


def _changed(name, before, after) -> str | None:
    import torch

    if before is None:
        return None
    if not torch.equal(_bits(before), _bits(after)):
        diff = (_bits(before) != _bits(after)).nonzero()
        where = tuple(int(v) for v in diff[0]) if diff.numel() else ()
        return f"modified its input: {name}{list(where)} changed"
    return None


def _shape_problem(out, want, device) -> str | None:
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


def draw(fn, device, payload) -> Draws:
    """The probe (module docstring): ``payload = {"recipe": str, "seeds": [int, ...]}``."""
    import torch

    from equiv.ops.verify.recipes import VerifyRecipe

    recipe = VerifyRecipe.parse(payload["recipe"])
    seeds = tuple(int(s) for s in payload["seeds"])
    d, q, p = recipe.build(device)
    kept = [t.clone() if t is not None else None for t in (d, q, p)]
    want = (recipe.batch, recipe.n + 1)
    outs = []
    for seed in seeds:
        gen = torch.Generator(device=p.device).manual_seed(seed)
        try:
            out = fn(d, q, p, gen)
        except Exception as exc:                    # the candidate's own failure is a verdict
            msg = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            return Draws(str(recipe), seeds, np.stack(outs) if outs else np.zeros((0, *want), np.int64),
                         f"raised {type(exc).__name__}: {msg}")
        if p.device.type == "cuda":
            torch.cuda.synchronize(p.device)
        problem = _shape_problem(out, want, p.device)
        for name, before, after in zip(("draft_token_ids", "draft_probs", "target_probs"), kept, (d, q, p)):
            problem = problem or _changed(name, before, after)
        if problem:
            return Draws(str(recipe), seeds, np.stack(outs) if outs else np.zeros((0, *want), np.int64), problem)
        outs.append(out.cpu().numpy())
    return Draws(str(recipe), seeds, np.stack(outs))


def run_draws(candidate, recipe, seeds, *, device: str, timeout: float | None) -> Draws:
    """``draw`` for ``candidate`` (a ``Candidate`` or callable) under the per-call time-out."""
    from equiv.timeouts import CallTimeout, call_with_timeout

    fn = getattr(candidate, "fn", candidate)
    payload = {"recipe": str(recipe), "seeds": [int(s) for s in seeds]}
    budget = None if timeout is None else timeout * max(len(payload["seeds"]), 1)
    try:
        return call_with_timeout(draw, (fn, device, payload), budget)
    except CallTimeout:
        want = (recipe.batch, recipe.n + 1)
        return Draws(str(recipe), tuple(payload["seeds"]), np.zeros((0, *want), np.int64),
                     f"did not return within {budget:g} s ({len(payload['seeds'])} calls)")
