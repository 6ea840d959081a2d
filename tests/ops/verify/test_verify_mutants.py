"""The verify judge kills every mutant of the zoo and passes the correct verifiers.

Test plan: the quick gate's plan (contract cases, then statistical cases) with V capped at 1025
so that the whole zoo runs in about two minutes on two CPU cores; under the default lossless law
each mutant must fail the check its entry names (``caught_by``; ``None``: it passes with a note,
mutants.py says why), and under ``--law token`` the check ``caught_by_token`` names, where given;
the legal variant and the built-in verifiers (block verification included) must pass the
lossless law. The full gate at V = 129280 does the same (docs/verify.md, kill table).
"""
from dataclasses import replace

import pytest

from equiv.ops.verify.judge import run_judge
from equiv.ops.verify.mutants import LEGAL_VARIANTS, MUTANTS
from equiv.ops.verify.paths import VERIFIERS
from equiv.ops.verify.plans import plan

SMALL_VOCAB = 1025


def small_plan(law="lossless"):
    return [replace(c, recipe=c.recipe.with_(vocab=min(c.recipe.vocab, SMALL_VOCAB))) for c in plan("quick", law=law)]


def test_the_zoo_has_at_least_eight_bug_classes():
    assert len({m.bug_class for m in MUTANTS.values()}) >= 8


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_every_mutant_is_caught_by_its_check(name):
    m = MUTANTS[name]
    v = run_judge(m, small_plan(), device="cpu", spec=f"equiv.ops.verify.mutants:{name}")
    failed = [c.name for c in v.failed]
    if m.caught_by is None:
        assert v.passed, f"{name}: expected a pass (mutants.py says why), failed: {failed}"
    else:
        assert m.caught_by in failed, f"{name}: expected {m.caught_by} to fail, failed: {failed}"
    assert all(c.repro and c.repro.startswith("REPRO: equiv check --op verify") for c in v.failed if c.recipe)


@pytest.mark.parametrize("name", sorted(n for n, m in MUTANTS.items() if m.caught_by_token))
def test_the_token_law_catches_what_its_entry_names(name):
    m = MUTANTS[name]
    v = run_judge(m, small_plan("token"), device="cpu", spec=name, law="token")
    assert m.caught_by_token in [c.name for c in v.failed]


@pytest.mark.parametrize("name", sorted(LEGAL_VARIANTS) + sorted(VERIFIERS))
def test_correct_verifiers_pass(name):
    fn = LEGAL_VARIANTS[name] if name in LEGAL_VARIANTS else VERIFIERS[name]
    v = run_judge(fn, small_plan(), device="cpu", spec=name)
    assert v.passed, v.summary()
