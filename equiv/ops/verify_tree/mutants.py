"""Mutants of the tree verifier, one per bug class of the public record, each named after its cause.

Plan. Each mutant is a built-in (paths.py) with one deliberate bug, declaring the construction its
original declares, so the gate judges it where its original passes (``equiv gate --op
verify_tree --candidate equiv.ops.verify_tree.mutants:NAME``). ``MUTANTS`` maps the name to
``(function, bug class, the check expected to kill it)``; tests/ops/verify_tree/test_verify_tree_mutants.py and
docs/verify_tree.md show each killed, with the cause the diagnosis names.

| name | bug | original |
|---|---|---|
| ``reused_last_coin`` | the token drawn after the children are rejected reuses the level's acceptance coin | target_only |
| ``zero_coin_accepts_p0`` | coins on a 1/256 grid compared with ``<=``: a zero coin accepts a child of target probability 0 | eagle_onehot |
| ``fallback_zero_prob`` | the residual is not renormalised: a coin past its mass falls to the last token (probability 0) | target_only |
| ``greedy_at_temperature`` | greedy verification used with sampling targets (silently greedy at temperature > 0) | greedy |
| ``residual_zeroing`` | after a rejection the rejected token is zeroed instead of subtracting q | specinfer |
| ``parent_row`` | a node's children are judged against its parent's target row | target_only |
| ``first_sibling_row`` | after a move, the row of the level's first child is read, not the accepted node's | target_only |
| ``thresholds_half`` | SGLang's acceptance thresholds at 0.5 instead of 1 | target_only |
| ``independent_longest`` | every node accepted independently, the longest accepted root path kept | target_only |

``LEGAL_VARIANTS`` are lossless verifiers written differently (they must pass): the built-ins
through the SGLang and vLLM layouts (adapters.py).
"""
from __future__ import annotations

import torch

from equiv.ops.verify_tree import adapters
from equiv.ops.verify_tree import paths as P


def _coin(gen, B, dev):
    return torch.rand(B, generator=gen, device=dev, dtype=torch.float64)


def reused_last_coin(parents, draft_token_ids, draft_probs, target_probs, generator):
    def rule(s, kid_tok, valid):
        p = s["p"] / s["p"].sum(1, keepdim=True)
        s["u"] = u = _coin(generator, p.shape[0], p.device)
        cum = (p.gather(1, kid_tok) * valid.double()).cumsum(1)
        return P._first(valid & (u[:, None] < cum))

    def draw(s, kid_tok, valid, stop):
        res = P._zero(s["p"], kid_tok, valid)
        cdf = res.cumsum(1)
        x = torch.searchsorted(cdf, (s["u"] * cdf[:, -1])[:, None], right=True).squeeze(1)
        return x.clamp(max=res.shape[1] - 1)
    return P._walk(parents, draft_token_ids, None, target_probs, generator, rule, draw)


reused_last_coin.drafts = "topk"


def zero_coin_accepts_p0(parents, draft_token_ids, draft_probs, target_probs, generator):
    def rule(s, kid_tok, valid):
        chosen, s["residual"] = P._children_in_turn(
            kid_tok, valid, s["p"].clone(),
            lambda B: torch.randint(0, 256, (B,), generator=generator, device=kid_tok.device).double() / 256,
            accept=lambda u, p, tok: u * p.sum(1) <= p.gather(1, tok).squeeze(1), rejected=P._zero)
        return chosen

    def draw(s, kid_tok, valid, stop):
        return P._sample(s["residual"], generator)
    return P._walk(parents, draft_token_ids, None, target_probs, generator, rule, draw)


zero_coin_accepts_p0.drafts = "any"


def fallback_zero_prob(parents, draft_token_ids, draft_probs, target_probs, generator):
    def rule(s, kid_tok, valid):
        p = s["p"] / s["p"].sum(1, keepdim=True)
        u = _coin(generator, p.shape[0], p.device)
        cum = (p.gather(1, kid_tok) * valid.double()).cumsum(1)
        return P._first(valid & (u[:, None] < cum))

    def draw(s, kid_tok, valid, stop):
        p = s["p"] / s["p"].sum(1, keepdim=True)
        cdf = P._zero(p, kid_tok, valid).cumsum(1)             # mass 1 - p(children): never renormalised
        u = _coin(generator, p.shape[0], p.device)
        return torch.searchsorted(cdf, u[:, None], right=True).squeeze(1).clamp(max=p.shape[1] - 1)
    return P._walk(parents, draft_token_ids, None, target_probs, generator, rule, draw)


fallback_zero_prob.drafts = "topk"


def greedy_at_temperature(parents, draft_token_ids, draft_probs, target_probs, generator):
    return P.greedy(parents, draft_token_ids, draft_probs, target_probs, generator)


greedy_at_temperature.drafts = "topk"            # no ``targets = "onehot"``: used for sampling


def residual_zeroing(parents, draft_token_ids, draft_probs, target_probs, generator):
    def rejected(state, tok, rows):
        p, q = state
        z = P._zero(p, tok, rows)
        return torch.where((z.sum(1, keepdim=True) > 0), z / z.sum(1, keepdim=True).clamp(min=1e-300), p), q

    def rule(s, kid_tok, valid):
        start = (s["p"] / s["p"].sum(1, keepdim=True), s["q"] / s["q"].sum(1, keepdim=True))
        chosen, (s["residual"], _) = P._children_in_turn(
            kid_tok, valid, start, lambda B: _coin(generator, B, kid_tok.device),
            accept=lambda u, st, tok: u * st[1].gather(1, tok).squeeze(1) < st[0].gather(1, tok).squeeze(1),
            rejected=rejected)
        return chosen

    def draw(s, kid_tok, valid, stop):
        return P._sample(s["residual"], generator)
    return P._walk(parents, draft_token_ids, draft_probs, target_probs, generator, rule, draw)


residual_zeroing.drafts = "iid"


def _row_swapped(which):
    """target_only reading another node's target row (``which(state) -> node per row``)."""
    def verifier(parents, draft_token_ids, draft_probs, target_probs, generator):
        def rule(s, kid_tok, valid):
            node = which(s)
            s["p"] = target_probs[s["rows"], node].double()
            p = s["p"] / s["p"].sum(1, keepdim=True)
            u = _coin(generator, p.shape[0], p.device)
            cum = (p.gather(1, kid_tok) * valid.double()).cumsum(1)
            return P._first(valid & (u[:, None] < cum))

        def draw(s, kid_tok, valid, stop):
            return P._sample(P._zero(s["p"], kid_tok, valid), generator)
        return P._walk(parents, draft_token_ids, None, target_probs, generator, rule, draw)
    verifier.drafts = "topk"
    return verifier


def _parent(s):
    par = s["parents"].gather(1, s["cur"][:, None]).squeeze(1)
    return par.clamp(min=0)


def _first_sibling(s):
    cur, parents = s["cur"], s["parents"]
    par = parents.gather(1, cur[:, None])                                  # [B, 1]
    N = parents.shape[1]
    idx = torch.arange(N, device=cur.device).expand_as(parents)
    first = torch.where(parents == par, idx, torch.full_like(idx, N)).min(1).values
    return torch.where(cur > 0, first.clamp(max=N - 1), cur)


parent_row = _row_swapped(_parent)
first_sibling_row = _row_swapped(_first_sibling)


def thresholds_half(parents, draft_token_ids, draft_probs, target_probs, generator):
    def rule(s, kid_tok, valid):
        p = s["p"] / s["p"].sum(1, keepdim=True)
        u = _coin(generator, p.shape[0], p.device)
        px = p.gather(1, kid_tok) * valid.double()
        cum = px.cumsum(1)
        return P._first(valid & ((u[:, None] <= cum / 0.5) | (px >= 0.5)))

    def draw(s, kid_tok, valid, stop):
        return P._sample(P._zero(s["p"], kid_tok, valid), generator)
    return P._walk(parents, draft_token_ids, None, target_probs, generator, rule, draw)


thresholds_half.drafts = "topk"


def independent_longest(parents, draft_token_ids, draft_probs, target_probs, generator):
    B, N, V = target_probs.shape
    dev = target_probs.device
    rows = torch.arange(B, device=dev)
    par = parents.clamp(min=0)
    p = target_probs.double() / target_probs.double().sum(-1, keepdim=True)
    p_tok = p[rows[:, None], par, draft_token_ids]                          # p_parent(token of i)
    ok = (torch.rand(B, N, generator=generator, device=dev, dtype=torch.float64) < p_tok) & (parents >= 0)
    ok[:, 0] = True
    reach = ok.clone()
    for _ in range(N):                                                     # accepted all the way up
        reach = ok & reach.gather(1, par) | (torch.arange(N, device=dev) == 0)
    children, F, D = P.tree_layout(parents)
    depth = torch.zeros(B, N, dtype=torch.int64, device=dev)
    for _ in range(N):
        depth = torch.where(parents >= 0, depth.gather(1, par) + 1, depth)
    score = torch.where(reach, depth * (N + 1) + (N - torch.arange(N, device=dev)), torch.full_like(depth, -1))
    end = score.argmax(1)
    path = torch.full((B, D + 1), -1, dtype=torch.int64, device=dev)
    out = torch.full((B, D + 1), -1, dtype=torch.int64, device=dev)
    k = depth[rows, end]
    node = end.clone()
    for j in range(D, 0, -1):
        at = k >= j
        path[:, j] = torch.where(at, node, path[:, j])
        out[:, j - 1] = torch.where(at, draft_token_ids[rows, node], out[:, j - 1])
        node = torch.where(at, par[rows, node], node)
    path[:, 0] = 0
    kids = children[rows, end]
    valid = kids >= 0
    res = P._zero(p[rows, end], draft_token_ids.gather(1, kids.clamp(min=0)), valid)
    out[rows, k] = P._sample(res, generator)
    return path, out


independent_longest.drafts = "topk"

MUTANTS = {
    "reused_last_coin": (reused_last_coin, "the final draw reuses the last acceptance coin", "marginal"),
    "zero_coin_accepts_p0": (zero_coin_accepts_p0, "a zero coin accepts a token of probability 0", "support"),
    "fallback_zero_prob": (fallback_zero_prob, "a fallback token of probability 0", "support"),
    "greedy_at_temperature": (greedy_at_temperature, "greedy verification at temperature > 0", "marginal"),
    "residual_zeroing": (residual_zeroing, "residual zeroes the rejected token instead of subtracting q",
                         "marginal"),
    "parent_row": (parent_row, "the parent's target row instead of the accepted node's", "marginal"),
    "first_sibling_row": (first_sibling_row, "a tried sibling's target row instead of the accepted node's",
                          "marginal"),
    "thresholds_half": (thresholds_half, "acceptance thresholds 0.5 instead of 1", "marginal"),
    "independent_longest": (independent_longest, "nodes accepted independently, the longest path kept",
                            "marginal"),
}
for _name, (_fn, _why, _check) in MUTANTS.items():
    _fn.bug_class = _why                           # what ``equiv selftest`` shows


LEGAL_VARIANTS = {"sglang_layout_target_only": adapters.sglang_target_only,
                  "vllm_layout_eagle_onehot": adapters.vllm_eagle_onehot}
