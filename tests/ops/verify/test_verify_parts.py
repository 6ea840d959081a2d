"""Parts of one case (recipes that differ only in ``part``: fresh drafts of the same size and
calling) replay at the first and the last part: those replays judge "same seed, same output" for
them all.

Test plan: the chain's GPU plan and power case, and the tree plan of a verifier that declares
``drafts = "any"``, replay the first and the last part only, and every statistical row is judged once (a
replay's outputs never reach the statistics); a sampler that ignores the generator it is given
(torch's global generator) still FAILS ``determinism`` at the first part's replay, and one that
does so only from its fifth call of one shape on (a graph captured after warm-up calls) at the
last part's; a tree
recipe's part draws other trees over the same bank (the judge's tables are made once a slot).
"""
import numpy as np
import torch

from equiv.ops.verify.judge import run_judge
from equiv.ops.verify.paths import torch_sampler
from equiv.ops.verify.plans import plan, power_cases
from equiv.ops.verify.recipes import VerifyRecipe
from equiv.ops.verify_tree.plans import statistical_cases
from equiv.ops.verify_tree.recipes import TreeRecipe
from equiv.verdict import Case


def _first_and_last(n):
    return [True] if n == 1 else [True] + [False] * (n - 2) + [True]


def test_only_the_first_and_the_last_part_of_a_case_replay():
    cases = power_cases("quick", 0, 0, parts=4)
    assert [c.replay for c in cases] == [True, False, False, True]
    assert [len(c.seeds) for c in cases] == [2, 1, 1, 2]
    gpu = plan("quick", 0, device="cuda")
    for group in ({c.recipe.problem_key() for c in gpu if getattr(c.recipe, "part", 0)}):
        parts = sorted((c.recipe.part, c.replay) for c in gpu if getattr(c.recipe, "part", 0)
                       and c.recipe.problem_key() == group)
        assert [r for _, r in parts] == _first_and_last(len(parts)), parts
    assert sum(not c.replay for c in gpu) >= 30
    tree = statistical_cases("quick", "any", 0)
    slots = {}
    for c in tree:
        if c.recipe.drafts != "topk" and c.purpose in ("small batches", "wide vocab", "eagle"):
            slots.setdefault((c.purpose, c.recipe.drafts), []).append((c.recipe.part, c.replay))
    assert slots
    for got in slots.values():
        assert [r for _, r in sorted(got)] == _first_and_last(len(got)), got


def test_judged_drops_the_replay_only_where_there_is_one():
    outs = np.arange(6).reshape(3, 2)
    assert Case("r", 2, 0).judged(outs).tolist() == [[0, 1], [2, 3]]
    assert Case("r", 3, 0, replay=False).judged(outs).tolist() == outs.tolist()


def _parts(n=3):
    base = VerifyRecipe(family="realistic", seed=3, batch=400, n=2, vocab=40, problems=4, draft="probs",
                        drafts="sampled")
    return [Case(base.with_(part=k + 1), 1, 50 + k, statistical=True, replay=k in (0, n - 1)) for k in range(n)]


class _CapturedAfterWarmUp:
    """torch_sampler for its first four calls of one shape, then (as a graph captured after
    warm-up calls, its generator state baked in) coins from torch's global generator."""

    def __init__(self):
        self.seen = {}

    def __call__(self, d, q, p, generator):
        n = self.seen[tuple(p.shape)] = self.seen.get(tuple(p.shape), 0) + 1
        return torch_sampler(d, q, p, generator if n < 5 else _global(p))


def _global(p):
    return torch.Generator(device=p.device).manual_seed(int(torch.randint(1 << 30, ())))


def _global_coins(d, q, p, generator):
    """torch_sampler drawing its coins from torch's global generator, not the one it is given."""
    return torch_sampler(d, q, p, torch.Generator(device=p.device).manual_seed(int(torch.randint(1 << 30, ()))))


def test_parts_pass_a_lossless_sampler_and_judge_every_row_once():
    v = run_judge(torch_sampler, _parts(), device="cpu", spec="torch_sampler")
    assert v.passed, v.summary()
    assert v.calls == 5                                     # three parts, the first and the last replayed


def test_a_sampler_that_ignores_its_generator_fails_at_the_first_part_s_replay():
    v = run_judge(_global_coins, _parts(), device="cpu", spec="global_coins")
    assert not v.passed
    assert "same generator seed gave" in v.summary(), v.summary()


def test_a_sampler_that_changes_after_warm_up_calls_fails_at_the_last_part_s_replay():
    """Part 1 (a call on other contents where its history asks, the call, its replay) is within
    the warm-up calls; the later parts run 'captured': only the last part's replay sees it (the
    first part's alone, as 810d96c had it, passed this sampler)."""
    v = run_judge(_CapturedAfterWarmUp(), _parts(5), device="cpu", spec="captured_after_warm_up")
    assert not v.passed
    assert "same generator seed gave" in v.summary(), v.summary()


def test_a_tree_part_draws_other_trees_over_the_same_bank():
    r = TreeRecipe(family="realistic", seed=4, batch=32, vocab=300, nodes=8, depth=3, fanout=3, drafts="iid",
                   ragged=1, holes=1)
    a, b = r.trees(), r.with_(part=1).trees()
    assert r.model() is r.with_(part=1).model()
    assert not np.array_equal(a.tokens, b.tokens)
    assert np.array_equal(r.trees().tokens, a.tokens)       # a part is replayable
    assert str(r.with_(part=2)).endswith("part=2")


def test_a_tree_recipe_is_built_from_its_bank_s_laws_on_the_device_as_on_the_host():
    """``build`` gathers ``[B, N, V]`` from the bank's laws where the call runs (``_laws_on``):
    bit for bit the host's gather, parts of one bank sharing the laws' tensors."""
    from equiv.ops.verify_tree import recipes

    r = TreeRecipe(family="peaked", seed=2, batch=40, vocab=700, nodes=10, depth=4, fanout=3, drafts="wor",
                   ragged=1, holes=1, part=3)
    parents, tokens, draft, target = r.build("cpu")
    t, m = r.trees(), r.model()
    assert torch.equal(target, torch.from_numpy(m.target32[t.index])) and target.is_contiguous()
    assert torch.equal(draft, torch.from_numpy(m.draft32[t.index]))
    assert torch.equal(tokens, torch.from_numpy(t.tokens)) and torch.equal(parents, torch.from_numpy(t.parents))
    assert r.with_(part=4).build("cpu")[3].shape == target.shape
    assert recipes._laws_on(("peaked", 2, 700), "cpu")[0] is recipes._laws_on(("peaked", 2, 700), "cpu")[0]
    assert r.with_(probs=0).build("cpu")[2] is None
