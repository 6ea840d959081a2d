"""The coverage plans (equiv/ops/draft_topk/coverage.py): shapes a kernel cannot dodge, rows a large batch judges.

Plan: the tolerance plan places every listed batch size and real vocabulary for any seed and any
number of checks, runs the main vocabulary in every check, pads about half the shapes, stays under
its cost cap, and is a function of the seed; ``judged_rows`` always holds the first, the last and
the power-of-two edge rows, draws the rest from the seed, and refuses rows outside the batch;
``compare`` judges index range on every row and the rest on the judged rows, and says which.
The candidates of tests/candidates/shape_dodgers.py are wrong only at B > 33, B >= 64 (odd rows)
or V > 32000 with B > 4: the gate's former single shape [4, V] passes all three (seen here), the
plan's shapes fail each.
"""
import os
import re

import numpy as np
import pytest
import torch

import equiv
from equiv.ops.draft_topk.coverage import (
    EDGE_BATCHES,
    EDGE_ROWS,
    LARGE_BATCHES,
    MAX_SHAPE_ELEMENTS,
    REAL_VOCABS,
    SMALL_BATCHES,
    Shape,
    TolerancePlan,
    judged_rows,
    tolerance_plan,
)
from equiv.errors import InvalidArgument
from equiv.ops.draft_topk.gate_stages import tolerance_checks
from equiv.ops.draft_topk.recipes import FAMILIES


TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/, where the shared candidates live
DODGERS = os.path.join(TESTS, "candidates", "shape_dodgers.py")


@pytest.mark.parametrize("dtypes", [("float32",), ("float32", "bfloat16"), ("float32", "bfloat16", "float16")])
@pytest.mark.parametrize("seed", range(8))
def test_plan_places_every_batch_and_vocab(dtypes, seed):
    plan = tolerance_plan(FAMILIES, dtypes, seed=seed)
    assert set(EDGE_BATCHES) <= set(plan.batches)                # and the space's (test_space.py)
    assert set(REAL_VOCABS) <= set(plan.vocabs)
    assert [c for c, _ in plan.checks] == [(f, d) for d in dtypes for f in FAMILIES]
    for _, shapes in plan.checks:
        assert any(s.vocab == 129280 for s in shapes)             # the main vocabulary, always
    shapes = plan.shapes()
    assert all(s.elements <= MAX_SHAPE_ELEMENTS for s in shapes)
    assert 0.3 < sum(1 for s in shapes if s.pad) / len(shapes) < 0.7
    small_part = len(plan.checks) * max(SMALL_BATCHES) * 129280  # one small shape per check
    dimensions = 11 * MAX_SHAPE_ELEMENTS // 2                     # space's shapes: ~40M in all
    assert plan.elements <= len(LARGE_BATCHES) * MAX_SHAPE_ELEMENTS + small_part + dimensions


def test_plan_with_few_checks_still_places_everything():
    plan = tolerance_plan(("gaussian",), ("bfloat16",), seed=3, vocab=1025)
    assert set(EDGE_BATCHES) <= set(plan.batches)
    assert {1025, *REAL_VOCABS} <= set(plan.vocabs)


def test_plan_is_a_function_of_the_seed():
    a, b = tolerance_plan(FAMILIES, ("float32",), seed=1), tolerance_plan(FAMILIES, ("float32",), seed=1)
    assert a == b and a.to_json() == b.to_json()
    assert tolerance_plan(FAMILIES, ("float32",), seed=2) != a
    assert "19 shapes" not in a.describe() and "B in {1, 2, 3" in a.describe()


def test_judged_rows_of_a_large_batch():
    rows = judged_rows(1024, 129280, seed=0)
    assert {0, 1023, *EDGE_ROWS} <= set(rows.tolist())
    assert rows.size == 2 + len(EDGE_ROWS) + 32 and np.all(np.diff(rows) > 0)
    assert np.array_equal(judged_rows(1024, 129280, seed=0), rows)
    assert not np.array_equal(judged_rows(1024, 129280, seed=1), rows)
    assert judged_rows(100, 129280).tolist() == list(range(100))        # small enough: every row
    few = judged_rows(100, 10, rows=3).tolist()
    assert {0, 31, 32, 33, 63, 64, 65, 99} <= set(few) and len(few) == 8 + 3
    assert judged_rows(50, 10, rows=[7, 3, 3]).tolist() == [3, 7]
    assert judged_rows(0, 10, rows=4).size == 0
    with pytest.raises(InvalidArgument, match="rows holds 50, outside"):
        judged_rows(50, 10, rows=[50])
    with pytest.raises(InvalidArgument, match="rows='some' is invalid"):
        judged_rows(50, 10, rows="some")


def _wrong_at(row, index_out_of_range=False):
    def fn(logits, k):
        p, idx = torch.topk(torch.softmax(logits.float(), -1), k, -1)
        if index_out_of_range:
            idx[row, 0] = logits.shape[1]
        else:
            p[row, 0] *= 1.01
        return p, idx
    return fn


def test_compare_judges_the_sampled_rows_and_says_so():
    x = equiv.Recipe(batch=300, vocab=50).build()
    on_edge = equiv.compare(_wrong_at(129), x, 1, rows=4)
    assert not on_edge.passed and on_edge.worst_row == 129
    assert 129 in on_edge.judged_rows and len(on_edge.judged_rows) == 2 + len(EDGE_ROWS) + 4
    assert "the rest on 18 rows" in on_edge.check("contract").detail
    off_sample = next(r for r in range(300) if r not in on_edge.judged_rows)
    assert equiv.compare(_wrong_at(off_sample), x, 1, rows=4).passed        # a sample is a sample
    assert not equiv.compare(_wrong_at(off_sample), x, 1, rows="all").passed
    out_of_range = equiv.compare(_wrong_at(off_sample, index_out_of_range=True), x, 1, rows=4)
    assert "index out of range" in out_of_range.check("contract").detail   # range: every row


SMALL_PLAN = TolerancePlan(0, ((("gaussian", "float32"), (Shape(9, 32001), Shape(65, 1025, pad=7))),))


@pytest.mark.parametrize("fn", ["value_error_past_33_rows", "runner_up_on_odd_rows", "value_error_large_vocab"])
def test_the_plan_catches_what_one_shape_misses(fn):
    spec = f"{DODGERS}:{fn}"
    kw = dict(ks=(1,), device="cpu", dtypes=("float32",), batch=4, seeds=1, seed=0, vocab=32001, timeout=60.0)
    assert all(c.passed for c in tolerance_checks(spec, **kw)[0])               # the old [4, V]
    caught, _ = tolerance_checks(spec, **kw, plan=SMALL_PLAN)
    assert not caught[0].passed and caught[0].repro.startswith("REPRO: equiv check")


def test_a_correct_candidate_passes_the_plan_and_the_verdict_names_the_shapes():
    checks, _ = tolerance_checks(f"{DODGERS}:transposed_outputs", ks=(1,), device="cpu", dtypes=("float32",),
                                 batch=4, seeds=1, seed=0, vocab=32001, timeout=60.0, plan=SMALL_PLAN)
    assert checks[0].passed and "[9, 32001], [65, 1025] pad 7" in checks[0].detail


@pytest.mark.parametrize("fn", ["value_error_past_33_rows", "runner_up_on_odd_rows", "value_error_large_vocab"])
def test_the_quick_property_suite_catches_each_dodger(fn):
    from equiv.properties.killing import _first_failure, run_suite

    report = run_suite(f"{DODGERS}:{fn}", budget="quick", extra=["-k", "test_equivalence"])
    failed = _first_failure(report)
    assert failed is not None and failed["property"] == "equivalence", report["tests"]
    failed_checks = re.search(r"differs from the reference \(([^)]*)\)", failed["message"]).group(1)
    assert failed_checks in ("value, regression", "index", "value")


def test_coverage_recipes_reach_the_dodged_shapes_within_the_budget():
    from equiv.ops.draft_topk.strategies import MAX_ELEMENTS, coverage_recipes

    full = coverage_recipes(("float32", "bfloat16"))
    assert len(full) == 10 and {r.dtype for r in full} == {"float32", "bfloat16"}
    assert {r.family for r in full} >= {"masked", "confident"}           # the space's families
    assert any(r.batch >= 64 and r.batch % 2 for r in full) and any(r.batch == 1024 for r in full)
    assert any(r.batch > 4 and r.vocab > 32000 and r.pad for r in full)
    assert all(r.batch * r.vocab <= MAX_ELEMENTS for r in full)
    slow = coverage_recipes(("float32",), max_vocab=32000, max_batch=9, min_vocab=4)
    assert all(r.batch <= 9 and 4 <= r.vocab <= 32000 for r in slow)


def test_large_recipes_draw_in_blocks_that_depend_on_the_recipe_alone(monkeypatch):
    """Past BLOCK_ELEMENTS a recipe's normals come from one stream per block of rows, filled in
    threads: the values must not depend on the thread count, the first block must be the rows
    of the same recipe drawn whole, and every block must differ from the others."""
    import torch

    from equiv.ops.draft_topk import recipes
    from equiv.ops.draft_topk.recipes import Recipe

    monkeypatch.setattr(recipes, "BLOCK_ELEMENTS", 4 * 1000)
    r = Recipe(family="gaussian", batch=13, vocab=1000, seed=5)
    many = recipes._host_values(r)
    monkeypatch.setattr(recipes, "_threads", lambda: 1)
    assert torch.equal(many, recipes._host_values(r))
    monkeypatch.setattr(recipes, "BLOCK_ELEMENTS", 10 ** 9)
    whole = recipes._host_values(r)
    assert torch.equal(many[:4], whole[:4]) and not torch.equal(many[4:], whole[4:])
    firsts = [many[i] for i in (0, 4, 8, 12)]          # the first row of each block (the last has one)
    assert all(not torch.equal(a, b) for i, a in enumerate(firsts) for b in firsts[i + 1:])
