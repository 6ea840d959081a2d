"""The calling dimensions of any op's call: context, history, layout and generator, dealt per case.

An engine calls a kernel in ways a test that builds fresh inputs and calls once never does: under
``torch.inference_mode()`` or from a server's thread, on a static input buffer that a CUDA graph
rewrites in place each step, on views of a wider padded buffer, with one generator kept per
request. These are the same for every op (the design's "calling dimensions"): this module applies
them to an op's call; an op only declares its inputs and what "other contents of the same
geometry" are for it.

Plan
----
- Dimensions and classes (``DIMENSIONS``):
  * ``context``: ``equiv.run.context.CONTEXTS`` that the device offers, applied by ``call_in``;
  * ``history``: ``fresh`` (inputs built for the call), ``rewritten`` (the inputs first hold
    *other contents* of the same geometry, the candidate is called on them, then the case's
    contents are written into the SAME storage with ``t.copy_(new)``, which bumps ``t._version``,
    and the judged calls follow), ``rewritten (no version bump)`` (the same, written through
    ``t.data``: a tensor that shares the storage but not the version counter, as a kernel of
    another library writes an engine's buffer). What bumps ``t._version`` (torch 2.x, tested
    in tests/test_calling.py): ``t.copy_``, ``t.detach().copy_`` (``detach`` shares the
    counter), a ``copy_`` under ``torch.no_grad()`` or ``torch.inference_mode()``; what does
    not: ``t.data.copy_``, a write through ``t.numpy()`` (CPU) or through a second tensor
    ``set_`` on the same storage. A cache keyed by pointer and shape goes stale after either
    rewrite; one keyed by pointer, shape and version only after the second. Every output, the
    other contents' included, is copied right after its call and re-read after the last call:
    a candidate that hands out a static output buffer (as a captured graph does) changes it.
  * ``layout`` of every tensor input, on top of the guard bands (``equiv.run.guard.Guarded``):
    ``as built``; ``padded`` (rows at a stride rounded up past the last dimension to a multiple
    of 128, as an engine pads its vocabulary: a kernel that assumes dense strides reads the
    padding's canaries); ``offset`` (3 more elements of storage offset: a base that is not 16-byte
    aligned); ``sliced`` (the batch rows of a wider batch whose other rows hold the case's own
    rows in another order: plausible data, so a kernel that reads from the wrong row or from the
    storage's base reads a valid but wrong input).
  * ``generator``: ``fresh`` (a new ``torch.Generator`` seeded with the call's seed) or ``kept``
    (the previous call's generator, not re-seeded: an engine keeps one per request). Calls
    alternate: even calls fresh, odd calls kept, so every case of two calls or more has both
    and its calls ``(0, 1), (2, 3) ...`` (the pairs the independence tests compare) share a
    generator: a verifier that never advances the generator it is given (it restores its state,
    or draws from a private copy) repeats its output there.
- ``deal(key, calls, n_inputs, device)``: a case's ``Calling``, deterministic from ``key`` (an op
  derives it from the case's first generator seed, ``key_of``, so its REPRO replays the same
  classes). Each dimension's classes come in a seeded order, rotated by ``key``: cases of
  consecutive keys (a plan's cases) meet every class of a dimension within as many cases as it
  has classes. The contexts rotate over the calls of a case too; input ``i`` gets the layout
  ``key + i``; a rewritten history, which costs a call more, comes in half the cases (the
  history's order has ``fresh`` twice). The replay (the last call: the first seed again) runs in call 0's context with a
  fresh generator, so "same seed -> same output" still holds for every correct candidate.
  ``EQUIV_CALLING=plain`` in the environment deals the plain calling of before (caller's
  context, inputs as built, fresh generators, no history, outputs read after the last call):
  how the hostile tests show what the layer adds.
- ``run_calls(fn, built, names, seeds, output_problem, calling, relabel)``: the calls, stopping at
  the first problem: the candidate raised, ``output_problem(out)`` (the op's contract of the
  output), a guard band written, or a kept output changed; a problem names the call's classes.
  Returns ``(outputs, problem, cause)``, ``cause`` one of ``CAUSES``.
- ``Relabel(tokens, tables)``: what an op declares for other contents of the same geometry (its
  inputs of token ids and of probability tables over the vocabulary: ids shifted, tables rolled
  alike, written in place).
- ``dealt(rng, classes, n)``: classes for a run of calls in a seeded order (an op that deals per
  call from its own generator, as the draft op's history does); ``rewrite(guard, values, bump)``:
  an in-place rewrite of a guarded input, with or without a version bump.
- ``reach(dealt)``: for ``[(Calling, statistical)]`` the classes reached by statistical cases,
  by exact checks only, and not at all (the ``calling`` line of an op's coverage table).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from equiv.run.context import CONTEXTS, available, call_in
from equiv.run.guard import Guarded

HISTORIES = ("fresh", "rewritten", "rewritten (no version bump)")
LAYOUTS = ("as built", "padded", "offset", "sliced")
GENERATORS = ("fresh", "kept")
DIMENSIONS = {"context": CONTEXTS, "history": HISTORIES, "layout": LAYOUTS, "generator": GENERATORS}
CAUSES = ("raise", "output type", "input write", "output reused")
PAD_TO = 128                                     # padded rows: a multiple of this many elements
OFFSET = 3                                       # extra elements of storage offset (not 16 B aligned)
SLICED_BEFORE, SLICED_AFTER = 2, 3               # rows of the wider batch around the input's rows
_SALT = 0xCA11
_OTHER_SEED = 0x0DD5EED                          # the generator seed of the call on other contents
ENV = "EQUIV_CALLING"


def _order(dim: str, classes) -> tuple:
    """``classes`` in the seeded order of dimension ``dim`` (fixed: a plan rotates through it)."""
    rng = np.random.default_rng([_SALT, sum(map(ord, dim))])
    return tuple(classes[int(i)] for i in rng.permutation(len(classes)))


def dealt(rng, classes, n: int) -> list:
    """``n`` classes for ``n`` calls: ``classes`` in an order drawn from ``rng`` (a NumPy generator),
    then again, so that every class occurs once ``n`` reaches their number (the draft op's
    contexts of its history, space.py)."""
    order = [classes[int(i)] for i in rng.permutation(len(classes))]
    return [order[i % len(order)] for i in range(n)]


def key_of(seed: int, unit: int) -> int:
    """A case's deal key from its first generator seed, for a plan that spaces its cases' seeds
    ``unit`` apart (and numbers the calls or parts of one case below ``unit``)."""
    seed = int(seed)
    return seed // unit + seed % unit


@dataclass(frozen=True)
class Calling:
    """One case's classes: ``contexts`` and ``generators`` per call (the judged calls, then the
    replay), the ``history`` of the case, the ``layouts`` of its inputs in order; ``reread``:
    outputs copied right after their call and re-read after the last (else read at the end)."""

    contexts: tuple
    generators: tuple
    history: str
    layouts: tuple
    reread: bool = True

    @classmethod
    def plain(cls, calls: int, n_inputs: int) -> "Calling":
        """The calling of before: the caller's context, fresh generators, inputs as built, every
        output read after the last call."""
        return cls((None,) * calls, ("fresh",) * calls, "fresh", ("as built",) * n_inputs, reread=False)

    def classes(self) -> dict:
        """``{dimension: set of classes}`` this case reaches (``None`` contexts: none)."""
        return {"context": {c for c in self.contexts if c}, "history": {self.history},
                "layout": set(self.layouts), "generator": set(self.generators)}

    def describe(self, call: int, names=()) -> str:
        """The classes of call ``call`` (0-based), in words, for a problem line."""
        ctx = self.contexts[call] if call < len(self.contexts) else None
        gen = self.generators[call] if call < len(self.generators) else "fresh"
        parts = [f"call {call + 1}" + (f" under {ctx}" if ctx else ""), f"{gen} generator"]
        if self.history != "fresh":
            parts.append(f"inputs {self.history} in place")
        shaped = [f"{n} {lay}" for n, lay in zip(names, self.layouts) if lay != "as built"]
        if shaped:
            parts.append("layout: " + ", ".join(shaped))
        return "; ".join(parts)


def deal(key: int, calls: int, n_inputs: int, device="cpu") -> Calling:
    """The classes of the case of deal ``key`` with ``calls`` calls (the replay included) and
    ``n_inputs`` inputs (module docstring)."""
    if os.environ.get(ENV) == "plain":
        return Calling.plain(calls, n_inputs)
    key, judged = int(key), max(calls - 1, 1)   # the last call is the replay (when there are two)
    contexts = _order("context", available(device))
    ctx = tuple(contexts[(key + j) % len(contexts)] for j in range(judged))
    gens = tuple("kept" if j % 2 else "fresh" for j in range(judged))
    if calls > 1:                                # the replay: call 0's context, a fresh generator
        ctx, gens = ctx + ctx[:1], gens + ("fresh",)
    # a rewritten history costs one more call (on the other contents): half the cases are fresh
    histories, layouts = _order("history", HISTORIES[:1] + HISTORIES), _order("layout", LAYOUTS)
    return Calling(ctx, gens, histories[key % len(histories)],
                   tuple(layouts[(key + i) % len(layouts)] for i in range(n_inputs)))


# ---- layout ---------------------------------------------------------------------------------------

def _row_stride(t) -> int:
    last = t.shape[-1]
    return int(t.stride(-2)) if t.dim() >= 2 and t.stride(-1) == 1 and t.stride(-2) > last else last


def lay_out(t, name: str, layout: str) -> Guarded:
    """``t`` copied into its guard band in ``layout`` (module docstring); ``.tensor`` is the input."""
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch                                 # lazy: as above

    if t.dim() < 2 or layout == "as built":
        return Guarded(t, name)
    if layout == "padded":
        return Guarded(t, name, stride=(max(_row_stride(t), t.shape[-1]) // PAD_TO + 1) * PAD_TO)
    if layout == "offset":
        return Guarded(t, name, offset=t.storage_offset() + OFFSET)
    if layout == "sliced" and t.shape[0]:
        # the wider batch is laid out from a broadcast row (no second copy of a large input), its
        # rows then written in place: the input's, and its rows 1, 2 before and its last 3 after
        b, k = t.shape[0], SLICED_BEFORE
        g = Guarded(t[:1].expand(b + k + SLICED_AFTER, *t.shape[1:]), name, stride=_row_stride(t))
        wide = g.tensor
        wide[k:k + b].copy_(t)
        wide[:k].copy_(t[torch.arange(1, k + 1, device=t.device) % b])
        wide[k + b:].copy_(t[torch.arange(b - SLICED_AFTER, b, device=t.device) % b])
        g.snapshot.copy_(g.buffer)
        g.tensor = wide[k:k + b]
        return g
    if layout == "sliced":
        return Guarded(t, name)
    raise ValueError(f"layout={layout!r} is invalid: give one of {', '.join(LAYOUTS)}")


def rewrite(guard: Guarded, values, *, bump: bool = True, snapshot: bool = True) -> None:
    """Write ``values`` into ``guard.tensor`` in place (``copy_``: its version counter bumps; with
    ``bump=False`` through ``.data``, which shares the storage and not the counter) and take the
    guard's new snapshot (``snapshot=False``: the values are those of the snapshot already)."""
    (guard.tensor if bump else guard.tensor.data).copy_(values)
    if snapshot:
        guard.snapshot = guard.buffer.clone()


@dataclass(frozen=True)
class Relabel:
    """What an op declares of its inputs for other contents of the same geometry: which inputs
    hold token ids (``tokens``) and which probability tables over the vocabulary (``tables``, V
    their last dimension). ``write`` puts the same law under other token names into the laid-out
    inputs, in place: ids ``>= 0`` shifted by ``s`` modulo V, tables rolled by ``s`` along V (two
    strided copies, no temporary): legal wherever the original is."""

    tokens: tuple = ()
    tables: tuple = ()

    def write(self, dests, built, *, bump: bool) -> None:
        # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
        import torch                             # lazy: as above

        present = [built[i] for i in self.tables if built[i] is not None]
        vocab = int(present[0].shape[-1]) if present else 1
        shift = max(1, vocab // 3) % max(vocab, 1)
        for i in self.tables:
            if built[i] is not None and shift:
                dest = dests[i] if bump else dests[i].data
                dest[..., shift:].copy_(built[i][..., :vocab - shift])
                dest[..., :shift].copy_(built[i][..., vocab - shift:])
        for i in self.tokens:
            if built[i] is not None:
                t = built[i]
                (dests[i] if bump else dests[i].data).copy_(torch.where(t >= 0, (t + shift) % max(vocab, 1), t))


# ---- the calls ------------------------------------------------------------------------------------

def exception_line(exc: BaseException) -> str:
    """``raised TYPE: first line of the message`` (200 characters at most): a candidate's own
    failure as one line of a verdict, never a traceback."""
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"raised {type(exc).__name__}" + (f": {text}" if text else "")


def _tensors(out) -> list:
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch                                 # lazy: as above

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for t in out if isinstance(t, torch.Tensor)]
    return []


def _copy(out):
    """``out`` (a tensor or a tuple of them) copied now: what the call returned, as it was."""
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch                                 # lazy: as above

    with torch._C.DisableTorchFunction():        # a subclass may not fake its copy
        if isinstance(out, torch.Tensor):
            return out.detach().clone()
        return type(out)(t.detach().clone() if isinstance(t, torch.Tensor) else t for t in out)


def _changed(live, copy) -> bool:
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch                                 # lazy: as above

    with torch._C.DisableTorchFunction():
        return any(a.shape != b.shape or not torch.equal(a, b) for a, b in zip(_tensors(live), _tensors(copy)))


def run_calls(fn, built, names, seeds, output_problem, calling: Calling | None = None, *,
              relabel: Relabel | None = None, device=None, guarded: bool = True):
    """The calls of the module docstring: ``(outputs, problem or None, cause or None)``.
    ``relabel``: how the op's inputs take other contents (for the rewritten histories; without
    it those run as ``fresh``); ``device``: where generators live (default: the last input's);
    ``guarded=False``: the inputs as built, no guard bands, no history (our own samplers in a
    calibration: speed). In a rewritten history the case's contents are laid out first (the
    guards' snapshot), the other contents written over them in place, the candidate called once,
    and the case's contents written back (bit for bit the snapshot again): a write of that call
    into a guard band shows at the first judged call."""
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch                                 # lazy: as above

    if calling is None or not guarded:
        calling = Calling.plain(len(seeds), len(built))
    layouts = calling.layouts + ("as built",) * len(built)
    guards = [None if t is None else lay_out(t, name, lay)
              for t, name, lay in zip(built, names, layouts)] if guarded else []
    args = [None if g is None else g.tensor for g in guards] if guarded else list(built)
    dev = torch.device(device) if device is not None else next(a for a in reversed(args) if a is not None).device
    kept, gen = [], None                         # (live output, its copy, what it was)

    def one(j, seed, what, check=True):
        nonlocal gen
        if gen is None or calling.generators[min(j, len(calling.generators) - 1)] != "kept":
            gen = torch.Generator(device=dev).manual_seed(int(seed))
        context = calling.contexts[min(j, len(calling.contexts) - 1)]
        try:
            out = call_in(context, fn, (*args, gen), dev)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
        except Exception as exc:                 # the candidate's own failure is a verdict
            return None, f"{exception_line(exc)} [{what}]", "raise"
        problem = output_problem(out)
        if problem:
            return None, f"{problem} [{what}]", "output type"
        written = next((p for p in (g.problem("during the call") for g in guards if g is not None) if p),
                       None) if check else None
        if written:
            return None, f"{written} [{what}]", "input write"
        if not calling.reread:
            return out, None, None
        kept.append((out, _copy(out), what))
        return kept[-1][1], None, None

    if guarded and calling.history != "fresh" and relabel is not None:
        bump = calling.history == "rewritten"
        relabel.write(args, built, bump=bump)
        _, problem, cause = one(0, int(seeds[0]) ^ _OTHER_SEED, f"the call on other contents before the "
                                f"rewrite; {calling.describe(0, names)}", check=False)
        if problem:
            return [], problem, cause
        for g, t in zip(guards, built):
            if g is not None:
                rewrite(g, t, bump=bump, snapshot=False)
        gen = None                               # the judged calls start from their own seed
    outs = []
    for j, seed in enumerate(seeds):
        copy, problem, cause = one(j, seed, calling.describe(j, names))
        if problem:
            return outs, problem, cause
        outs.append(copy)
    for n, (live, copy, what) in enumerate(kept):
        if _changed(live, copy):
            return outs, (f"changed the output it returned after later calls ({what}; output {n + 1} of "
                          f"{len(kept)} re-read after the last call): it hands out a buffer it reuses"), "output reused"
    return outs, None, None


# ---- coverage -------------------------------------------------------------------------------------

def reach(dealt, device="cpu") -> str:
    """The ``calling`` line of an op's coverage: ``dealt`` is ``[(Calling, statistical)]`` of the
    cases a run called (statistical: their outputs fed a statistical test); each class of each
    dimension is reached by statistical cases, by exact checks only, or not at all (``side_stream``
    off a GPU: not offered)."""
    stat: dict = {d: set() for d in DIMENSIONS}
    exact: dict = {d: set() for d in DIMENSIONS}
    for calling, statistical in dealt:
        for dim, got in calling.classes().items():
            (stat if statistical else exact)[dim].update(got)
    offered = {**DIMENSIONS, "context": available(device)}

    def listed(pick) -> str:
        return "; ".join(f"{d} {', '.join(c for c in classes if c in pick[d])}"
                         for d, classes in DIMENSIONS.items() if any(c in pick[d] for c in classes)) or "none"
    only = {d: exact[d] - stat[d] for d in DIMENSIONS}
    missed = {d: {c for c in offered[d] if c not in stat[d] | exact[d]} for d in DIMENSIONS}
    not_offered = [c for c in CONTEXTS if c not in offered["context"]]
    return (f"statistical: {listed(stat)} | exact checks only: {listed(only)} | not reached: {listed(missed)}"
            + (f" (not offered on {device}: {', '.join(not_offered)})" if not_offered else ""))
