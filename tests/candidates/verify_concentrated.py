"""Held-out samplers whose draws land on a few hundred of the tail tokens (written apart from the
zoo, as an engine would: a rejection sampler whose inverse CDF runs on a bfloat16 cumulative sum,
and one whose tail is bucketed). Loaded by spec, so they run in the supervised worker."""
import torch

from equiv.ops.verify.paths import acceptance_ratio, drawn_law, emit, first_rejection


def bf16_cumsum(d, q, p, g):
    u = torch.rand((d.shape[0], d.shape[1] + 1), generator=g, device=p.device)
    stop = first_rejection(acceptance_ratio(d, q, p), u[:, :-1])
    law = drawn_law(d, q, p, stop).to(torch.bfloat16)
    cdf = torch.cumsum(law, dim=1)                                   # stays bfloat16: it stalls
    x = (u[:, -1:] * cdf[:, -1:].float()).to(torch.bfloat16)
    tok = torch.searchsorted(cdf, x, right=True).clamp(max=law.shape[1] - 1)
    return emit(d, stop, tok)


def bucketed_tail(d, q, p, g, head=64, buckets=256):
    """Exact head; a tail draw is moved to the most likely tail token of its hash bucket."""
    u = torch.rand((d.shape[0], d.shape[1] + 1), generator=g, device=p.device, dtype=torch.float64)
    stop = first_rejection(acceptance_ratio(d, q, p), u[:, :-1].float())
    law = drawn_law(d, q, p, stop).double()
    cdf = law.cumsum(1)
    tok = torch.searchsorted(cdf, u[:, -1:] * cdf[:, -1:], right=True).clamp(max=law.shape[1] - 1)
    rank = (law > law.gather(1, tok)).sum(1, keepdim=True)
    vocab = torch.arange(law.shape[1], device=p.device)
    same = (vocab[None] % buckets == tok % buckets) & (law > 0)
    moved = torch.where(same, law, torch.zeros_like(law)).argmax(1, keepdim=True)
    return emit(d, stop, torch.where(rank >= head, moved, tok))
