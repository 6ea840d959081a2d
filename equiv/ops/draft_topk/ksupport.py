"""Which k a candidate accepts: what the default ``--k`` of the gate judges.

A kernel can be right at k = 1 and wrong at k >= 2 (a top-1 fast path that the general path
does not share, a sort network sized for 4). So the gate, unless ``--k`` names the k values,
judges every k of ``AUTO_KS`` that the candidate accepts.

Plan
----
- A candidate says which k it supports in one of two ways, read in this order:
  1. an attribute ``supported_k`` on the callable: an iterable of ints (``fn.supported_k =
     (1, 2, 4)``); a built-in path's ``max_k`` is read the same way (k <= max_k);
  2. raising ``NotImplementedError`` when called at a k it does not support. ``probe`` calls it
     once per k of ``AUTO_KS`` on a small input (``PROBE_RECIPE``, k columns of a [2, 64] float32
     Gaussian) in its worker.
  Any other outcome (an answer, right or wrong; another exception; a hang) counts as accepted,
  so the stages judge that k and a broken kernel fails there rather than being excused here.
- ``accepted(runner, ks, timeout)`` runs the probe through the candidate's runner and returns
  a ``KSupport``: the accepted ks in order and, for each refused k, why; a probe that ended
  abnormally (a hang, an exit) accepts every k and says how it ended (``problem``), which the
  gate reports as a failed check.
- An explicit ``--k`` is judged as asked: nothing is probed and a NotImplementedError is a
  failure like any raise.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from equiv.ops.draft_topk.recipes import Recipe
from equiv.options import AUTO_KS
PROBE_RECIPE = "gaussian:seed=0,batch=2,vocab=64,dtype=float32"


@dataclass(frozen=True)
class KSupport:
    """The ks the default ``--k`` judges (``accepted``) and why each other k is not (``refused``)."""

    accepted: tuple
    refused: dict = field(default_factory=dict)
    problem: str | None = None                   # how the probe ended when not normally
    kind: str | None = None                      # its ``CallOutcome.kind``

    def note(self) -> str:
        return "; ".join(f"k={k} not judged: {why}" for k, why in self.refused.items())

    def to_json(self) -> dict:
        return {"accepted": list(self.accepted), "refused": {str(k): w for k, w in self.refused.items()}}


def declared(fn):
    """The ks ``fn`` declares (``supported_k``, or a built-in path's ``max_k``) as a predicate, or None."""
    ks = getattr(fn, "supported_k", None)
    if ks is not None:
        try:
            allowed = {int(k) for k in ks}
        except (TypeError, ValueError):
            return None
        return lambda k: k in allowed
    max_k = getattr(fn, "max_k", None)
    if isinstance(max_k, int):
        return lambda k: k <= max_k
    return None


def probe(fn, device, payload) -> dict:
    """In the candidate's worker: {k: None (accepted) or why it is refused} (module docstring)."""
    says = declared(fn)
    out = {}
    for k in payload["ks"]:
        if says is not None:
            out[k] = None if says(k) else f"the candidate declares supported_k without k={k}"
            continue
        x = Recipe.parse(PROBE_RECIPE).build(device)
        try:
            fn(x, k)
        except NotImplementedError as exc:
            text = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else ""
            out[k] = "the candidate raised NotImplementedError" + (f" ({text})" if text else "")
        except Exception:                        # judged by the stages, not excused here
            out[k] = None
        else:
            out[k] = None
    return out


def accepted(runner, ks=AUTO_KS, timeout=None) -> KSupport:
    """``probe`` through ``runner``; an abnormal end accepts every k (the stages then judge it)."""
    out = runner.probe("equiv.ops.draft_topk.ksupport:probe", {"ks": tuple(ks)}, timeout=timeout)
    if not out.ok:
        return KSupport(tuple(ks), problem=out.problem, kind=out.kind)
    if not isinstance(out.value, dict):
        return KSupport(tuple(ks))
    refused = {k: why for k, why in out.value.items() if why}
    return KSupport(tuple(k for k in ks if k not in refused), refused)
