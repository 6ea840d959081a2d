"""Issue 42, part 5: a top-1 path that ignores ``k`` is told so, with the fix.

Plan: ``tests/candidates/k_ignoring.py:top1_ignores_k`` returns one column whatever k. Its
failing check at k = 2 goes through the diagnosis of defects of the call
(``dimensions.by_dimension``, what the gate runs before the isolation): the defect is still
``k_dependent`` by cause, and its title and explanation say plainly that it serves k = 1 only and
name the fix (``--k 1``, refuse or declare the k it serves). A path that is wrong at k = 2 with
the right shape (``wrong_at_k_ge_2``) keeps the general k-dependent words: the new words need the
shape as data, not just a failure at a larger k. The same path with either fix (declaring
``supported_k = (1,)``, raising ``NotImplementedError`` above 1) is judged at k = 1 only, and
passes there.
"""
import os

from equiv.checks import Check
from equiv.ops.draft_topk import ksupport
from equiv.ops.draft_topk.compare import compare
from equiv.ops.draft_topk.diagnose import dimensions
from equiv.ops.draft_topk.diagnose.taxonomy import KINDS
from equiv.ops.draft_topk.recipes import Recipe
from equiv.run import runner_for

CANDIDATES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "candidates")
RECIPE = "gaussian:seed=0,batch=3,vocab=1025,dtype=float32"


def spec(file, name):
    return f"{os.path.join(CANDIDATES, file)}:{name}"


def _failing_at(candidate, k):
    res = compare(candidate, Recipe.parse(RECIPE), k=k, timeout=60)
    assert not res.passed
    return Check("tolerance", f"tolerance:gaussian:float32:k{k}", False, "x", subject="gaussian:float32",
                 recipe=res.recipe, repro=res.repro, evidence={"k": k, "context": None})


def test_a_path_that_ignores_k_is_told_to_judge_it_at_k_1():
    candidate = spec("k_ignoring.py", "top1_ignores_k")
    found, claimed, calls = dimensions.by_dimension(candidate, [_failing_at(candidate, 2)], (1, 2, 4, 8), "cpu", 60)
    (defect,) = found
    assert defect.cause == "k_dependent" and claimed == {"tolerance:gaussian:float32:k2"} and calls == 3
    assert defect.title == "serves k = 1 only: it ignores k"
    assert "returns 1 column whatever k" in defect.explanation
    assert f"equiv gate --candidate {candidate} --k 1" in defect.explanation
    assert "NotImplementedError" in defect.explanation and "supported_k = (1,)" in defect.explanation
    assert defect.data["ignores_k"] is True and defect.data["fix"] == "--k 1"


def test_a_path_wrong_at_a_larger_k_with_the_right_shape_keeps_the_general_words():
    candidate = spec("draft_contexts.py", "wrong_at_k_ge_2")
    found, _, calls = dimensions.by_dimension(candidate, [_failing_at(candidate, 2)], (1, 2, 4, 8), "cpu", 60)
    (defect,) = found
    assert defect.title == KINDS["k_dependent"].title and "ignores_k" not in defect.data and calls == 2


def test_each_fix_the_verdict_names_leaves_k_1_alone_to_judge():
    def accepted(name):
        return ksupport.accepted(runner_for(spec("k_ignoring.py", name), "cpu", 60), timeout=60).accepted

    assert accepted("top1_ignores_k") == (1, 2, 4, 8)           # judged at every k: the failure above
    assert accepted("top1_declared") == accepted("top1_refuses") == (1,)
    assert compare(spec("k_ignoring.py", "top1_declared"), Recipe.parse(RECIPE), k=1, timeout=60).passed
