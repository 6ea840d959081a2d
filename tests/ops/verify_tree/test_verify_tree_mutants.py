"""Every mutant of the tree verifier's zoo is killed, with the cause the diagnosis names; the
legal variants (the built-ins through the SGLang and vLLM layouts) pass.

Test plan: the small plan of test_verify_tree_judge (exhaustive V = 4, ragged truncated V = 64,
one-hot targets) under each mutant's declared construction; each must fail the check its entry
in ``MUTANTS`` names, and the diagnosis must name a cause with a lead. The gate's quick plan
kills each too (docs/verify_tree.md, the kill table, measured with the gate).
"""
import pytest

from equiv.ops.verify_tree.defects import diagnose
from equiv.ops.verify_tree.mutants import LEGAL_VARIANTS, MUTANTS

from test_verify_tree_judge import judged


def test_the_zoo_covers_the_issues_bug_classes():
    assert len(MUTANTS) >= 9 and len({why for _, why, _ in MUTANTS.values()}) == len(MUTANTS)


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_every_mutant_is_killed_with_a_cause(name):
    fn, why, check = MUTANTS[name]
    drafts = "topk" if fn.drafts == "any" else fn.drafts
    v = judged(fn, drafts, f"equiv.ops.verify_tree.mutants:{name}")
    failed = [c.name for c in v.failed]
    assert check in failed, f"{name} ({why}): expected {check} to fail, failed: {failed}"
    defects = diagnose(v).defects
    assert defects and all(d.kind for d in defects)
    assert any(d.explanation.startswith("likely") for d in defects), [d.cause for d in defects]


@pytest.mark.parametrize("name", sorted(LEGAL_VARIANTS))
def test_legal_variants_pass(name):
    fn = LEGAL_VARIANTS[name]
    v = judged(fn, "topk", name)
    assert v.passed, v.summary()
