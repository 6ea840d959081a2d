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
- The live half, in ``equiv.run.seeded`` (it imports torch; this module is read by the gate
  plans without it): ``run_calls(fn, built, names, seeds, output_problem, calling, relabel)``: the calls, stopping at
  the first problem: the candidate raised, ``output_problem(out)`` (the op's contract of the
  output), a guard band written, or a kept output changed; a problem names the call's classes.
  Returns ``(outputs, problem, cause)``, ``cause`` one of ``CAUSES``.
- ``Relabel(tokens, tables)``: what an op declares for other contents of the same geometry (its
  inputs of token ids and of probability tables over the vocabulary: ids shifted, tables rolled
  alike, written in place).
- ``dealt(rng, classes, n)``: classes for a run of calls in a seeded order (an op that deals per
  call from its own generator, as the draft op's history does); ``rewrite(guard, values, bump)``
  (``equiv.run.seeded``): an in-place rewrite of a guarded input, with or without a version bump.
- *Batch classes 1 and 2-4* (``last_rows_apart``): a call of ``SPLIT_FROM`` rows or more is
  sent as three: its rows but the last 3-5, then 2-4 rows (by the case's first seed), then the
  last row alone, each built as in the whole batch (the rest first: the independence tests pair
  rows 2i and 2i+1 of a call, and a split before them shifted the pairs of a verifier that
  shares uniforms between those rows, which then passed), window ``j`` with the generator seed ``s + j *
  WINDOW_SEED_STRIDE``, the outputs joined. Engines run batches of one at low load (and a
  batch of one is where ``.squeeze()`` drops the batch axis); the plans' batches are larger.
  The exact checks see those calls; their rows join the case's statistics with no power of
  their own, so a coverage table lists the classes under "exact checks only".
- ``reach(dealt)``: for ``[(Calling, statistical)]`` the classes reached by statistical cases,
  by exact checks only, and not at all (the ``calling`` line of an op's coverage table).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from equiv.memory import row_windows, rows_per_call
from equiv.run.context import CONTEXTS, available

HISTORIES = ("fresh", "rewritten", "rewritten (no version bump)")
LAYOUTS = ("as built", "padded", "offset", "sliced")
GENERATORS = ("fresh", "kept")
DIMENSIONS = {"context": CONTEXTS, "history": HISTORIES, "layout": LAYOUTS, "generator": GENERATORS}
CAUSES = ("raise", "output type", "input write", "output reused")
PAD_TO = 128                                     # padded rows: a multiple of this many elements
OFFSET = 3                                       # extra elements of storage offset (not 16 B aligned)
SLICED_BEFORE, SLICED_AFTER = 2, 3               # rows of the wider batch around the input's rows
_SALT = 0xCA11
OTHER_SEED = 0x0DD5EED                          # the generator seed of the call on other contents
ENV = "EQUIV_CALLING"
SPLIT_FROM = 8                                   # a call of this many rows or more sends its last rows apart
# The generator seeds of a call's windows of rows: s, s + 2**20, ... A plan's seeds span less than
# 2**20, and the stride stays within 32 bits: torch's CPU generator keeps only a seed's low 32 bits,
# so a stride of 2**40 gave every window the same draws (the chain's tail test then failed
# torch_sampler: 65 tail tokens drawn twice where 1.8 were allowed).
WINDOW_SEED_STRIDE = 2 ** 20


def window_seed(seed: int, window: int) -> int:
    """The generator seed of window ``window`` of a call seeded ``seed`` (module docstring)."""
    return int(seed) + int(window) * WINDOW_SEED_STRIDE


def last_rows_apart(start: int, stop: int, seed: int) -> list:
    """``[(start, stop)]``, or for ``SPLIT_FROM`` rows or more its rows but the last ``3 + seed %
    3``, then ``2 + seed % 3`` rows, then the last row alone (module docstring)."""
    if stop - start < SPLIT_FROM:
        return [(start, stop)]
    few = 2 + int(seed) % 3
    return [(start, stop - 1 - few), (stop - 1 - few, stop - 1), (stop - 1, stop)]


def budget_windows(batch: int, bytes_per_row: int, seed: int, device) -> list:
    """``[(start, stop), ...]``: ``batch`` rows in the fewest balanced windows under the memory
    budget (``equiv.memory.rows_per_call`` of ``bytes_per_row``), the first window's last rows
    apart (``last_rows_apart`` by ``seed``): the calls of a verifier op's recipe."""
    windows = row_windows(batch, rows_per_call(bytes_per_row, device))
    return last_rows_apart(*windows[0], seed) + windows[1:]


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
