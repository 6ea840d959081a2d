"""The synthetic target LM and draft (equiv/mtp/models.py).

Plan: the model is deterministic for a seed and its target depends on the tokens before it;
its conditional law is the exact one the statistics assume (softmax of the logits equals the
rank law at the token's rank); rank_of and token_of_rank invert each other; the draft is
calibrated (greedy acceptance of the first draft position in DeepSeek-V3's 0.85-0.90) and gets
worse with depth; hashes accept any int64 token; uniforms are in [0, 1) and keyed only by
(seed, row, position, purpose).
"""
import numpy as np
import pytest
import torch

from equiv.mtp.models import LEVEL_EXPONENTS, SyntheticLM, next_context, uniforms


@pytest.fixture(scope="module")
def model():
    return SyntheticLM(4096, seed=3)


def test_same_seed_same_logits_other_seed_other_logits(model):
    ctx = model.initial_contexts(4)
    again = SyntheticLM(4096, seed=3)
    assert torch.equal(model.target_logits(ctx), again.target_logits(again.initial_contexts(4)))
    other = SyntheticLM(4096, seed=4)
    assert not torch.equal(model.target_logits(ctx), other.target_logits(other.initial_contexts(4)))


def test_a_different_token_changes_what_follows(model):
    ctx = model.initial_contexts(1)
    a = next_context(ctx, torch.tensor([5]))
    b = next_context(ctx, torch.tensor([6]))
    assert not torch.equal(model.target_logits(a), model.target_logits(b))
    # over many contexts the argmax after token 5 and after token 6 almost never coincide
    many = model.initial_contexts(200)
    ta = model.target_logits(next_context(many, torch.full((200,), 5))).argmax(1)
    tb = model.target_logits(next_context(many, torch.full((200,), 6))).argmax(1)
    assert (ta == tb).float().mean() < 0.05


def test_softmax_of_logits_is_the_exact_rank_law(model):
    ctx = model.initial_contexts(16)
    probs = torch.softmax(model.target_logits(ctx).double(), dim=1)
    tokens = torch.arange(model.vocab).expand(16, -1)
    ranks = torch.stack([model.rank_of(ctx[i].expand(model.vocab), tokens[i]) for i in range(16)])
    law = model.rank_probabilities[model.level_of(ctx)[:, None], ranks]
    # float32 logits: relative error ~ 1e-6 on the probabilities that matter
    assert torch.allclose(probs, law, rtol=1e-5, atol=1e-9)
    assert torch.equal(ranks.argmin(1), probs.argmax(1))


def test_rank_of_and_token_of_rank_invert_each_other(model):
    ctx = model.initial_contexts(64)
    rank = torch.randint(0, model.vocab, (64,), generator=torch.Generator().manual_seed(0))
    assert torch.equal(model.rank_of(ctx, model.token_of_rank(ctx, rank)), rank)
    assert (model.rank_of(ctx, torch.full((64,), model.vocab)) == -1).all()


def test_entropy_and_top1_are_lm_like():
    d = SyntheticLM(129280).describe()
    assert 1.0 < d["mean_entropy_nats"] < 2.0 and 0.6 < d["mean_top1_probability"] < 0.85
    assert d["level_exponents"] == list(LEVEL_EXPONENTS)


def _greedy_agreement(model, n=3000):
    ctx, rates = model.initial_contexts(n), []
    for depth in range(3):
        target = model.target_logits(ctx).argmax(1)
        rates.append(float((model.draft_logits(ctx, depth).argmax(1) == target).float().mean()))
        ctx = next_context(ctx, target)
    return rates


def test_draft_is_calibrated_to_deepseek_mtp_and_decays_with_depth():
    rates = _greedy_agreement(SyntheticLM(32000, seed=0))
    assert 0.85 <= rates[0] <= 0.90, rates
    assert rates[0] > rates[1] > rates[2] > 0.6, rates


def test_draft_sigma_controls_agreement():
    sharp = _greedy_agreement(SyntheticLM(4096, draft_sigma=0.3), 1000)[0]
    loose = _greedy_agreement(SyntheticLM(4096, draft_sigma=2.0), 1000)[0]
    assert sharp > 0.97 and loose < 0.7


def test_hash_accepts_any_int64_token():
    ctx = torch.tensor([1, 1, 1, 1])
    out = next_context(ctx, torch.tensor([-1, 2**40 + 3, -(2**50), 7]))
    assert ((out >= 0) & (out < 2**31)).all() and len(set(out.tolist())) == 4


def test_uniforms_are_in_range_and_keyed_by_position():
    rows = torch.arange(1000)
    u = uniforms(0, rows, torch.zeros(1000, dtype=torch.int64), 1)
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
    assert abs(float(u.mean()) - 0.5) < 0.03
    assert torch.equal(u, uniforms(0, rows, torch.zeros(1000, dtype=torch.int64), 1))
    assert not torch.equal(u, uniforms(1, rows, torch.zeros(1000, dtype=torch.int64), 1))
    assert not torch.equal(u, uniforms(0, rows, torch.ones(1000, dtype=torch.int64), 1))
    counts = np.histogram(u.numpy(), bins=10, range=(0, 1))[0]
    assert counts.min() > 60


def test_real_vocabulary_runs_on_cpu():
    m = SyntheticLM(129280)
    ctx = m.initial_contexts(3)
    assert m.target_logits(ctx).shape == (3, 129280) and m.draft_logits(ctx, 2).dtype == torch.float32


def test_plain_window_read_gives_the_same_logits(model):
    ctx = model.initial_contexts(8)
    fast_t, fast_d = model.target_logits(ctx), model.draft_logits(ctx, 1)
    slow = SyntheticLM(4096, seed=3)
    slow._rows.fast = slow._noise.fast = False
    assert torch.equal(slow.target_logits(ctx), fast_t) and torch.equal(slow.draft_logits(ctx, 1), fast_d)
