"""Hostile verifiers: each an ordinary bug a real kernel could have, wrong in ONE dimension of the
input space only (issue 34), plus correct ones that must pass. Loaded by spec
(``tests/candidates/verify_hostile.py:NAME``); ``scripts/verify_hostile_table.py`` runs them all
through the quick CPU gate and prints the table.

The exact bug used where a dimension is the point (``_from_target``): the recovered token drawn
from the target ``p`` instead of the residual ``max(0, p - q)``, which emits tokens the
token-level law never draws (and, at positions the judge can check, text of the wrong law).
"""
import functools

import torch

from equiv.ops.verify.paths import (acceptance_ratio, block_emit, block_keep_probabilities, block_residual,
                                   block_verification, block_weights, drawn_law, emit, first_rejection,
                                   inverse_cdf, torch_sampler)


def _sample(d, q, p, g, wrong_rows=None, wrong_from=None):
    """``torch_sampler`` whose rows in ``wrong_rows`` ([B] bool) that reject at a position
    ``>= wrong_from`` draw the recovered token from ``p`` instead of the residual."""
    n = d.shape[1]
    u = torch.rand((d.shape[0], n + 1), generator=g, device=p.device)
    stop = first_rejection(acceptance_ratio(d, q, p), u[:, :-1])
    law = drawn_law(d, q, p, stop)
    rows = torch.arange(d.shape[0], device=p.device)
    bad = stop < n
    if wrong_rows is not None:
        bad &= wrong_rows
    if wrong_from is not None:
        bad &= stop >= wrong_from
    law = torch.where(bad[:, None], p[rows, stop], law)
    return emit(d, stop, inverse_cdf(law, u[:, -1:]))


# ---- wrong in one dimension only ---------------------------------------------------------------

def wrong_from_position_3(d, q, p, g):
    """A chained kernel whose later stages (positions 3+) read the target row, not the residual."""
    return _sample(d, q, p, g, wrong_from=3)


def wrong_past_2_17(d, q, p, g):
    """A residual kernel tiled for V <= 2**17; past that a fallback that forgets to subtract q."""
    if p.shape[-1] <= 2 ** 17:
        return torch_sampler(d, q, p, g)
    return _sample(d, q, p, g)


def wrong_after_last_64(d, q, p, g):
    """Rows in blocks of 64; the remainder rows go through a scalar path that forgets q."""
    B = d.shape[0]
    rows = torch.arange(B, device=p.device)
    return _sample(d, q, p, g, wrong_rows=rows >= B - B % 64)


def wrong_for_n_ge_9(d, q, p, g):
    """A kernel specialised for n <= 8; longer chains take a generic path that forgets q."""
    if d.shape[1] <= 8:
        return torch_sampler(d, q, p, g)
    return _sample(d, q, p, g)


def top_1024_past_160000(d, q, p, g):
    """A fast path for Gemma-size vocabularies: past V = 160000 the recovered or bonus token is
    drawn from its law's 1024 most likely tokens only."""
    if p.shape[-1] <= 160000:
        return torch_sampler(d, q, p, g)
    n = d.shape[1]
    u = torch.rand((d.shape[0], n + 1), generator=g, device=p.device)
    stop = first_rejection(acceptance_ratio(d, q, p), u[:, :-1])
    top, index = drawn_law(d, q, p, stop).topk(1024, dim=1)
    return emit(d, stop, index.gather(1, inverse_cdf(top, u[:, -1:])))


def accepts_more_from_position_11(d, q, p, g):
    """A second code path for long chains: from draft position 11 on, the acceptance test
    compares against the ratio over 0.9 (it accepts too often there; the residual is right)."""
    n = d.shape[1]
    u = torch.rand((d.shape[0], n + 1), generator=g, device=p.device)
    late = torch.arange(n, device=p.device) >= 11
    ratio = torch.where(late, acceptance_ratio(d, q, p) / 0.9, acceptance_ratio(d, q, p))
    stop = first_rejection(ratio, u[:, :-1])
    return emit(d, stop, inverse_cdf(drawn_law(d, q, p, stop), u[:, -1:]))


def rows_share_uniforms(d, q, p, g):
    """Draws uniforms for every other row and broadcasts them: row 2i+1 reuses row 2i's."""
    B, n = d.shape
    half = torch.rand(((B + 1) // 2, n + 1), generator=g, device=p.device)
    u = half.repeat_interleave(2, 0)[:B]
    stop = first_rejection(acceptance_ratio(d, q, p), u[:, :-1])
    return emit(d, stop, inverse_cdf(drawn_law(d, q, p, stop), u[:, -1:]))


_STATE: dict = {}


def calls_share_state(d, q, p, g):
    """Uniforms made once per shape and kept (as a captured graph replays one generator state)."""
    key = (tuple(d.shape), p.shape[-1])
    if key not in _STATE:
        _STATE[key] = torch.rand((d.shape[0], d.shape[1] + 1), generator=g, device=p.device)
    u = _STATE[key]
    stop = first_rejection(acceptance_ratio(d, q, p), u[:, :-1])
    return emit(d, stop, inverse_cdf(drawn_law(d, q, p, stop), u[:, -1:]))


# ---- lossy block-style verifiers (each lossy everywhere, by a small total variation) ----------

def _block(d, q, p, g, *, weights=None, keep=None, weighted=True, share=1.0):
    """Block verification with one step changed, on a share ``share`` of the rows (a drawn
    uniform decides: a kernel whose approximate path fires on some rows only)."""
    u = torch.rand((d.shape[0], d.shape[1] + 2), generator=g, device=p.device, dtype=torch.float64)
    w = block_weights(d, q, p)
    h = block_keep_probabilities(d, q, p, w)
    right = block_emit(d, q, p, w, u[:, :-2] < h, u[:, -2:-1])
    w2 = w if weights is None else weights(w)
    h2 = h if keep is None else keep(w2)
    wrong = block_emit(d, q, p, w2, u[:, :-2] < h2, u[:, -2:-1], weighted=weighted)
    usable = (wrong < p.shape[-1]).all(1, keepdim=True)         # an empty law: the right path
    return torch.where((u[:, -1:] < share) & usable, wrong, right)


def block_weights_unclamped(d, q, p, g, share=1.0):
    """Block verification whose weights run unclamped (``w_i = prod p/q``), clamped only when used
    as a keep probability: blocks after a draft with p > q are kept too often."""
    def weights(w):
        n = d.shape[1]
        p_d = p[:, :n].gather(2, d[..., None])[..., 0].double()
        q_d = torch.ones_like(p_d) if q is None else q.gather(2, d[..., None])[..., 0].double()
        return torch.cat([torch.ones_like(p_d[:, :1]), torch.cumprod(p_d / q_d, 1)], 1)

    def keep(w):
        return block_keep_probabilities(d, q, p, w.clamp(max=1.0)).clamp(max=1.0)
    return _block(d, q, p, g, weights=weights, keep=keep, share=share)


def block_keep_unweighted_mass(d, q, p, g, share=1.0):
    """Block verification whose keep probability uses the token-level residual mass
    ``sum max(0, p - q)`` in place of ``sum max(0, w p - q)``."""
    def keep(w):
        n = d.shape[1]
        rows = torch.arange(d.shape[0], device=p.device)
        h = []
        for i in range(1, n):
            r = block_residual(d, q, p, w, rows, torch.full_like(rows, i), weighted=False).sum(1)
            den = r + 1.0 - w[:, i]
            h.append(torch.where(den > 0, r / den.clamp(min=1e-300), torch.ones_like(r)))
        return torch.stack(h + [w[:, n]], 1)
    return _block(d, q, p, g, keep=keep, share=share)


def block_last_keep_one(d, q, p, g, share=0.5):
    """Block verification that keeps the whole block whenever the last weight is over 1/2 (a
    threshold where a draw belongs): long blocks are kept too often."""
    def keep(w):
        h = block_keep_probabilities(d, q, p, w)
        return torch.cat([h[:, :-1], torch.where(w[:, -1:] > 0.5, torch.ones_like(h[:, -1:]), h[:, -1:])], 1)
    return _block(d, q, p, g, keep=keep, share=share)


LOSSY = {"weights_unclamped": block_weights_unclamped, "keep_unweighted_mass": block_keep_unweighted_mass,
         "last_keep_one": block_last_keep_one}


def lossy(kind: str, share: float):
    """The lossy block verifier ``kind`` taking its wrong path on a share ``share`` of the rows:
    its emitted-text law is ``(1 - share) L + share L_kind``, at ``share`` times its total
    variation (the power table's dial: scripts/verify_joint_calibration.py)."""
    fn = functools.partial(LOSSY[kind], share=share)
    fn.__name__ = f"{kind}_{share:g}"
    return fn


# ---- correct ------------------------------------------------------------------------------------

def correct_torch(d, q, p, g):
    return torch_sampler(d, q, p, g)


def correct_block(d, q, p, g):
    return block_verification(d, q, p, g)


def correct_other_stream(d, q, p, g):
    """The token-level law from another random stream: float64 uniforms drawn position-major
    (transposed), the token by an exponential race instead of an inverse CDF."""
    B, n = d.shape
    u = torch.rand((n, B), generator=g, device=p.device, dtype=torch.float64).T
    stop = first_rejection(acceptance_ratio(d, q, p).double(), u)
    law = drawn_law(d, q, p, stop).double()
    race = law / torch.empty_like(law).exponential_(generator=g)
    return emit(d, stop, race.argmax(1, keepdim=True))
