"""The live half of the calling layer (``equiv.run.calling`` deals the classes; this module
applies them to live tensors, in the process that calls the candidate): one sampler, called once
per generator seed on inputs in guard bands, the loop both verifier ops' probes run (the chain
and the tree verifier's probes).

Plan. ``seeded_calls(fn, built, names, seeds, output_problem, guarded, calling, relabel)`` calls
``fn(*inputs, generator)`` once per seed (``run_calls``): each input in a guard band
(``equiv.run.guard.Guarded``: the one rule for "modified its input") laid out as ``calling``
deals it (``lay_out``), each call in its context with a fresh or a kept generator, after a call
on other contents written over them in place (``relabel``, a ``Relabel``) when the case's history
asks for it (``calling`` None: the plain calling, fresh generators on inputs as built).
``guarded`` off skips all of it (our own samplers, in calibration: speed). It stops at the first
problem: what the call raised (``exception_line``), what ``output_problem(out)`` finds in its
output, a guard band written, or an output changed by a later call. Returns ``(outputs, problem,
cause)``, ``cause`` the data the diagnosis reads: ``"raise"``, ``"output type"``, ``"input
write"`` or ``"output reused"``. ``rewrite(guard, values, bump)`` writes a guarded input in
place (the draft op's history); ``call_in(context, fn, args, device)`` calls ``fn(*args)`` in a
calling context; ``int64_problem`` is the verifiers' output check (``equiv.run.context`` names them); ``Rotating`` is ``fn`` for a probe that calls a candidate in a loop
(the MTP decoder), each call in its context and its input in a guard band. Torch is imported at the top: this module runs where the
candidate is called (the worker, or in-process for our own paths), never at a command's start.
"""
from __future__ import annotations

import queue
import threading
from dataclasses import dataclass

import torch

from equiv.run.calling import LAYOUTS, OFFSET, PAD_TO, SLICED_AFTER, SLICED_BEFORE, OTHER_SEED, Calling
from equiv.errors import InvalidArgument
from equiv.run.context import CONTEXTS
from equiv.run.guard import Guarded, first_problem, write_input
from equiv.run.table_rows import TableRows

__all__ = ["InputWritten", "Relabel", "Rotating", "call_in", "exception_line", "lay_out", "rewrite", "run_calls",
           "seeded_calls"]


# ---- the calling context ---------------------------------------------------------------------------

class _Thread:
    """One long-lived thread other than the main one; ``run(fn, args)`` calls there and waits."""

    def __init__(self):
        self.jobs: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._serve, name="equiv-caller", daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            fn, args, reply = self.jobs.get()
            try:
                reply.put((True, fn(*args)))
            except BaseException as exc:         # noqa: B036 - handed to the caller's thread
                reply.put((False, exc))

    def run(self, fn, args):
        reply: queue.Queue = queue.Queue(maxsize=1)
        self.jobs.put((fn, args, reply))
        ok, value = reply.get()
        if not ok:
            raise value
        return value


_THREAD: _Thread | None = None
_LOCK = threading.Lock()


def _caller_thread() -> _Thread:
    global _THREAD
    with _LOCK:
        if _THREAD is None:
            _THREAD = _Thread()
        return _THREAD


def call_in(context, fn, args, device="cpu"):
    """``fn(*args)`` in ``context`` (module docstring); ``None``: as the caller is."""
    if context is None:
        return fn(*args)
    if context == "grad":
        with torch.inference_mode(False), torch.enable_grad():
            return fn(*args)
    if context == "no_grad":
        with torch.inference_mode(False), torch.no_grad():
            return fn(*args)
    if context == "inference_mode":
        with torch.inference_mode():
            return fn(*args)
    if context == "thread":
        return _caller_thread().run(fn, args)
    if context == "side_stream":
        main = torch.cuda.current_stream(device)
        side = torch.cuda.Stream(device)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            out = fn(*args)
        main.wait_stream(side)
        return out
    raise InvalidArgument(f"context={context!r} is invalid: give one of {', '.join(CONTEXTS)}")


# ---- layout ---------------------------------------------------------------------------------------

def _row_stride(t) -> int:
    last = t.shape[-1]
    return int(t.stride(-2)) if t.dim() >= 2 and t.stride(-1) == 1 and t.stride(-2) > last else last


def lay_out(t, name: str, layout: str) -> Guarded:
    """``t`` copied into its guard band in ``layout`` (module docstring); ``.tensor`` is the input."""
    if t.dim() < 2 or layout == "as built":
        return Guarded(t, name)
    if layout == "padded":
        return Guarded(t, name, stride=(max(_row_stride(t), t.shape[-1]) // PAD_TO + 1) * PAD_TO)
    if layout == "offset":
        return Guarded(t, name, offset=t.storage_offset() + OFFSET)
    if layout == "sliced" and isinstance(t, TableRows):
        t = t.materialize()                      # its rows are written around it: made whole
    if layout == "sliced" and t.shape[0]:
        # the wider batch is laid out from a broadcast row (no second copy of a large input), its
        # rows then written in place: the input's, and its rows 1, 2 before and its last 3 after
        b, k = t.shape[0], SLICED_BEFORE
        g = Guarded(t[:1].expand(b + k + SLICED_AFTER, *t.shape[1:]), name, stride=_row_stride(t))
        wide = g.tensor
        wide[k:k + b].copy_(t)
        wide[:k].copy_(t[torch.arange(1, k + 1, device=t.device) % b])
        wide[k + b:].copy_(t[torch.arange(b - SLICED_AFTER, b, device=t.device) % b])
        g.retake()
        g.tensor = wide[k:k + b]
        return g
    if layout == "sliced":
        return Guarded(t, name)
    raise ValueError(f"layout={layout!r} is invalid: give one of {', '.join(LAYOUTS)}")


def rewrite(guard: Guarded, values, *, bump: bool = True, snapshot: bool = True) -> None:
    """Write ``values`` into ``guard.tensor`` in place (``copy_``: its version counter bumps; with
    ``bump=False`` through ``.data``, which shares the storage and not the counter) and take the
    guard's new snapshot (``snapshot=False``: the values are those of the snapshot already)."""
    write_input(guard.tensor if bump else guard.tensor.data, values)     # the rows alone: a write
    if snapshot:                                                          # into the bands stays seen
        guard.retake()


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
        present = [built[i] for i in self.tables if built[i] is not None]
        vocab = int(present[0].shape[-1]) if present else 1
        shift = max(1, vocab // 3) % max(vocab, 1)
        for i in self.tables:
            if built[i] is not None and shift:
                dest = dests[i] if bump else dests[i].data
                if isinstance(built[i], TableRows):
                    write_input(dest, built[i].rolled(shift))
                    continue
                dest[..., shift:].copy_(built[i][..., :vocab - shift])
                dest[..., :shift].copy_(built[i][..., vocab - shift:])
        for i in self.tokens:
            if built[i] is not None:
                t = built[i]
                (dests[i] if bump else dests[i].data).copy_(torch.where(t >= 0, (t + shift) % max(vocab, 1), t))


# ---- the calls ------------------------------------------------------------------------------------

def int64_problem(t, want: tuple, device, *, name: str = "", shape_note: str = "") -> str | None:
    """One line saying how ``t`` (a verifier's output, ``name`` where it returns several) fails to
    be an int64 tensor of shape ``want`` on ``device`` (``shape_note`` says what ``want`` is), or
    None: the output check of ``seeded_calls``' callers."""
    if not isinstance(t, torch.Tensor):
        return f"returned {name + ' as ' if name else ''}a {type(t).__name__}, not a torch.Tensor"
    of = f"{name} of " if name else ""
    if t.dtype != torch.int64:
        return f"returned {of}dtype {str(t.dtype).replace('torch.', '')}, not int64"
    if tuple(t.shape) != tuple(want):
        return f"returned {of}shape {list(t.shape)}, not {list(want)} ({shape_note})"
    if t.device != device:
        return f"returned {name or 'a tensor'} on {t.device}, not on the inputs' device {device}"
    return None


def exception_line(exc: BaseException) -> str:
    """``raised TYPE: first line of the message`` (200 characters at most): a candidate's own
    failure as one line of a verdict, never a traceback."""
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"raised {type(exc).__name__}" + (f": {text}" if text else "")


def _tensors(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for t in out if isinstance(t, torch.Tensor)]
    return []


def _copy(out):
    """``out`` (a tensor or a tuple of them) copied now: what the call returned, as it was."""
    with torch._C.DisableTorchFunction():        # a subclass may not fake its copy
        if isinstance(out, torch.Tensor):
            return out.detach().clone()
        return type(out)(t.detach().clone() if isinstance(t, torch.Tensor) else t for t in out)


def _changed(live, copy) -> bool:
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
    if calling is None or not guarded:
        calling = Calling.plain(len(seeds), len(built))
    layouts = calling.layouts + ("as built",) * len(built)
    guards = [None if t is None else lay_out(t, name, lay)
              for t, name, lay in zip(built, names, layouts)] if guarded else []
    args = [None if g is None else g.tensor for g in guards] if guarded else \
        [t.materialize() if isinstance(t, TableRows) else t for t in built]
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
        written = first_problem(guards, "during the call") if check else None
        if written:
            return None, f"{written} [{what}]", "input write"
        if not calling.reread:
            return out, None, None
        kept.append((out, _copy(out), what))
        return kept[-1][1], None, None

    if guarded and calling.history != "fresh" and relabel is not None:
        bump = calling.history == "rewritten"
        relabel.write(args, built, bump=bump)
        _, problem, cause = one(0, int(seeds[0]) ^ OTHER_SEED, f"the call on other contents before the "
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


def seeded_calls(fn, built, names, seeds, output_problem, *, guarded: bool = True, calling=None, relabel=None):
    """The loop of the module docstring: ``(outputs, problem or None, cause or None)``."""
    return run_calls(fn, built, names, seeds, output_problem, calling, relabel=relabel, guarded=guarded)


# ---- a probe's loop of calls -----------------------------------------------------------------------

class InputWritten(RuntimeError):
    """A call through ``Rotating`` wrote into its input or past it (one line: what and where)."""


class Rotating:
    """``fn`` for a probe that calls a candidate in a loop (the MTP decoder): call ``i`` runs in
    ``contexts[i % len]``, its first argument copied into a guard band (``equiv.run.guard``) at
    ``offsets[i % len]`` elements past an aligned start; a write into that input or past it raises
    ``InputWritten``, naming the call and its context. ``used`` counts the calls per context."""

    def __init__(self, fn, contexts, offsets=(0,), device="cpu"):
        self.fn, self.contexts, self.offsets, self.device = fn, tuple(contexts), tuple(offsets), device
        self.calls = 0
        self.used: dict = {}
        for name in ("spec", "max_k", "supported_k", "__name__"):
            if hasattr(fn, name):
                setattr(self, name, getattr(fn, name))

    def __call__(self, x, *rest):
        i = self.calls
        self.calls += 1
        context = self.contexts[i % len(self.contexts)] if self.contexts else None
        self.used[context] = self.used.get(context, 0) + 1
        guard = Guarded(x, "logits", offset=self.offsets[i % len(self.offsets)])
        out = call_in(context, self.fn, (guard.tensor, *rest), self.device)
        if str(self.device).startswith("cuda"):
            torch.cuda.synchronize()
        problem = guard.problem(f"in call {i + 1} ({context or 'as the caller is'})")
        if problem:
            raise InputWritten(f"the candidate {problem}")
        return out
