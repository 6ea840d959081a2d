"""Issue 42, part 2 (the chain): a verifier that accepts fewer drafts than it could is lossless.

Plan: ``tests/candidates/capped_verifiers.py:capped_chain`` is ``torch_sampler`` stopped after 3
accepted drafts, drawing the next token from the full target ``p_3``, which may be the draft
``d_3`` itself: the text ``d_0 d_1 d_2 d_3`` then ends at position 3. Under the default lossless
law the judge reads the output as text, up to its first ``-1`` (``lossless.text_stops``), so the
candidate passes every check (before issue 42 the ``-1`` layout of the token law failed it:
"position 4 holds -1 but no rejection came before it"), the greedy one counts its rows that
stopped before greedy decoding's end, its efficiency is reported below the token-level optimum,
and the token law's reading is a note. Under ``--law token`` the same output is still a broken
layout (a token-level sampler never draws the rejected draft). The checks can still fail: the
cap drawing from the next position's row (``wrong_capped_chain``) fails greedy and the marginal
law, and ``lossless.layout_problem`` names each broken text; the lossy mutant that the old layout
alone killed (``block_residual_unweighted``) fails the exact block law where it differs.
"""
import os
import sys

import numpy as np
import torch

from equiv.ops.verify import lossless
from equiv.ops.verify.judge import Case, run_judge
from equiv.ops.verify.mutants import MUTANTS
from equiv.ops.verify.paths import torch_sampler
from equiv.ops.verify.recipes import VerifyRecipe

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/, where the shared candidates live
sys.path.insert(0, os.path.join(TESTS, "candidates"))
from capped_verifiers import capped_chain, wrong_capped_chain  # noqa: E402

PLAN = (("realistic:seed=3,batch=20000,n=6,vocab=33,problems=4,noise=0.3,drafts=sampled", True),
        ("realistic:seed=11,batch=40000,n=4,vocab=2,problems=1,noise=0.558,drafts=sampled", True),   # d_3 drawn often
        ("onehot_target:seed=2,batch=512,n=6,vocab=4,problems=8,draft=onehot,drafts=sampled", True))
ONEHOT = VerifyRecipe.parse(PLAN[2][0])


def _cases():
    return [Case(VerifyRecipe.parse(t), 1, i, statistical=s) for i, (t, s) in enumerate(PLAN)]


def test_a_verifier_capped_at_3_drafts_passes_the_lossless_law_and_is_slower():
    v = run_judge(capped_chain, _cases(), device="cpu", spec="capped_chain")
    assert v.passed, v.summary()
    greedy_line = next(c.detail for c in v.checks if c.name == "greedy")
    assert int(greedy_line.split("; ")[1].split()[0]) > 0, greedy_line    # some stopped before greedy's end
    deep = v.efficiency[0]
    assert deep["ratio"] < 0.95 and deep["token_optimum"] - deep["accept_length"] > 5 * deep["stderr"], deep
    assert any("slower, not lossy" in n for n in v.notes) and any("(-1 layout)" in n for n in v.notes), v.notes


def test_the_token_law_still_reads_a_drawn_draft_as_a_broken_layout():
    v = run_judge(capped_chain, _cases()[1:2], device="cpu", spec="capped_chain", law="token")
    contract = next(c for c in v.checks if c.name == "contract")
    assert not contract.passed and contract.cause == "-1 layout" and "no rejection came before it" in contract.detail


def test_the_cap_drawing_from_the_wrong_row_still_fails():
    v = run_judge(wrong_capped_chain, _cases(), device="cpu", spec="wrong_capped_chain")
    assert {"greedy", "support", "marginal"} <= {c.name for c in v.failed}, v.summary()


def test_block_verification_with_the_token_residual_is_still_killed_where_it_differs():
    """Until issue 42 the -1 layout failed ``block_residual_unweighted`` whenever it drew the
    draft; read as text that output is legal, and the mutant is off by a total variation of at
    most ~0.01 (0 at V = 2): the exact block law at V = 3, n = 6 still sees it."""
    r = VerifyRecipe.parse("realistic:seed=27,batch=131967,n=6,vocab=3,problems=1,noise=0.558,drafts=sampled,part=1")
    v = run_judge(MUTANTS["block_residual_unweighted"], [Case(r, 1, 0, statistical=True)], device="cpu",
                  spec="block_residual_unweighted")
    assert {"marginal", "block_law"} <= {c.name for c in v.failed}, v.summary()


def _outputs(recipe):
    d, q, p = recipe.build("cpu")
    return torch_sampler(d, q, p, torch.Generator().manual_seed(0)).numpy()[None].copy()


def test_the_lossless_layout_names_each_broken_text():
    r = VerifyRecipe.parse("realistic:seed=1,batch=64,n=3,vocab=33,problems=4")
    outs = _outputs(r)
    assert lossless.layout_problem(r, outs) is None
    stop = lossless.text_stops(r, outs)[0]
    b = int(np.flatnonzero(stop == 1)[0])       # [d_0, x, -1, -1]
    d = r.row_tokens()[b]
    for j, token, message in ((0, -1, "position 0 holds -1: the output emits no token"),
                              (0, (d[0] + 1) % 33, f"position 0 holds token {(d[0] + 1) % 33}, not the draft"),
                              (1, 40, "position 1 holds token 40, outside [0, 33)"),
                              (3, 5, "position 3 holds token 5 after the -1 at position 2")):
        broken = outs.copy()
        broken[0, b, j] = token
        got = lossless.layout_problem(r, broken)
        assert got is not None and got[1] == b and message in got[2], (message, got)
    ended = outs.copy()                          # the draft d_1 drawn where the text ends: still a text
    ended[0, b, 1] = d[1]
    assert lossless.layout_problem(r, ended) is None and lossless.text_stops(r, ended)[0, b] == 1
