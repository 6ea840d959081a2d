"""Read back, from a failing check, the input that failed it (the diagnosis starts from there).

Plan
----
A check of the gate carries its failing input as data (never read back from its wording);
``inputs_of(check)`` turns it into something the prober can call:
- a recipe: ``Check.recipe`` (the property suite records the final, shrunk example's; the
  tolerance stage its failing recipe), or ``Check.inputs`` when it is a ``Recipe``;
- a raw array: ``Check.inputs`` ``{"values", "dtype"}``, the values as drawn (the suite records
  them when an element-level input fails);
- an adversarial fixture: ``Check.evidence["fixture"]``, looked up in ``fixtures/adversarial/manifest.json``.
``relational_probes(check, recipe)`` gives, for a property whose failing recipe passes
``compare`` on its own, the follow-up inputs of its relation that ``compare`` can judge (the
poisoned batch of ``poison_never_leaks``, a row subset, columns reversed, a shifted copy).
``property_name`` and ``consumer_of`` read the check's ``stage`` and ``subject``.
"""
from __future__ import annotations

import json
import os

import numpy as np

from equiv.errors import InvalidArgument
from equiv.fixtures import path as fixture_path
from equiv.ops.draft_topk.diagnose.probe import RawInput
from equiv.ops.draft_topk.recipes import Recipe

def fixture_inputs(name: str) -> list:
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
    """The failing inputs a check carries as data, most faithful first (possibly none): its recipe
    (``Check.recipe``), the adversarial fixture it ran (``Check.evidence["fixture"]``), the
    element-level values as drawn (``Check.inputs``: a property's raw array)."""
    own = []
    if getattr(check, "recipe", None):
        try:
            own = [Recipe.parse(check.recipe)]
        except InvalidArgument:
            pass
    if isinstance(getattr(check, "inputs", None), Recipe) and check.inputs not in own:
        own.append(check.inputs)
    fixture = (check.evidence or {}).get("fixture") if isinstance(check.evidence, dict) else None
    found = fixture_inputs(fixture) if fixture else []
    raw = check.inputs if isinstance(getattr(check, "inputs", None), dict) else None
    if raw is not None and not found:
        found = [RawInput(raw["values"], raw["dtype"], 0, "raw array")]
    return own + [f for f in found if f not in own]


def property_name(check) -> str | None:
    return check.subject if check.stage == "properties" and check.subject else None


def consumer_of(check) -> str | None:
    return check.subject if check.stage == "mtp" and check.subject else None


def relational_probes(check, recipe) -> list:
    """Inputs ``compare`` can judge that the failed relation implies must also be right."""
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
