"""Verifiers wrong in one calling dimension only (issue 43's hostile round), written from scratch.

Each is a correct verifier -- ``torch_sampler`` for the chain, ``target_only`` for the tree (topk
drafts) -- with one defect that shows only in one way of calling it; called once on fresh inputs
from the main thread with a fresh generator, each is exactly correct, so a gate that calls every
op as it used to passes all of them (tests/ops/verify/test_verify_calling.py and
tests/ops/verify_tree/test_verify_tree_calling.py hold the before / after):

- ``*_cache_by_pointer``: keeps the target it read, keyed by data pointer, shape and strides (a
  static buffer rewritten each step, as CUDA graphs do): stale after an in-place rewrite;
- ``*_cache_by_version``: the same, keyed also by ``target_probs._version``: right after a rewrite
  with ``copy_``, stale after one that leaves the version counter as it was;
- ``*_static_output``: returns a view of one output buffer per shape, rewritten by the next call;
- ``*_lossy_under_inference_mode`` / ``*_lossy_under_no_grad``: a fast path taken when
  ``torch.is_inference_mode_enabled()`` (resp. grad is off) draws the token after a rejection
  from the target row itself, the rejected draft(s) not removed: lossy;
- ``*_lossy_on_side_thread``: a thread-local switch set at import (in the importing thread);
  another thread takes the same lossy fallback;
- ``*_dense_strides``: reads ``target_probs`` as if its rows were dense (a kernel handed a padded
  vocabulary);
- ``*_ignores_storage_offset``: reads ``target_probs`` from the base of its storage;
- ``*_restores_generator``: puts the generator's state back after drawing (it never advances the
  generator it is given: with one generator kept per request, every step draws the same coins).
"""
from __future__ import annotations

import math
import threading

import torch

from equiv.ops.verify.paths import (acceptance_ratio, drawn_law, emit, first_rejection, inverse_cdf,
                                    torch_sampler)
from equiv.ops.verify_tree.paths import _sample, _walk, target_only, target_only_rule

_LOCAL = threading.local()
_LOCAL.exact = True                              # set in the importing thread only
_CACHE: dict = {}
_OUT: dict = {}


# ---- the lossy rule that a calling dimension switches on --------------------------------------------

def _chain_lossy(d, q, p, gen):
    """torch_sampler, but the token after a rejection is drawn from ``p`` with only the draft zeroed
    (the draft taken as one-hot): lossy wherever ``q`` is not one-hot."""
    u = torch.rand((d.shape[0], d.shape[1] + 1), generator=gen, device=p.device)
    stop = first_rejection(acceptance_ratio(d, q, p), u[:, :-1])
    return emit(d, stop, inverse_cdf(drawn_law(d, None, p, stop), u[:, -1:]))


def _tree_lossy(parents, tokens, q, p, gen):
    """target_only, but the token after the children were tried is drawn from the whole target
    row: the rejected children keep their mass (lossy)."""
    def draw(s, kid_tok, valid, stop):
        return _sample(s["p"], gen)
    return _walk(parents, tokens, None, p, gen, target_only_rule(gen), draw)


def _tree(fn):
    fn.drafts = "topk"
    return fn


# ---- chain ----------------------------------------------------------------------------------------

def _cached(p, with_version: bool):
    key = (p.data_ptr(), tuple(p.shape), p.stride()) + ((p._version,) if with_version else ())
    if key not in _CACHE:
        if len(_CACHE) > 4:
            _CACHE.clear()
        _CACHE[key] = p.clone()
    return _CACHE[key]


def chain_cache_by_pointer(d, q, p, gen):
    return torch_sampler(d, q, _cached(p, False), gen)


def chain_cache_by_version(d, q, p, gen):
    return torch_sampler(d, q, _cached(p, True), gen)


def chain_static_output(d, q, p, gen):
    out = torch_sampler(d, q, p, gen)
    buf = _OUT.setdefault(("chain", tuple(out.shape), out.device), torch.empty_like(out))
    return buf.copy_(out)


def chain_lossy_under_inference_mode(d, q, p, gen):
    return (_chain_lossy if torch.is_inference_mode_enabled() else torch_sampler)(d, q, p, gen)


def chain_lossy_under_no_grad(d, q, p, gen):
    return (torch_sampler if torch.is_grad_enabled() else _chain_lossy)(d, q, p, gen)


def chain_lossy_on_side_thread(d, q, p, gen):
    return (torch_sampler if getattr(_LOCAL, "exact", False) else _chain_lossy)(d, q, p, gen)


def _dense(t):
    stride = tuple(math.prod(t.shape[i + 1:]) for i in range(t.dim()))
    return torch.as_strided(t, t.shape, stride, t.storage_offset())


def chain_dense_strides(d, q, p, gen):
    return torch_sampler(d, q, _dense(p), gen)


def chain_ignores_storage_offset(d, q, p, gen):
    return torch_sampler(d, q, torch.as_strided(p, p.shape, p.stride(), 0), gen)


def chain_restores_generator(d, q, p, gen):
    state = gen.get_state()
    out = torch_sampler(d, q, p, gen)
    gen.set_state(state)
    return out


# ---- tree -----------------------------------------------------------------------------------------

@_tree
def tree_cache_by_pointer(parents, tokens, q, p, gen):
    return target_only(parents, tokens, q, _cached(p, False), gen)


@_tree
def tree_cache_by_version(parents, tokens, q, p, gen):
    return target_only(parents, tokens, q, _cached(p, True), gen)


@_tree
def tree_static_output(parents, tokens, q, p, gen):
    path, out = target_only(parents, tokens, q, p, gen)
    bufs = _OUT.setdefault(("tree", tuple(out.shape), out.device), (torch.empty_like(path), torch.empty_like(out)))
    return bufs[0].copy_(path), bufs[1].copy_(out)


@_tree
def tree_lossy_under_inference_mode(parents, tokens, q, p, gen):
    return (_tree_lossy if torch.is_inference_mode_enabled() else target_only)(parents, tokens, q, p, gen)


@_tree
def tree_lossy_under_no_grad(parents, tokens, q, p, gen):
    return (target_only if torch.is_grad_enabled() else _tree_lossy)(parents, tokens, q, p, gen)


@_tree
def tree_lossy_on_side_thread(parents, tokens, q, p, gen):
    return (target_only if getattr(_LOCAL, "exact", False) else _tree_lossy)(parents, tokens, q, p, gen)


@_tree
def tree_dense_strides(parents, tokens, q, p, gen):
    return target_only(parents, tokens, q, _dense(p), gen)


@_tree
def tree_ignores_storage_offset(parents, tokens, q, p, gen):
    return target_only(parents, tokens, q, torch.as_strided(p, p.shape, p.stride(), 0), gen)


@_tree
def tree_restores_generator(parents, tokens, q, p, gen):
    state = gen.get_state()
    out = target_only(parents, tokens, q, p, gen)
    gen.set_state(state)
    return out


CHAIN = tuple(n for n in dir() if n.startswith("chain_"))
TREE = tuple(n for n in dir() if n.startswith("tree_"))


# ---- the round, as both ops' tests run it ---------------------------------------------------------

BEFORE_FAILS = ("ignores_storage_offset",    # the guard band before every input was there before
                "static_output")             # read after the last call, calls 0 and 1 were equal
AFTER_CAUSES = {"static_output": {"output reused"}, "restores_generator": {"shared randomness between calls"}}


def needs(prefix: str, target: int) -> dict:
    """What each hostile of ``prefix`` (``chain``, ``tree``) needs of its statistical case's
    calling (it fails either way where it is True); ``target``: where the target probabilities
    stand among the op's inputs."""
    return {
        f"{prefix}_cache_by_pointer": lambda c: c.history != "fresh",
        f"{prefix}_cache_by_version": lambda c: c.history == "rewritten (no version bump)",
        f"{prefix}_static_output": lambda c: True,
        f"{prefix}_lossy_under_inference_mode": lambda c: c.contexts[0] == "inference_mode",
        f"{prefix}_lossy_under_no_grad": lambda c: c.contexts[0] == "no_grad",
        f"{prefix}_lossy_on_side_thread": lambda c: c.contexts[0] == "thread",
        f"{prefix}_dense_strides": lambda c: c.layouts[target] == "padded",
        f"{prefix}_ignores_storage_offset": lambda c: True,
        f"{prefix}_restores_generator": lambda c: True,   # the independence case's calls (0, 1) share one
    }


def judged_both_ways(judge, cases, monkeypatch) -> tuple:
    """``(after, before)``: ``judge(cases)`` with the calling layer, then with ``EQUIV_CALLING=plain``
    (the plain calling of before), caches and static buffers emptied before each."""
    out = []
    for plain in (False, True):
        _CACHE.clear()
        _OUT.clear()
        if plain:
            monkeypatch.setenv("EQUIV_CALLING", "plain")
        else:
            monkeypatch.delenv("EQUIV_CALLING", raising=False)
        out.append(judge(cases))
    return tuple(out)


def check_round(name: str, judge, cases, monkeypatch) -> None:
    """``name`` fails with the layer (for the causes ``AFTER_CAUSES`` says, where it says) and
    passed before unless ``BEFORE_FAILS`` says otherwise: ``judge(cases)`` both ways
    (``judged_both_ways``)."""
    after, before = judged_both_ways(judge, cases, monkeypatch)
    kind = name.split("_", 1)[1]
    assert not after.passed, after.summary()
    if kind in AFTER_CAUSES:
        assert {c.evidence["cause"] for c in after.failed} == AFTER_CAUSES[kind], after.summary()
    assert before.passed is (kind not in BEFORE_FAILS), before.summary()
