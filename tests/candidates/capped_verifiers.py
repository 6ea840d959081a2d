"""Verifiers that accept at most ``CAP`` drafts: lossless, less efficient (issue 42, part 2).

Plan. A verifier that stops after ``CAP`` accepted drafts (a truncated tree, a max-accept-length,
a stop at a sequence limit) and draws the next token from the *full* target of the node it
stopped at emits text with exactly the target's law: up to the stop it is the built-in rule, and
the token after the stop is a draw of the target law after that prefix. So each gate must PASS
it, with an efficiency below the optimum. Built on the built-in verifiers' code shapes
(equiv/ops/verify/paths.py ``torch_sampler``, equiv/ops/verify_tree/paths.py ``target_only``).

The ``wrong_*`` ones are not lossless: at the stop they emit the argmax of a wrong row (the
parent's; the chain's: the next position's), the defect the greedy check must still see.
"""
import torch

from equiv.ops.verify.paths import acceptance_ratio, drawn_law, emit, first_rejection, inverse_cdf
from equiv.ops.verify_tree.paths import _first, _sample, _walk, _zero

CAP = 3


def _capped_chain(d, q, p, g, shift: int):
    uniforms = torch.rand((d.shape[0], d.shape[1] + 1), generator=g, device=p.device)
    stop = first_rejection(acceptance_ratio(d, q, p), uniforms[:, :-1])
    capped = stop >= CAP                                  # reached the cap: no test there
    stop = stop.clamp(max=CAP)
    law = drawn_law(d, q, p, stop)
    rows = torch.arange(d.shape[0], device=p.device)
    law = torch.where(capped[:, None], p[rows, (stop + shift).clamp(max=p.shape[1] - 1)], law)
    return emit(d, stop, inverse_cdf(law, uniforms[:, -1:]))


def capped_chain(d, q, p, g):
    """``torch_sampler`` that accepts at most ``CAP`` drafts; a row that reached the cap draws
    its next token from the full target ``p_CAP`` (which may be the draft there)."""
    return _capped_chain(d, q, p, g, shift=0)


def wrong_capped_chain(d, q, p, g):
    """As ``capped_chain``, but a capped row draws from the *next* position's target row."""
    return _capped_chain(d, q, p, g, shift=1)


def _capped_tree(parents, draft_token_ids, target_probs, generator, wrong_row: bool):
    def rule(s, kid_tok, valid):
        p = s["p"] / s["p"].sum(1, keepdim=True)
        u = torch.rand(p.shape[0], generator=generator, device=p.device, dtype=torch.float64)
        cum = (p.gather(1, kid_tok) * valid.double()).cumsum(1)
        hit = _first(valid & (u[:, None] < cum))
        return hit if s["depth"] < CAP else torch.full_like(hit, -1)

    def draw(s, kid_tok, valid, stop):
        if s["depth"] < CAP:                             # a real rejection (or a leaf): the residual
            return _sample(_zero(s["p"], kid_tok, valid), generator)
        if not wrong_row:
            return _sample(s["p"], generator)
        par = s["parents"].gather(1, s["cur"][:, None]).squeeze(1)       # the parent's row: a defect
        return target_probs[s["rows"], par.clamp(min=0)].argmax(1)
    return _walk(parents, draft_token_ids, None, target_probs, generator, rule, draw)


def capped_tree(parents, draft_token_ids, draft_probs, target_probs, generator):
    """``target_only`` that accepts at most ``CAP`` nodes; at the cap it draws from the node's
    full target row (the children are not rejected: none was tried)."""
    return _capped_tree(parents, draft_token_ids, target_probs, generator, wrong_row=False)


capped_tree.drafts = "topk"


def wrong_capped_tree(parents, draft_token_ids, draft_probs, target_probs, generator):
    """As ``capped_tree``, but at the cap it emits the argmax of the *parent's* row."""
    return _capped_tree(parents, draft_token_ids, target_probs, generator, wrong_row=True)


wrong_capped_tree.drafts = "topk"
