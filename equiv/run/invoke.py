"""The one piece of code that calls a candidate (in the worker process, or in-process for our own
built-in paths), and the checks that need the live tensors.

Plan of ``invoke`` (one call)
1. Build the inputs from their description on the device, each inside a guard band
   (``equiv.run.guard``); a ``Seeded`` argument becomes a ``torch.Generator``.
2. Call ``fn(*inputs, *extra)`` in the call's calling context (``equiv.run.context``: autograd
   mode, thread, stream; ``None`` is the worker's main thread with grad enabled). An ``Exception`` is a ``raised`` outcome with its traceback; any
   other ``BaseException`` (``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit``, a custom
   one) is ``interrupt``: the candidate cannot end or fake the run by raising.
   ``on_start`` (the worker's) is told just before the call: the time-out counts from there,
   so building the input is not the candidate's time.
3. Check the guard bands right after the return, again after the device synchronizes (an
   asynchronous kernel fault surfaces there too), and the outputs of the last ``KEEP_OUTPUTS``
   calls: a candidate that hands out views of buffers it recycles overwrites them now.
4. Move the outputs to the host (``to_host``).
The machine's failures are not the candidate's (``equiv.run.faults``): out of memory, a device
busy or lost, in steps 1 and 4 (equiv's own) or in a call whose inputs the free memory could not
hold, is an outcome of kind ``not_judged``; the candidate and a probe's calls of it go through
``faults.Watched``, which weighs an out-of-memory error against the memory read before the call.
``settle`` ends a stage: after a short wait it checks once more every input of the stage's recent
calls (a late write from a thread or a stream that outlives the call) and the last outputs.
"""
from __future__ import annotations

import importlib
import time
import traceback

import numpy as np
import torch

from equiv.memory import trim
from equiv.run.faults import (NOT_JUDGED_PREFIX, NotJudged, Watched, from_outside, harness, harness_fault, inject,
                              machine_fault)
from equiv.run.guard import Guarded, build_inputs, first_problem
from equiv.run.inputs import Seeded
from equiv.run.outcome import Array, CallOutcome, Opaque, Pending, failed, noted
from equiv.run.seeded import call_in
from equiv.run.spec import CandidateSpec

KEEP_LIVE = 4                                    # inputs kept for the end-of-stage re-check
KEEP_OUTPUTS = 4                                 # calls whose outputs are re-checked after each call
SETTLE_S = 0.2                                   # wait before that re-check


class CallState:
    """What a runner remembers between calls: recent guarded inputs and the last outputs."""

    def __init__(self):
        self.live: list[Guarded] = []
        self.prev_outputs: list = []             # (tensor, snapshot, calls ago) of the last calls
        self.broken = False                      # the device context cannot be trusted any more

    def remember(self, guards, outputs) -> None:
        self.live = (self.live + [g for g in guards if g is not None])[-KEEP_LIVE:]
        with torch._C.DisableTorchFunction():    # a subclass may not fake its snapshot
            older = [(t, snap, ago + 1) for t, snap, ago in self.prev_outputs if ago + 1 < KEEP_OUTPUTS]
            self.prev_outputs = [(t, t.detach().clone(), 0) for t in outputs] + older


def _generator(seeded: Seeded, device):
    """The ``torch.Generator`` a ``Seeded`` argument becomes on ``device``."""
    g = torch.Generator(device=device)
    g.manual_seed(int(seeded.seed))
    return g


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _tensors(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def _sync(device) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def _outputs_overwritten(state: CallState) -> str | None:
    for n, (t, snap, ago) in enumerate(state.prev_outputs):
        with torch._C.DisableTorchFunction():
            same = torch.equal(t, snap) or (t.is_floating_point() and torch.equal(t.isnan(), snap.isnan())
                                            and torch.equal(t.nan_to_num(), snap.nan_to_num()))
        if not same:
            which = "its previous call" if ago == 0 else f"its call {ago + 1} calls back"
            return (f"overwrote the outputs of {which} (an output changed after a later call): "
                    f"it returns views of a buffer it reuses, so a caller that keeps topk_p across "
                    f"draft steps reads the wrong values")
    return None


def invoke(fn, inputs, extra=(), *, device="cpu", state: CallState | None = None,
           input_names=("logits",), on_start=None, context=None) -> CallOutcome:
    """Call ``fn`` once on the inputs ``inputs`` describes (module docstring)."""
    state = state if state is not None else CallState()
    t0 = time.perf_counter()
    try:
        with harness("built the input", hook="build"):
            try:
                built = build_inputs(inputs, device)
            except Exception as exc:             # our own input builder: not the candidate's fault
                if machine_fault(exc):
                    raise
                raise RuntimeError(f"could not build the input {inputs}: {_first_line(exc)}") from exc
            guards = [None if t is None else Guarded(t, input_names[i] if i < len(input_names) else f"argument {i}")
                      for i, t in enumerate(built)]
            args = [None if g is None else g.tensor for g in guards]
            args += [_generator(a, device) if isinstance(a, Seeded) else a for a in extra]
    except NotJudged as exc:
        return _not_judged(exc, t0)
    late = first_problem(state.live, "after returning from an earlier call")
    if on_start is not None:
        on_start()
    try:
        out = call_in(context, Watched(fn, device), args, device)
    except NotJudged as exc:
        return _not_judged(exc, t0)
    except Exception as exc:
        try:
            _sync(device)
        except Exception:
            state.broken = True
        return failed("raised", f"raised {_first_line(exc)}", traceback=traceback.format_exc(),
                      seconds=time.perf_counter() - t0)
    except BaseException as exc:                 # noqa: B036 - the candidate may not end the run
        if from_outside(exc):                    # Ctrl-C or SIGTERM during an in-process call: ours
            raise
        return failed("interrupt", f"raised {_first_line(exc)} (a BaseException: the candidate may not "
                                   f"end or interrupt the run)", traceback=traceback.format_exc(),
                      seconds=time.perf_counter() - t0)
    problem = first_problem(guards, "during the call")
    try:
        _sync(device)
    except Exception as exc:
        state.broken = True
        return failed("raised", f"raised {_first_line(exc)} when the device synchronized after the call "
                                f"(an asynchronous kernel fault)", traceback=traceback.format_exc(),
                      seconds=time.perf_counter() - t0)
    problem = problem or first_problem(guards, "after the device synchronized")
    kind = "input"
    if problem is None and (overwritten := _outputs_overwritten(state)) is not None:
        problem, kind = overwritten, "outputs"
    problem = problem or late
    try:
        with harness("moved the outputs to the host"):
            value = to_host(out)
            state.remember(guards, _tensors(out))
    except NotJudged as exc:
        return _not_judged(exc, t0)
    except Exception as exc:
        return failed("raised", f"its outputs could not be read: {_first_line(exc)}",
                      traceback=traceback.format_exc(), seconds=time.perf_counter() - t0)
    trim()                                       # the cache a large call left (equiv.memory)
    dt = time.perf_counter() - t0
    if problem is not None:
        return CallOutcome(ok=False, value=value, kind=kind, problem=problem, seconds=dt)
    return CallOutcome(ok=True, value=value, seconds=dt)


def _not_judged(exc: NotJudged, t0: float) -> CallOutcome:
    return failed("not_judged", f"{NOT_JUDGED_PREFIX}{exc}", traceback=traceback.format_exc(),
                  seconds=time.perf_counter() - t0)


def settle(state: CallState, wait: float = SETTLE_S) -> str | None:
    """End of a stage: after ``wait`` seconds, the recent inputs and the last outputs once more."""
    if not state.live and not state.prev_outputs:
        return None
    time.sleep(wait)
    problem = first_problem(state.live, "after returning (seen at the end of the stage)")
    problem = problem or _outputs_overwritten(state)
    state.live, state.prev_outputs = [], []
    return problem


def run_probe(fn, target: str, payload, device="cpu"):
    """Run our trusted ``module:function(fn, device, payload)`` (a probe needs the live callable:
    CUDA graphs, many calls in a row); its exceptions become outcomes like a call's."""
    t0 = time.perf_counter()
    module, _, name = target.partition(":")
    probe = getattr(importlib.import_module(module), name)
    try:
        inject("build", hang=False)              # the test hook (equiv.run.faults): the probe's own build
        result = probe(Watched(fn, device), device, payload)
        _sync(device)
        trim()
    except NotJudged as exc:
        return _not_judged(exc, t0)
    except Exception as exc:
        if (line := harness_fault(exc)) is not None:
            return _not_judged(NotJudged(line), t0)
        return failed("raised", f"raised {_first_line(exc)}", traceback=traceback.format_exc(),
                      seconds=time.perf_counter() - t0)
    except BaseException as exc:                 # noqa: B036
        if from_outside(exc):
            raise
        return failed("interrupt", f"raised {_first_line(exc)} (a BaseException: the candidate may not "
                                   f"end or interrupt the run)", traceback=traceback.format_exc(),
                      seconds=time.perf_counter() - t0)
    # a probe's own result object crosses as it is (pickled); tensors in it become host arrays
    value = to_host(result) if _tensors(result) else result
    return CallOutcome(ok=True, value=value, seconds=time.perf_counter() - t0)


_PLAIN = (bool, int, float, str, bytes, type(None))


def to_host(value):
    """The returned structure with every tensor replaced by an ``Array`` (recursively in
    tuples, lists and dicts, whose subclasses, such as ``torch.return_types.topk``, become the
    plain container); plain values of exactly a builtin or NumPy type kept; anything else,
    subclasses of plain types and object arrays included, becomes ``Opaque``: only our own
    types cross back (``equiv.run.wire`` reads nothing else). Tensors are read with torch
    functions disabled, and a tensor subclass (which could override how it is read) crosses as
    ``Opaque`` named by its type: a contract failure."""
    if isinstance(value, torch.Tensor) and type(value) not in (torch.Tensor, torch.nn.Parameter):
        return Opaque(f"tensor subclass {type(value).__module__}.{type(value).__qualname__}")
    if isinstance(value, torch.Tensor):
        with torch._C.DisableTorchFunction():
            t = value.detach()
            if t.dtype in (torch.bfloat16, torch.float16):
                host = t.float().cpu().numpy()   # exact: both embed in float32
            else:
                host = t.cpu().numpy()
            return Array(np.array(host, copy=True), str(t.dtype).removeprefix("torch."), tuple(t.shape),
                         str(t.device), bool(t.is_contiguous()))
    if isinstance(value, tuple):
        return tuple(to_host(v) for v in value)
    if isinstance(value, list):
        return [to_host(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_host(v) for k, v in value.items()}
    if type(value) in _PLAIN:
        return value
    if type(value) is np.ndarray and not value.dtype.hasobject:
        return value
    if isinstance(value, np.generic) and type(value).__module__ == "numpy" and not value.dtype.hasobject:
        return value
    return Opaque(type(value).__name__)


class InProcessRunner:
    """Calls in this process: our own paths (trusted), or a callable the API was handed."""

    isolated = False

    def __init__(self, fn, candidate: CandidateSpec, device: str):
        self.fn, self.candidate, self.spec, self.device = fn, candidate, candidate.text, device
        self.state = CallState()
        self.calls = 0

    def call(self, inputs, *extra, names=("logits",), timeout=None, context=None) -> CallOutcome:
        self.calls += 1
        return noted(self.spec, invoke(self.fn, inputs, extra, device=self.device, state=self.state,
                                        input_names=names, context=context))

    def submit(self, inputs, *extra, names=("logits",), timeout=None, context=None) -> Pending:
        """The call, made when its result is asked for (in-process: nothing runs beside it)."""
        return Pending(lambda: self.call(inputs, *extra, names=names, timeout=timeout, context=context))

    def probe(self, target: str, payload=None, timeout=None) -> CallOutcome:
        self.calls += 1
        return noted(self.spec, run_probe(self.fn, target, payload, self.device))

    def settle(self) -> str | None:
        return settle(self.state)

    def close(self) -> None:
        pass
