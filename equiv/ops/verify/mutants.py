"""The verifier mutant zoo: rejection samplers with one realistic bug each, which the judge must fail.

Each mutant is the built-in ``torch_sampler`` (``equiv.ops.verify.paths``) with one step
replaced by the bug, so it differs from a correct verifier in exactly one way. Each is a module
attribute and loads as the spec ``equiv.ops.verify.mutants:NAME``; ``MUTANTS`` maps the name to
a ``VerifierMutant`` (name, bug class, description, the check expected to catch it).
``LEGAL_VARIANTS`` sample the same law another way (an exponential race, as vLLM's sampler
does); the judge must pass them. The built-in ``block_verification`` (paths.py) is lossless but
breaks the token law; its lossy relatives below (``block_*``) fail the losslessness judge, while
the token law fails all of them alike. ``caught_by`` names the check of the default (lossless)
law; ``caught_by_token`` that of ``--law token`` where it differs. ``caught_by=None``: the
losslessness judge's quick plan passes it, rightly or nearly so -- ``ignores_draft_probs``
treats each draft as one-hot, which is lossless (only slower), and ``ratio_in_float16`` loses
only drafts with ``q < 2**-25``, at most ``V * 2**-25`` (0.4 % at V = 129280) of the draft mass,
which no draw budget of the gate sees; ``block_residual_unweighted`` is off by a total variation
of at most ~0.01 where it differs at all (its description says where the lossless law sees it;
until issue 42 the ``-1`` layout failed it whenever it drew the draft, an output the lossless
law now reads as text); the token law catches all three.

``tests/ops/verify/test_verify_mutants.py`` runs the quick gate on every mutant and variant; docs/verify.md
has the kill table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from equiv.ops.verify.paths import (acceptance_ratio, block_emit, block_keep_probabilities, block_weights,
                                   drawn_law, emit, first_rejection, inverse_cdf)


@dataclass(frozen=True)
class VerifierMutant:
    name: str
    bug_class: str
    description: str
    caught_by: str | None
    fn: Callable = None
    caught_by_token: str | None = None

    def __call__(self, draft_token_ids, draft_probs, target_probs, generator):
        return self.fn(draft_token_ids, draft_probs, target_probs, generator)


MUTANTS: dict[str, VerifierMutant] = {}
LEGAL_VARIANTS: dict[str, VerifierMutant] = {}


def _register(table, bug_class, description, caught_by, caught_by_token=None):
    def wrap(fn):
        m = VerifierMutant(fn.__name__, bug_class, description, caught_by, fn, caught_by_token)
        table[m.name] = m
        return m
    return wrap


def mutant(bug_class: str, description: str, caught_by: str | None, caught_by_token: str | None = None):
    return _register(MUTANTS, bug_class, description, caught_by, caught_by_token)


def _uniforms(d, p, generator):
    return torch.rand((d.shape[0], d.shape[1] + 1), generator=generator, device=p.device)


def _sampler(d, q, p, generator, *, ratio=None, law=None, accept_u=None, draw_u=None):
    """``torch_sampler`` with any of its steps given from outside: the ratio, the drawn law
    (a function of ``stop``), the uniforms of the accept test (of ``u``) or of the draw (of
    ``u, stop``)."""
    u = _uniforms(d, p, generator)
    ratio = acceptance_ratio(d, q, p) if ratio is None else ratio
    stop = first_rejection(ratio, u[:, :-1] if accept_u is None else accept_u(u))
    law = drawn_law(d, q, p, stop) if law is None else law(stop)
    return emit(d, stop, inverse_cdf(law, u[:, -1:] if draw_u is None else draw_u(u, stop)))


@mutant("ratio in another precision", "the ratio p(d) / q(d) is computed in float16: a draft "
        "probability under 2**-24 flushes to 0 and 0/0 rejects a draft that should be accepted",
        None, "acceptance")
def ratio_in_float16(d, q, p, g):
    p_d = p[:, : d.shape[1]].gather(2, d[..., None])[..., 0].half()
    q_d = torch.ones_like(p_d) if q is None else q.gather(2, d[..., None])[..., 0].half()
    return _sampler(d, q, p, g, ratio=(p_d / q_d).clamp(max=1.0).float())


@mutant("q the draft was not sampled from", "ignores draft_probs and treats every draft as one-hot "
        "(accept with p(d), resample from p without d)", None, "acceptance")
def ignores_draft_probs(d, q, p, g):
    return _sampler(d, None, p, g)


@mutant("residual is not max(0, p - q)", "the recovered token is drawn from the target p itself",
        "marginal", "support")                   # contract (-1 layout) until issue 42: drawing the draft is text
def recovered_from_target(d, q, p, g):
    rows = torch.arange(d.shape[0], device=p.device)
    return _sampler(d, q, p, g, law=lambda stop: p[rows, stop])


@mutant("residual is not max(0, p - q)", "the residual is |p - q| instead of max(0, p - q)", "support")
def residual_absolute(d, q, p, g):
    if q is None:
        return _sampler(d, q, p, g)
    rows = torch.arange(d.shape[0], device=p.device)
    n = d.shape[1]

    def law(stop):
        at = stop.clamp(max=n - 1)
        return torch.where((stop < n)[:, None], (p[rows, stop] - q[rows, at]).abs(), p[rows, stop])
    return _sampler(d, q, p, g, law=law)


@mutant("target zeroed in place", "builds the residual by writing into target_probs (p at the draft "
        "set to 0, then p - q clamped in place) and samples from the edited rows", "contract")
def target_zeroed_in_place(d, q, p, g):
    u = _uniforms(d, p, g)
    stop = first_rejection(acceptance_ratio(d, q, p), u[:, :-1])
    rows = torch.arange(d.shape[0], device=p.device)
    at = stop.clamp(max=d.shape[1] - 1)
    rejected = stop < d.shape[1]
    p[rows[rejected], stop[rejected], d[rows, at][rejected]] = 0.0
    if q is not None:
        p[rows[rejected], stop[rejected]] = (p[rows[rejected], stop[rejected]]
                                             - q[rows[rejected], at[rejected]]).clamp_(min=0.0)
    return emit(d, stop, inverse_cdf(p[rows, stop], u[:, -1:]))


@mutant("uniform degenerates to accept-all", "the uniforms are cast to the token dtype (int64): "
        "u = 0, so every draft with p(d) > 0 is accepted", "marginal", "acceptance")
def uniform_cast_to_int(d, q, p, g):
    return _sampler(d, q, p, g, accept_u=lambda u: u[:, :-1].to(d.dtype))


@mutant("greedy output not greedy decoding", "a fast path for one-hot targets accepts while the "
        "draft is the target's argmax, then emits the argmax of the *next* position", "greedy")
def greedy_fast_path_off_by_one(d, q, p, g):
    if not bool((p.amax(-1) == 1.0).all()):
        return _sampler(d, q, p, g)
    n = d.shape[1]
    argmax = p.argmax(-1)                                                  # [B, n+1]
    stop = torch.cumprod((d == argmax[:, :n]).to(torch.int64), 1).sum(1)
    nxt = argmax.gather(1, (stop + 1).clamp(max=n)[:, None])
    return emit(d, stop, nxt)


@mutant("-1 layout off by one", "after a rejection the recovered token is written one position "
        "late, leaving -1 where it belongs", "contract")
def layout_off_by_one(d, q, p, g):
    out = _sampler(d, q, p, g)
    n = d.shape[1]
    stop = torch.cumprod((out[:, :n] == d).to(torch.int64), 1).sum(1)
    late = (stop + 1).clamp(max=n)[:, None]
    shifted = out.scatter(1, late, out.gather(1, stop[:, None]))
    return torch.where((stop < n)[:, None], shifted.scatter(1, stop[:, None], -1), out)


@mutant("continuing after a rejection", "every position is decided on its own: a draft accepted "
        "after the first rejection is still emitted", "contract")
def continues_after_rejection(d, q, p, g):
    u = _uniforms(d, p, g)
    accept = u[:, :-1] < acceptance_ratio(d, q, p)
    stop = first_rejection(acceptance_ratio(d, q, p), u[:, :-1])
    out = emit(d, stop, inverse_cdf(drawn_law(d, q, p, stop), u[:, -1:]))
    late = accept & (torch.arange(d.shape[1], device=d.device)[None] > stop[:, None])
    return torch.cat([torch.where(late, d, out[:, :-1]), out[:, -1:]], 1)


@mutant("bonus drawn from the wrong position", "the bonus token is drawn from p_{n-1}, the last "
        "draft position's target, instead of p_n", "marginal", "distribution")
def bonus_from_previous_position(d, q, p, g):
    rows = torch.arange(d.shape[0], device=p.device)
    n = d.shape[1]

    def law(stop):
        real = drawn_law(d, q, p, stop)
        return torch.where((stop == n)[:, None], p[rows, n - 1], real)
    return _sampler(d, q, p, g, law=law)


@mutant("one uniform for two draws", "the uniform that rejected the draft is reused to draw the "
        "recovered token, so the residual draw leans to the top of its CDF", "marginal", "distribution")
def reused_uniform(d, q, p, g):
    n = d.shape[1]

    def draw_u(u, stop):
        reuse = u.gather(1, stop.clamp(max=n - 1)[:, None])
        return torch.where((stop < n)[:, None], reuse, u[:, -1:])
    return _sampler(d, q, p, g, draw_u=draw_u)


@_register(LEGAL_VARIANTS, "legal", "draws the token by an exponential race, argmax(law / E) with "
           "E ~ Exp(1) (vLLM's sampler), instead of an inverse CDF", "none")
def exponential_race(d, q, p, g):
    u = _uniforms(d, p, g)
    stop = first_rejection(acceptance_ratio(d, q, p), u[:, :-1])
    law = drawn_law(d, q, p, stop)
    race = law / torch.empty_like(law).exponential_(generator=g)
    return emit(d, stop, race.argmax(1, keepdim=True))


@mutant("CDF summed in bfloat16", "the inverse-CDF draw runs on a cumulative sum kept in bfloat16: "
        "the sum stalls in the tail, so the draw lands on a few hundred of the tail tokens", "tail",
        "tail")
def cdf_in_bfloat16(d, q, p, g):
    def law(stop):
        return drawn_law(d, q, p, stop).bfloat16().cumsum(1).float().diff(dim=1, prepend=torch.zeros_like(p[:, 0, :1]))
    return _sampler(d, q, p, g, law=law)


@mutant("positions tied together", "after an accepted first draft it emits, instead of verifying the "
        "second, a fresh target token drawn with the accepted draft's own randomized PIT as its uniform: "
        "each position keeps its law, the pair does not", "joint", "support")
def shared_uniform(d, q, p, g):
    if q is None or d.shape[1] < 1:
        return _sampler(d, q, p, g)
    u = _uniforms(d, p, g)
    rows = torch.arange(d.shape[0], device=p.device)
    stop = first_rejection(acceptance_ratio(d, q, p), u[:, :-1])
    kept = torch.minimum(p[:, 0], q[:, 0]).double()             # the law of an accepted first draft
    kept = kept / kept.sum(1, keepdim=True)
    below = kept.cumsum(1).gather(1, d[:, :1]) - kept.gather(1, d[:, :1])
    pit = below + u[:, -1:].double() * kept.gather(1, d[:, :1])
    tied = (stop >= 1)[:, None]
    one = torch.ones_like(stop)
    law = torch.where(tied, p[rows, 1].double(), drawn_law(d, q, p, stop).double())
    return emit(d, torch.where(tied[:, 0], one, stop), inverse_cdf(law, torch.where(tied, pit, u[:, -1:].double())))


@mutant("block verification without its residual weight", "block verification that keeps the first "
        "i drafts with probability w_i instead of r_i / (r_i + 1 - w_i): it keeps blocks whose weighted "
        "residual is empty and draws a token outside [0, V) there (seen at V = 2 since issue 34's joint "
        "case; the marginal test sees its law elsewhere)", "contract", "support")
def block_keep_by_weight(d, q, p, g):
    u = torch.rand((d.shape[0], d.shape[1] + 1), generator=g, device=p.device, dtype=torch.float64)
    w = block_weights(d, q, p)
    return block_emit(d, q, p, w, u[:, :-1] < w[:, 1:], u[:, -1:])


@mutant("block verification with the token residual", "block verification that draws the corrected "
        "token from max(0, p - q), the token-level residual, instead of max(0, w p - q): lossy, but only "
        "slightly (exactly lossless at V = 2, where every residual is one token; a total variation of 0 to "
        "0.012 at V = 3, n = 4): under the lossless law the quick plan at V <= 1025 passes it, and "
        "a V = 3, n = 6 block of 2**17 rows fails it (tests/ops/verify/test_verify_capped.py)", None, "acceptance")
def block_residual_unweighted(d, q, p, g):
    u = torch.rand((d.shape[0], d.shape[1] + 1), generator=g, device=p.device, dtype=torch.float64)
    w = block_weights(d, q, p)
    keep = u[:, :-1] < block_keep_probabilities(d, q, p, w)
    return block_emit(d, q, p, w, keep, u[:, -1:], weighted=False)
