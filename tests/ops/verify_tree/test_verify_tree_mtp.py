"""``equiv mtp --verify-tree SPEC``: the MTP harness's tree consumer verified by the verify_tree op.

Test plan (synthetic model, V = 1024, CPU, seconds): a lossless tree verifier for top-k trees
(the built-in ``target_only``, and the same code loaded from a file so it runs in the supervised
worker) passes the tree record's losslessness, which is now the sampling law (the tree samples),
and the note sets its accept length beside the built-in greedy verification's; the built-in
``greedy`` rule given the target's probabilities emits exactly what the default greedy tree
emits (the op's node order and the harness's agree); greedy verification used for sampling and
thresholds of 0.5 fail losslessness, exit 1 with a REPRO that carries ``--verify-tree``; an answer
that is not a path of children is an error record naming it; an unknown spec is one line, exit 2.
"""
import os

import numpy as np

from equiv.cli import main
from equiv.mtp import SyntheticLM, decode, run_mtp
from equiv.ops import ROLES, get_op
from equiv.ops.draft_topk.paths import get_path


SIZES = dict(consumers="tree", paths="softmax_topk", vocab=1024, sequences=32, rounds=8, device="cpu")
TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/, where the shared candidates live
FILE = os.path.join(TESTS, "candidates", "tree_verifiers.py")
MUTANTS = "equiv.ops.verify_tree.mutants"


def test_a_lossless_tree_verifier_passes_and_sits_beside_the_greedy_numbers():
    run = run_mtp(tree_verifier="target_only", **SIZES)
    rec = run.record("softmax_topk", "tree")
    assert run.passed and rec.lossless is True, run.to_json()
    assert run.config["tree_verifier"] == "target_only" and "--verify-tree target_only" in rec.repro
    assert any("tree verified by target_only" in n for n in run.notes)
    assert 0.5 < rec.accept_length <= 3


def test_a_tree_verifier_from_a_file_runs_in_the_worker_and_passes():
    run = run_mtp(tree_verifier=f"{FILE}:correct", **SIZES)
    assert run.passed, run.to_json()


def test_the_op_greedy_rule_emits_the_default_greedy_tree():
    model = SyntheticLM(1024, seed=0)
    kw = dict(steps=3, rounds=6, sequences=16, seed=0, name="softmax_topk")
    caller = get_op(ROLES["tree_verifier"]).features("caller")("greedy", "cpu")
    inline = decode(model, get_path("softmax_topk"), "tree", **kw)
    via_op = decode(model, get_path("softmax_topk"), "tree", tree_verify=caller, **kw)
    np.testing.assert_array_equal(via_op.accepted, inline.accepted)
    np.testing.assert_array_equal(via_op.tokens, inline.tokens)
    assert inline.accepted.sum() > 0


def test_greedy_verification_for_sampling_fails_losslessness(capsys):
    spec = f"{MUTANTS}:greedy_at_temperature"
    assert run_mtp(tree_verifier=spec, **SIZES).record("softmax_topk", "tree").lossless is False
    rc = main(["mtp", "--verify-tree", spec, "--consumers", "tree", "--paths", "softmax_topk",
               "--vocab", "1024", "--sequences", "32", "--rounds", "8", "--device", "cpu"])
    out = capsys.readouterr().out
    assert rc == 1 and f"--verify-tree {spec}" in out


def test_thresholds_of_one_half_fail_losslessness():
    run = run_mtp(tree_verifier=f"{MUTANTS}:thresholds_half", **SIZES)
    assert run.record("softmax_topk", "tree").lossless is False


def test_an_answer_that_is_not_a_path_of_children_is_an_error(capsys):
    spec = f"{FILE}:jumps_to_a_grandchild"
    run = run_mtp(tree_verifier=spec, **SIZES)
    rec = run.record("softmax_topk", "tree")
    assert not run.passed and rec.error and "not a child of the one before" in rec.error, rec
    rc = main(["mtp", "--verify-tree", spec, "--consumers", "tree", "--paths", "softmax_topk",
               "--vocab", "1024", "--sequences", "32", "--rounds", "8", "--device", "cpu"])
    captured = capsys.readouterr()
    assert rc == 1 and "not a child of the one before" in captured.out + captured.err
    assert "Traceback" not in captured.err


def test_an_unknown_tree_verifier_is_one_line_and_exit_2(capsys):
    rc = main(["mtp", "--verify-tree", "no_such_verifier", "--consumers", "tree", "--vocab", "1024",
               "--device", "cpu"])
    err = capsys.readouterr().err
    assert rc == 2 and "no_such_verifier" in err and "Traceback" not in err


def test_a_verifier_that_accepts_above_the_lossless_optimum_fails_on_the_real_model_sizes():
    """thresholds 0.5 accept more than any lossless verifier can on the same trees; with a few
    hundred rounds the per-position law cannot see it, the bound on accepted drafts does."""
    run = run_mtp(tree_verifier=f"{MUTANTS}:thresholds_half", **dict(SIZES, sequences=16))
    rec = run.record("softmax_topk", "tree")
    assert rec.acceptance_bound is not None and not rec.acceptance_bound.passed, rec.acceptance_bound
    assert "above_lossless_optimum" in rec.failed_checks
    ok = run_mtp(tree_verifier="target_only", **dict(SIZES, sequences=16)).record("softmax_topk", "tree")
    assert ok.acceptance_bound.passed and abs(ok.acceptance_bound.accepted - ok.acceptance_bound.optimum) < 0.3


def test_the_chain_verifier_is_held_to_the_same_bound():
    run = run_mtp(verifier="equiv.ops.verify.mutants:uniform_cast_to_int",
                  **dict(SIZES, consumers="target_only"))
    rec = run.record("softmax_topk", "target_only")
    assert not rec.acceptance_bound.passed and "above_lossless_optimum" in rec.failed_checks
    ok = run_mtp(verifier="torch_sampler", **dict(SIZES, consumers="target_only")).record("softmax_topk", "target_only")
    assert ok.acceptance_bound.passed


def test_a_verifier_that_raises_in_process_is_an_error_record_not_a_traceback():
    """specinfer needs draft_probs, which top-k trees do not have: it raises, in this process."""
    rec = run_mtp(tree_verifier="specinfer", **SIZES).record("softmax_topk", "tree")
    assert rec.error and "raised ValueError" in rec.error and "draft_probs" in rec.error, rec
