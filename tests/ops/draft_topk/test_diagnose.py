"""The diagnosis names each defect once, with its trigger, and nothing for a correct candidate.

Plan: failing checks are given as the gate reports them (name, detail, counterexample with the
failing recipe, REPRO), built here from a few recipes, so each test costs a second or less:
- a passing run pays nothing (no call, ``defects: []``);
- the split-vocabulary argmax of issue 12 gives exactly three defects of three kinds, each with
  the checks it explains; ``hardcoded_one`` gives one (its 1.0 on poisoned rows is the same
  defect); a correct path told that a check failed gives none and says the check is unexplained;
- isolation confirms by the complement (pad, batch threshold, neighbours, call order) and each of
  those tests can say no;
- the outputs: frozen ``Defect`` with ``to_json``, the console block leads with "N defects", one
  JUnit test case per defect, every defect has a REPRO line that replays its trigger alone;
- the deadline stops new calls and lists what was left, never a guess.
The whole zoo against its expected kinds is ``tests/ops/draft_topk/test_diagnose_zoo.py``.
"""
from __future__ import annotations

import json
from dataclasses import FrozenInstanceError

import pytest

from equiv.ops.draft_topk.diagnose import diagnose
from equiv.ops.draft_topk.diagnose.isolate import Isolation, Residual, neighbours_matter
from equiv.ops.draft_topk.diagnose.probe import Prober
from equiv.checks import Check
from equiv.ops.draft_topk.recipes import Recipe


def _check(name, *args, **kw):
    """A gate's check as the gate files it: its stage and subject as typed fields."""
    prefix, _, rest = name.partition(":")
    return Check({"property": "properties"}.get(prefix, prefix), name, *args, subject=rest or None, **kw)


def failing(name: str, recipe: str, passed: bool = False) -> Check:
    """A failing check carries its input as data (``Check.recipe``), as the gate records it."""
    return _check(name, passed, "differs from the reference", counterexample=f"recipe {recipe}, worst row 0",
                  repro=f"REPRO: equiv check --candidate X --recipe '{recipe}'", recipe=recipe)


def raw(values, dtype: str = "float32") -> dict:
    """A raw array as the suite records it (``Check.inputs``)."""
    import numpy as np

    return {"values": np.array(values, dtype=np.float32), "dtype": dtype}


SPLIT_VOCAB_CHECKS = [
    failing("property:equivalence", "gaussian:seed=5,batch=2,vocab=2,dtype=float32,pad=1"),
    failing("property:poisoned_batches", "poison_mix:seed=0,batch=4,vocab=8,dtype=float32"),
    failing("tolerance:gaussian:float32", "gaussian:seed=0,batch=4,vocab=1000,dtype=float32"),
    _check("property:raw_arrays", False, "the raw array differs from the reference (poisoning)",
              counterexample="raw_arrays(\n    logits=array([[nan, nan]], dtype=float32),\n    dtype='float32',\n)",
              inputs=raw([[float("nan"), float("nan")]])),
]


def _bare_residual(obs):
    import numpy as np

    return Residual(obs.faults if obs.faults is not None else np.zeros(0, dtype=np.int64),
                    obs.status if obs.status in ("crash", "hang", "input", "format") else None,
                    obs.regression_failed)


def test_a_passing_run_pays_nothing():
    checks = [failing("tolerance:gaussian:float32", "gaussian:seed=0,batch=4,vocab=1000,dtype=float32", passed=True)]
    d = diagnose("softmax_topk", checks, k=1)
    assert d.defects == () and d.calls == 0 and d.to_json()["defects"] == []


def test_split_vocab_argmax_is_three_defects_of_three_kinds():
    d = diagnose("equiv.ops.draft_topk.mutants:split_vocab_argmax", SPLIT_VOCAB_CHECKS, k=1)
    kinds = [x.kind for x in d.defects]
    assert sorted(kinds) == ["non_contiguous", "out_of_vocabulary_index", "placeholder_probability"], d.summary()
    by_kind = {x.kind: x for x in d.defects}
    assert "property:equivalence" in by_kind["non_contiguous"].checks
    assert "property:raw_arrays" in by_kind["out_of_vocabulary_index"].checks
    assert "tolerance:gaussian:float32" in by_kind["placeholder_probability"].checks
    assert "pad=1" in by_kind["non_contiguous"].trigger and "pad=0" not in by_kind["non_contiguous"].trigger
    assert kinds.index("placeholder_probability") == 2, "the bugs that corrupt tokens come first"
    assert d.summary().startswith("3 defects")
    assert not d.unexplained


def test_hardcoded_one_is_one_defect_and_its_poisoned_rows_are_that_defect():
    checks = [failing("property:equivalence", "gaussian:seed=0,batch=1,vocab=2,dtype=float32"),
              failing("property:poisoned_batches", "poison_mix:seed=0,batch=2,vocab=1,dtype=float32"),
              failing("tolerance:huge:bfloat16", "huge:seed=0,batch=4,vocab=4097,dtype=bfloat16")]
    d = diagnose("hardcoded_one", checks, k=1)
    assert [x.kind for x in d.defects] == ["placeholder_probability"], d.summary()
    assert set(d.defects[0].checks) == {c.name for c in checks}
    assert "topk_p = 1 on every row" in d.defects[0].evidence


@pytest.mark.parametrize("path", ["softmax_topk", "identity_top1", "equiv.ops.draft_topk.mutants:ties_to_last_index"])
def test_a_correct_path_yields_no_defect_even_when_told_a_check_failed(path):
    checks = [failing("property:equivalence", "ties_max:seed=0,batch=4,vocab=1025,dtype=bfloat16"),
              failing("tolerance:poison_mix:float32", "poison_mix:seed=0,batch=6,vocab=33,dtype=float32")]
    d = diagnose(path, checks, k=1)
    assert d.defects == () and set(d.unexplained) == {c.name for c in checks}, d.summary()


def test_mutant_with_two_defects_gives_both():
    checks = [failing("property:equivalence", "gaussian:seed=0,batch=17,vocab=3,dtype=float32"),
              failing("tolerance:gaussian:bfloat16", "gaussian:seed=1,batch=4,vocab=32000,dtype=bfloat16")]
    d = diagnose("equiv.ops.draft_topk.mutants:grid_cap_half_sum", checks, k=1)
    kinds = {x.kind: x for x in d.defects}
    assert set(kinds) == {"batch_size", "dtype_specific"}, d.summary()
    assert "passes with B = 16" in kinds["batch_size"].evidence
    assert "passes with float32" in kinds["dtype_specific"].evidence


def test_non_contiguous_is_confirmed_by_the_contiguous_complement():
    prober = Prober("equiv.ops.draft_topk.mutants:contiguous_stride_assumed", k=1)
    obs = prober.observe(Recipe.parse("gaussian:seed=5,batch=2,vocab=2,dtype=float32,pad=1"))
    f = Isolation(prober, _bare_residual, 1).run(obs)
    assert f.kind == "non_contiguous"
    complement = dict(f.necessary)["pad"]
    assert complement.passed and complement.inputs.pad == 0 and complement.inputs.seed == f.trigger.inputs.seed
    # the same isolation on a correct path finds nothing to isolate: the complement test can say no
    ok = Prober("softmax_topk", k=1).observe(Recipe.parse("gaussian:seed=5,batch=2,vocab=2,dtype=float32,pad=1"))
    assert ok.passed


def test_the_neighbour_test_tells_a_batch_reduction_from_a_grid_cap():
    wide = Prober("equiv.ops.draft_topk.mutants:global_max_subtraction", k=1)
    obs = wide.observe(Recipe.parse("row_offsets:seed=0,batch=4,vocab=33,dtype=float32"))
    assert neighbours_matter(wide, obs, obs.rows_with(0xFF)) is not None
    capped = Prober("equiv.ops.draft_topk.mutants:rows_past_four_unwritten", k=1)
    obs = capped.observe(Recipe.parse("gaussian:seed=0,batch=7,vocab=3,dtype=float32"))
    assert obs.rows_with(0xFF).tolist() == [4, 5, 6]
    assert neighbours_matter(capped, obs, obs.rows_with(0xFF)) is None
    f = Isolation(capped, _bare_residual, 1).run(obs)
    assert f.kind == "batch_size" and f.trigger.inputs.batch == 5
    assert dict(f.necessary)["batch"].inputs.batch == 4 and dict(f.necessary)["batch"].passed


def test_stale_output_is_confirmed_on_a_fresh_shape_and_a_pure_function_is_not_stale():
    checks = [_check("property:repeated_calls", False, "the answer for x2 is not the one the first call implies",
                        counterexample="repeated_calls(recipe=Recipe.parse('gaussian:seed=0,batch=1,vocab=2,dtype=float32'))",
                        recipe="gaussian:seed=0,batch=1,vocab=2,dtype=float32")]
    d = diagnose("equiv.ops.draft_topk.mutants:cached_by_shape", checks, k=1)
    assert [x.kind for x in d.defects] == ["stale_output"], d.summary()
    assert "called right after" in d.defects[0].trigger and d.defects[0].repro.startswith("REPRO: python -c")
    d = diagnose("softmax_topk", checks, k=1)
    assert d.defects == () and d.unexplained == ("property:repeated_calls",)


def test_outputs_json_console_junit_and_repro():
    d = diagnose("equiv.ops.draft_topk.mutants:split_vocab_argmax", SPLIT_VOCAB_CHECKS, k=1)
    doc = json.loads(json.dumps(d.to_json()))
    assert len(doc["defects"]) == 3
    for entry in doc["defects"]:
        assert {"kind", "trigger", "evidence", "checks", "repro"} <= set(entry)
        assert entry["repro"].startswith("REPRO: ") and entry["checks"]
    with pytest.raises(FrozenInstanceError):
        d.defects[0].kind = "other"

    assert [c[0].split(":", 1)[1] for c in d.junit_cases()] == [x.kind for x in d.defects]
    recipe_repro = next(x.repro for x in d.defects if x.kind == "non_contiguous")
    assert "equiv check --candidate equiv.ops.draft_topk.mutants:split_vocab_argmax" in recipe_repro and "pad=1" in recipe_repro


def test_the_repro_line_of_a_raw_trigger_replays_it(tmp_path):
    import subprocess

    checks = [_check("property:raw_arrays", False, "the raw array differs from the reference (contract)",
                        counterexample="raw_arrays(\n    logits=array([[-1., -2.]], dtype=float32),\n    dtype='float32',\n)",
                        inputs=raw([[-1.0, -2.0]]))]
    d = diagnose("equiv.ops.draft_topk.mutants:padding_lane_wins", checks, k=1)
    assert [x.kind for x in d.defects] == ["out_of_vocabulary_index"], d.summary()
    cmd = d.defects[0].repro.removeprefix("REPRO: ")
    if "equiv check" in cmd:
        return                                  # a recipe trigger: the CLI test covers equiv check
    out = subprocess.run(cmd, shell=True, capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env={**__import__("os").environ, "PYTHONPATH": __import__("os").getcwd()})
    assert "index out of range" in out.stdout, out.stdout + out.stderr


def test_the_deadline_stops_new_calls_and_says_what_was_left():
    d = diagnose("equiv.ops.draft_topk.mutants:split_vocab_argmax", SPLIT_VOCAB_CHECKS, k=1, budget_s=0.0)
    assert d.defects == () and set(d.not_diagnosed) == {c.name for c in SPLIT_VOCAB_CHECKS}
    assert "not diagnosed" in d.summary()


def test_a_hang_or_an_exit_is_named_from_the_check_and_never_re_run():
    # how the call ended is data (Check.outcome, the CallOutcome.kind), never read from the wording
    checks = [_check("tolerance:gaussian:float32", False, "contract: did not return within 5 s",
                    counterexample="recipe gaussian:seed=0,batch=4,vocab=1000,dtype=float32, worst row None",
                    repro="REPRO: equiv check --candidate tests/candidates/x.py:f --recipe 'gaussian:seed=0'",
                    outcome="timeout", recipe="gaussian:seed=0,batch=4,vocab=1000,dtype=float32"),
              _check("property:raw_arrays", False, "exited with code 0 during the call", outcome="exit"),
              _check("property:equivalence", False, "was killed by SIGSEGV during the call", outcome="signal")]
    d = diagnose("softmax_topk", checks, k=1)
    assert sorted(x.kind for x in d.defects) == ["crash", "hang"] and d.calls == 0, d.summary()
    hang = next(x for x in d.defects if x.kind == "hang")
    assert hang.repro.startswith("REPRO: equiv check") and "did not return" in hang.evidence
    crash = next(x for x in d.defects if x.kind == "crash")
    assert {"property:raw_arrays", "property:equivalence"} <= set(crash.checks)


def test_wording_alone_names_no_abnormal_end():
    from equiv.ops.draft_topk.diagnose.core import abnormal_kind

    assert abnormal_kind(_check("property:x", False, "did not return within 5 s")) is None
    assert abnormal_kind(_check("property:x", False, "anything", outcome="signal")) == "crash"


def test_a_users_file_candidate_is_diagnosed_through_its_supervised_worker(tmp_path):
    from equiv.run import runner_for

    path = tmp_path / "split_kernel.py"
    path.write_text("from equiv.ops.draft_topk.mutants import split_vocab_argmax\n\n"
                    "def draft(logits, k):\n    return split_vocab_argmax(logits, k)\n")
    spec = f"{path}:draft"
    d = diagnose(spec, SPLIT_VOCAB_CHECKS, k=1)
    assert sorted(x.kind for x in d.defects) == ["non_contiguous", "out_of_vocabulary_index",
                                                  "placeholder_probability"], d.summary()
    runner = runner_for(spec, "cpu", 60.0)
    assert runner.isolated and runner.calls >= d.calls


def _nudged(logits, k):
    """softmax-then-top-k; on bfloat16 input topk_p is 5% of the allowance too high: over the
    table, yet no worse than 4x the baseline's own bfloat16 rounding on the same input."""
    import torch

    from equiv.ops.draft_topk.tolerance import tolerance_for

    p, idx = torch.topk(torch.softmax(logits.float(), -1), k, -1)
    if logits.dtype == torch.bfloat16:
        p = p * (1 + 1.05 * tolerance_for("bfloat16").rtol)
    return p, idx


def test_a_value_failure_no_worse_than_the_baseline_is_the_tolerance_not_a_defect():
    check = failing("tolerance:gaussian:bfloat16", "gaussian:seed=0,batch=4,vocab=1000,dtype=bfloat16")
    d = diagnose(_nudged, [check], k=1)
    assert d.defects == () and d.tolerance_edge == ("tolerance:gaussian:bfloat16",), d.summary()
    assert "tolerance's edge" in d.summary()
    # a real precision loss fails the regression rule too: it stays a defect
    check = failing("tolerance:gaussian:float32", "gaussian:seed=0,batch=4,vocab=1000,dtype=float32")
    d = diagnose("equiv.ops.draft_topk.mutants:bf16_probabilities", [check], k=1)
    assert [x.kind for x in d.defects] == ["value_error"] and not d.tolerance_edge


def test_checks_alike_join_the_defect_of_two_re_run_ones_without_a_call():
    # likeness is read from data: the check's recipe and the comparison's failed stages
    def tol(fam, parts=("value", "regression")):
        recipe = f"{fam}:seed=0,batch=4,vocab=1000,dtype=float32"
        return _check(f"tolerance:{fam}:float32", False, "; ".join(f"{p}: ..." for p in parts),
                     counterexample=f"recipe {recipe}, worst row 0", recipe=recipe, parts=parts)
    checks = [tol(fam) for fam in ("gaussian", "zipf", "dominant", "near_uniform")]
    d = diagnose("hardcoded_one", checks, k=1)
    assert [x.kind for x in d.defects] == ["placeholder_probability"], d.summary()
    assert set(d.defects[0].checks) == {c.name for c in checks}
    assert d.by_likeness == ("tolerance:dominant:float32", "tolerance:near_uniform:float32")
    assert "by likeness" in d.summary()
    unlike = checks[:2] + [tol("dominant", parts=("index",))]
    assert diagnose("hardcoded_one", unlike, k=1).by_likeness == ()


def test_ranks_out_of_order_beside_a_poisoned_row_are_the_rank_order_defect():
    checks = [failing("property:topk_ordering", "gaussian:seed=0,batch=1,vocab=8,dtype=float32"),
              failing("tolerance:poison_mix:float32", "poison_mix:seed=0,batch=5,vocab=33,dtype=float32,specials=1")]
    d = diagnose("equiv.ops.draft_topk.mutants:topk_ascending", checks, k=4)
    assert [x.kind for x in d.defects] == ["rank_order"] and len(d.defects[0].checks) == 2, d.summary()
