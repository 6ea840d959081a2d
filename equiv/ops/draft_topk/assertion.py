"""``equiv.assert_equivalent``: the draft top-k gate's judgement as an assertion for a user's own tests.

Plan
----
- ``assert_equivalent(candidate, logits, k=1, ...)`` runs ``compare`` (this folder) (contract, index in
  the tie set, value within the tolerance table, poisoning, regression against softmax_topk)
  and returns the ``ComparisonResult`` when every check passes. Otherwise it raises
  ``EquivalenceError`` (an ``AssertionError``, so pytest shows it as a failed assertion) whose
  message has the gate's shape: the verdict line, one line per failed check (what differs,
  where, by how much, what was allowed), the worst row, and a ``REPRO:`` line. ``err.failed``
  names the failed checks, ``err.result`` is the whole comparison.
- ``logits`` is a ``[B, V]`` tensor, an ``equiv.Recipe`` or a recipe string
  (``"ties_max:seed=3,batch=4,vocab=129280"``), built on ``device``. A recipe gives the
  shortest REPRO (``equiv check --recipe ...``). A raw tensor is replayable too: a small one
  (<= ``INLINE_ELEMENTS`` values) is written into the REPRO line itself; a larger one is saved
  once, on failure, as ``logits.npy`` in a new temporary folder that the REPRO line loads.
- ``candidate`` is a spec (built-in name, ``pkg.mod:fn``, ``path/file.py:fn``) or a callable; the
  REPRO names a callable by its file and qualified name, which replays wherever the file is.
- Bad arguments (a 1-D tensor, an integer dtype, k > V) raise one-line ``InvalidArgument``s.
"""
from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile

import numpy as np

from equiv.devices import resolve_device
from equiv.errors import EquivalenceError
from equiv.ops.draft_topk.compare import compare
from equiv.ops.draft_topk.paths import check_logits
from equiv.ops.draft_topk.recipes import Recipe
from equiv.run import CandidateSpec

INLINE_ELEMENTS = 64


def _replay_spec(spec) -> str | None:
    """A spec that loads the candidate (a ``CandidateSpec``) again in a fresh process, or None."""
    if spec.kind != "callable" or spec.builtin:
        return spec.text
    fn = getattr(spec.fn, "__wrapped__", spec.fn)
    qualname = getattr(fn, "__qualname__", "")
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    path = getattr(module, "__file__", None)
    if not qualname or "<" in qualname or not path:
        return None                              # a lambda, a local function, an interactive one
    return f"{os.path.abspath(path)}:{qualname}"


def _quoted(text: str) -> str:
    """A double-quoted Python string literal, so that the shell's single quotes wrap it cleanly."""
    return json.dumps(text)


def _tensor_source(x) -> str:
    """Python that rebuilds ``x`` bit for bit (float32 embeds float16 and bfloat16 exactly)."""
    dtype = str(x.dtype).removeprefix("torch.")
    values = x.detach().float().cpu()
    if values.numel() <= INLINE_ELEMENTS:
        rows = "[" + ", ".join("[" + ", ".join(f'float("{v}")' if v != v or abs(v) == float("inf")
                                               else repr(v) for v in row) + "]"
                               for row in values.tolist()) + "]"
        return f"torch.tensor({rows}).to(torch.{dtype})"
    folder = tempfile.mkdtemp(prefix="equiv-repro-")
    path = os.path.join(folder, "logits.npy")
    np.save(path, values.numpy())
    return f"torch.from_numpy(numpy.load({_quoted(path)})).to(torch.{dtype})"


def _api_repro(spec: str | None, x, k: int, device: str) -> str:
    if spec is None:
        return ("REPRO: not available: the candidate is a lambda or a local function; define it at "
                "module level (or pass its spec) for a replayable line")
    code = (f"import equiv, numpy, torch; equiv.assert_equivalent({_quoted(spec)}, {_tensor_source(x)}, "
            f"k={k}, device={_quoted(device)})")
    return "REPRO: python -c " + shlex.quote(code)


def _message(result, repro: str) -> str:
    failed = result.failed_checks
    lines = [f"{result.path} k={result.k} {result.dtype} [{result.batch}, {result.vocab}] on "
             f"{result.device}: FAIL ({', '.join(c.name for c in failed)})"]
    lines += [f"  {c.name}: {c.detail}" for c in failed]
    where = f"recipe {result.recipe}, " if result.recipe else ""
    if result.worst_row is not None:
        lines.append(f"  {where}worst row {result.worst_row}")
    lines.append(repro)
    return "\n".join(lines)


def assert_equivalent(candidate, logits, k: int = 1, *, tolerance=None, device: str = "auto",
                      timeout: float | None = None, regression: bool = True):
    """Raise ``EquivalenceError`` unless ``candidate(logits, k)`` matches the reference
    (module docstring); return the ``ComparisonResult`` when it does."""
    parsed = CandidateSpec.parse(candidate)
    loaded = parsed.load()                       # a user's own test: its candidate runs here
    recipe = Recipe.parse(logits) if isinstance(logits, str) else logits
    if isinstance(recipe, Recipe):
        x = recipe.build(resolve_device(device))
    else:
        recipe = None
        x = check_logits(logits, k)
        if device != "auto":
            x = x.to(resolve_device(device))
    check_logits(x, k)
    spec = _replay_spec(parsed)
    result = compare(loaded, x, k=k, tolerance=tolerance, recipe=recipe, regression=regression,
                     name=spec or loaded.spec, timeout=timeout)
    if result.passed:
        return result
    if recipe is not None and spec is not None:
        repro = result.repro
    else:
        repro = _api_repro(spec, x, k, x.device.type)
    raise EquivalenceError(_message(result, repro), result)
