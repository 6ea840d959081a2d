"""What the verifier properties share (``test_verify.py``, ``test_verify_tree.py``).

Plan: ``parametrize_verifiers`` gives each test the candidate (or every built-in verifier) as
``verifier``; the ``device`` fixture resolves the suite's device; ``first_failure`` turns a
verdict's first failed check into the suite's report properties and an ``AssertionError`` with its
``REPRO:`` line; ``drawn_recipes`` runs one Hypothesis property over drawn recipes under the
suite's settings and budget, and reports how many examples ran.
"""
from __future__ import annotations

import pytest
from hypothesis import given, seed as with_seed, settings

from equiv.devices import resolve_device
from equiv.pytest.plugin import option
from equiv.pytest.profiles import suite_settings

EXACT = ("contract", "support", "greedy")
QUICK_EXAMPLES = 6


def parametrize_verifiers(metafunc, builtin_names) -> None:
    if "verifier" in metafunc.fixturenames:
        spec = option(metafunc.config, "equiv_candidate")
        names = [spec] if spec else list(builtin_names())
        metafunc.parametrize("verifier", names, ids=[n.replace("/", "_") for n in names])


@pytest.fixture
def device(request):
    return resolve_device(option(request.config, "equiv_device"))


def first_failure(verdict, verifier, request, checks):
    """``verdict`` when none of ``checks`` (None: every check) failed; else the first failure,
    reported to the suite and raised."""
    failed = [c for c in verdict.checks if (checks is None or c.name in checks) and not c.passed]
    if failed:
        c = failed[0]
        request.node.user_properties += [("equiv_message", f"{c.name}: {c.detail}"), ("equiv_cause", c.cause),
                                         ("equiv_counterexample", c.recipe), ("equiv_repro", c.repro)]
        raise AssertionError(f"{c.name} [{verifier}]: {c.detail}\n{c.repro}")
    return verdict


def drawn_recipes(request, strategy, judge_one) -> None:
    """``judge_one(recipe)`` on recipes drawn from ``strategy`` (quick budget: ``QUICK_EXAMPLES``)."""
    quick = option(request.config, "equiv_budget") == "quick"
    count = {"examples": 0}

    @settings(suite_settings(), max_examples=QUICK_EXAMPLES if quick else suite_settings().max_examples,
              report_multiple_bugs=False)
    @given(recipe=strategy)
    def drawn(recipe):
        count["examples"] += 1
        judge_one(recipe)

    seed = request.config.getoption("hypothesis_seed", None)
    if seed is not None:
        drawn = with_seed(int(seed))(drawn)
    try:
        drawn()
    finally:
        request.node.user_properties.append(("equiv_examples", count["examples"]))
