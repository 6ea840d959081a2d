"""Read back, from a failing check, the input that failed it (the diagnosis starts from there).

Plan
----
A check of the gate carries its failing input as text; ``inputs_of(check)`` turns it back into
something the prober can call:
- a recipe: ``Recipe.parse('...')`` in a Hypothesis counterexample, ``recipe ...`` in the
  tolerance stage's counterexample, or ``--recipe '...'`` in a REPRO line;
- a raw array: the ``torch.tensor([[...]]).to(torch.DTYPE)`` of a raw REPRO line (NaN and
  infinities written ``float('nan')``), read with ``json`` (no ``eval`` of check text);
- an adversarial fixture: ``fixture NAME`` looked up in ``fixtures/adversarial/manifest.json``.
``relational_probes(check, recipe)`` gives, for a property whose failing recipe passes
``compare`` on its own, the follow-up inputs of its relation that ``compare`` can judge (the
poisoned batch of ``poison_never_leaks``, a row subset, columns reversed, a shifted copy).
``consumer_of(check)`` names the MTP consumer of an ``mtp:`` check.
"""
from __future__ import annotations

import json
import os
import re

import numpy as np

from equiv.ops.draft_topk.diagnose.probe import RawInput

_RECIPE = re.compile(r"Recipe\.parse\('([^']+)'\)|--recipe '([^']+)'|\brecipe ([a-z_0-9]+:[^\s,]+(?:,[a-z_]+=[^\s,]+)*)")
_RAW = re.compile(r"torch\.tensor\((\[\[.*?\]\])\)\.to\(torch\.(\w+)\)")
_FIXTURE = re.compile(r"fixture (\w+)")
_ARRAY = re.compile(r"array\((\[\[.*?\]\])(?:, dtype=(\w+))?\)", re.S)


def _text(check) -> str:
    return "\n".join(x for x in (check.detail, check.counterexample, check.repro) if x)


def recipes_in(text: str) -> list:
    from equiv.errors import InvalidArgument
    from equiv.ops.draft_topk.recipes import Recipe

    out = []
    for m in _RECIPE.finditer(text or ""):
        try:
            r = Recipe.parse(next(g for g in m.groups() if g))
        except (InvalidArgument, ValueError):
            continue
        if r not in out:
            out.append(r)
    return out


def raw_in(text: str) -> list:
    out = []
    for m in _RAW.finditer(text or ""):
        body = m.group(1).replace("float('nan')", "NaN").replace("float('-inf')", "-Infinity")
        body = body.replace("float('inf')", "Infinity")
        try:
            values = np.array(json.loads(body), dtype=np.float32)
        except ValueError:
            continue
        if values.ndim == 2 and values.size:
            out.append(RawInput(values, m.group(2), 0, "raw array"))
    return out


def arrays_in(text: str) -> list:
    """``logits=array([[...]], dtype=float32)`` of a Hypothesis counterexample: the input as drawn
    (a REPRO line may show it after a candidate wrote to it)."""
    out = []
    for m in _ARRAY.finditer(text or ""):
        rows = re.findall(r"\[([^\[\]]*)\]", m.group(1))
        try:
            values = np.array([[float(t) for t in row.replace(",", " ").split()] for row in rows],
                              dtype=np.float32)
        except ValueError:
            continue
        dtype = re.search(r"dtype='(\w+)'", text[m.end():m.end() + 80])
        if values.ndim == 2 and values.size:
            out.append(RawInput(values, dtype.group(1) if dtype else "float32", 0, "raw array"))
    return out


def fixture_inputs(name: str) -> list:
    from equiv.fixtures import path as fixture_path
    from equiv.ops.draft_topk.recipes import Recipe

    folder = fixture_path("adversarial")
    try:
        with open(os.path.join(folder, "manifest.json")) as f:
            cases = {c["name"]: c for c in json.load(f)["cases"]}
    except (OSError, ValueError, KeyError):
        return []
    case = cases.get(name)
    if case is None:
        return []
    if "file" in case:
        values = np.load(os.path.join(folder, case["file"])).astype(np.float32)
        return [RawInput(values, case["dtype"], 0, f"fixture {name}")]
    return [Recipe.parse(case["recipe"])]


def inputs_of(check) -> list:
    """The failing inputs a check names, most faithful first (possibly none): its recipe as data
    (``Check.recipe``), a fixture by name, recipes in its text (a Hypothesis counterexample), the
    counterexample's array, a raw REPRO line."""
    from equiv.errors import InvalidArgument
    from equiv.ops.draft_topk.recipes import Recipe

    own = []
    if getattr(check, "recipe", None):
        try:
            own = [Recipe.parse(check.recipe)]
        except InvalidArgument:
            pass
    text = _text(check)
    m = _FIXTURE.search(check.detail or "")
    found = fixture_inputs(m.group(1)) if m else []
    return own + found + [r for r in recipes_in(text) if r not in own] + (arrays_in(check.counterexample) or raw_in(text))


def property_name(check) -> str | None:
    name = check.name
    return name.split(":", 1)[1] if name.startswith("property:") else None


def consumer_of(check) -> str | None:
    return check.name.split(":", 1)[1] if check.name.startswith("mtp:") else None


def relational_probes(check, recipe) -> list:
    """Inputs ``compare`` can judge that the failed relation implies must also be right."""
    from equiv.ops.draft_topk.recipes import Recipe

    if not isinstance(recipe, Recipe):
        return []
    prop = property_name(check) or ""
    poisoned = recipe.with_(family="poison_mix", batch=recipe.batch + 4, specials=4)
    x = recipe.build("cpu").float().numpy()
    subset = RawInput(x[::-1][: max(1, recipe.batch // 2 + 1)].copy(), recipe.dtype, 0,
                      f"rows of {recipe} reversed, first half")
    reversed_cols = RawInput(x[:, ::-1].copy(), recipe.dtype, recipe.pad, f"{recipe} columns reversed")
    shifted = RawInput(x + 8.0, recipe.dtype, recipe.pad, f"{recipe} + 8")
    order = {"poison_never_leaks": [poisoned], "row_independence": [subset],
             "vocab_permutation": [reversed_cols], "shift_invariance": [shifted]}
    first = order.get(prop, [])
    rest = [p for p in (poisoned, subset, reversed_cols, shifted) if p not in first]
    return first + rest
