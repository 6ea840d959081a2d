"""Replay of the adversarial fixtures (fixtures/adversarial/manifest.json) as explicit examples.

Test plan: every case of the manifest -- small element-level arrays stored as ``.npy`` and
full-size inputs stored as recipes -- goes through ``equiv.ops.draft_topk.compare`` at the case's k (or the
run's ``--equiv-k`` when larger and V allows it), on the run's device. A case whose k the subject
does not support is left out and counted in the skip reason; a missing or unreadable manifest is
a failure, not a skip (the fixtures are part of the suite). Each case says how it was made and
which bug it catches; a failure names the case so the manifest explains it.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from equiv.fixtures import path as fixture_path
from equiv.ops.draft_topk.recipes import Recipe

FIXTURES = fixture_path("adversarial")


def load_cases() -> list[dict]:
    path = os.path.join(FIXTURES, "manifest.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"adversarial manifest {path!r} is missing: run "
                                f"python fixtures/adversarial/make.py from the repository root")
    with open(path) as f:
        return json.load(f)["cases"]


def test_adversarial_fixtures(subject, suite):
    cases = load_cases()
    judged, left_out = 0, []
    for case in cases:
        k = max(case["k"], suite.k)
        if subject.explicit and case["k"] > suite.k:   # never call a candidate at a k not asked
            left_out.append(f"{case['name']} (needs k >= {case['k']})")
            continue
        if not subject.supports_k(k):
            left_out.append(case["name"])
            continue
        if "file" in case:
            values = np.load(os.path.join(FIXTURES, case["file"]))
            if values.shape[1] < k:
                left_out.append(case["name"])
                continue
            x = suite.tensor(values, case["dtype"])
            what = f"fixture {case['name']} ({case['catches']})"
            suite.request.node.user_properties.append(("equiv_fixture", case["name"]))   # data for diagnosis
            suite.expect_equivalent(x, raw=values, k=k, what=what)
        else:
            recipe = Recipe.parse(case["recipe"])
            recipe = recipe.with_(vocab=min(recipe.vocab, subject.budget.max_vocab))
            if recipe.vocab < k:
                left_out.append(case["name"])
                continue
            what = f"fixture {case['name']} ({case['catches']})"
            suite.request.node.user_properties.append(("equiv_fixture", case["name"]))
            suite.expect_equivalent(suite.build(recipe), recipe=recipe, k=k, what=what)
        judged += 1
    if judged == 0:
        pytest.skip(f"no fixture applies to {subject.name} at k={suite.k}: left out {left_out}")
    suite.request.node.user_properties.append(("equiv_examples", judged))
