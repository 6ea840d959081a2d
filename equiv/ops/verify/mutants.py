"""The verifier mutant zoo: rejection samplers with one realistic bug each, which the judge must fail.

Each mutant is the built-in ``torch_sampler`` (``equiv.ops.verify.paths``) with one step
replaced by the bug, so it differs from a correct verifier in exactly one way. Each is a module
attribute and loads as the spec ``equiv.ops.verify.mutants:NAME``; ``MUTANTS`` maps the name to
a ``VerifierMutant`` (name, bug class, description, the check expected to catch it).
``LEGAL_VARIANTS`` sample the same law another way (an exponential race, as vLLM's sampler
does); the judge must pass them.

``tests/test_verify_mutants.py`` runs the quick gate on every mutant and variant; docs/verify.md
has the kill table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from equiv.ops.verify.paths import acceptance_ratio, drawn_law, emit, first_rejection, inverse_cdf


@dataclass(frozen=True)
class VerifierMutant:
    name: str
    bug_class: str
    description: str
    caught_by: str
    fn: Callable = None

    def __call__(self, draft_token_ids, draft_probs, target_probs, generator):
        return self.fn(draft_token_ids, draft_probs, target_probs, generator)


MUTANTS: dict[str, VerifierMutant] = {}
LEGAL_VARIANTS: dict[str, VerifierMutant] = {}


def _register(table, bug_class, description, caught_by):
    def wrap(fn):
        m = VerifierMutant(fn.__name__, bug_class, description, caught_by, fn)
        table[m.name] = m
        return m
    return wrap


def mutant(bug_class: str, description: str, caught_by: str):
    return _register(MUTANTS, bug_class, description, caught_by)


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
        "acceptance")
def ratio_in_float16(d, q, p, g):
    p_d = p[:, : d.shape[1]].gather(2, d[..., None])[..., 0].half()
    q_d = torch.ones_like(p_d) if q is None else q.gather(2, d[..., None])[..., 0].half()
    return _sampler(d, q, p, g, ratio=(p_d / q_d).clamp(max=1.0).float())


@mutant("q the draft was not sampled from", "ignores draft_probs and treats every draft as one-hot "
        "(accept with p(d), resample from p without d)", "acceptance")
def ignores_draft_probs(d, q, p, g):
    return _sampler(d, None, p, g)


@mutant("residual is not max(0, p - q)", "the recovered token is drawn from the target p itself",
        "support")
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
        "u = 0, so every draft with p(d) > 0 is accepted", "acceptance")
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
        "draft position's target, instead of p_n", "distribution")
def bonus_from_previous_position(d, q, p, g):
    rows = torch.arange(d.shape[0], device=p.device)
    n = d.shape[1]

    def law(stop):
        real = drawn_law(d, q, p, stop)
        return torch.where((stop == n)[:, None], p[rows, n - 1], real)
    return _sampler(d, q, p, g, law=law)


@mutant("one uniform for two draws", "the uniform that rejected the draft is reused to draw the "
        "recovered token, so the residual draw leans to the top of its CDF", "distribution")
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
