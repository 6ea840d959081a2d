"""The pre-merge gate of any operation: ``run_gate(candidate, op=...)`` -> ``GateResult``.

Plan. Every argument is checked once, into ``RunOptions``, before any work; the operation comes
from the registry (``equiv.ops.get_op``) and its own gate plan runs (``Op.gate``: the ``gate.py``
of the op's folder under ``equiv/ops/``). The result is ``equiv.verdict.GateResult`` for every
op, so the summary, ``--json`` and ``--junit`` outputs are one format. Whatever op it is, a gate during which the machine or the harness failed
(``equiv.run.faults``: a call's outcome ``not_judged`` in any runner of this process or of the
property suite's, or out of memory / a device lost raised in this process) is NOT JUDGED
(``equiv.verdict.not_judged_result``, exit code 3), never PASS and never the candidate's defect.
"""
from __future__ import annotations

import time

from dataclasses import replace

from equiv.checks import Stage
from equiv.devices import resolve_device
from equiv.errors import NoDeviceError
from equiv.memory import (ShortOfMemory, admission, cap_process, short_of_memory, suite_peaks, use_budget,
                          with_suite_memory)
from equiv.ops import DEFAULT_OP, get_op
from equiv.options import BUDGETS, DEFAULT_VOCAB, RunOptions
from equiv.run import faults
from equiv.run.timeouts import DEFAULT_TIMEOUT_S
from equiv.timeline import mark
from equiv.validation import check_choice, check_choices
from equiv.verdict import GateResult, not_judged_result

__all__ = ["GateResult", "run_gate"]

# Stages that a feature above the ops runs for an op whose plan names them (the draft top-k's
# ``mtp``); an op's gate receives them, since an op may not import a feature.
def _mtp_checks(*args, **kwargs):
    # equiv.mtp imports torch at its top: 2.9 s (-X importtime, busy 2-core CPU; ~1.2 s idle) that
    # would hold back every gate's property suite; a gate that runs the mtp stage pays it there
    from equiv.mtp.stage import mtp_checks

    return mtp_checks(*args, **kwargs)


FEATURE_STAGES = {"mtp": _mtp_checks}


def run_gate(candidate, *, op: str = DEFAULT_OP, k=None, device: str = "auto", dtypes=None,
             budget: str = "quick", seed: int = 0, vocab: int = DEFAULT_VOCAB, timeout=DEFAULT_TIMEOUT_S,
             stages=None, progress=None, max_gpu_memory=None, **op_options) -> GateResult:
    """The verdict on ``candidate`` (a spec string, a ``CandidateSpec`` or a callable) for the
    operation ``op`` (module docstring); ``op_options`` are the op's own (``law=`` of the
    verifier); ``progress(done, total, label)`` is told each stage as it starts. Every argument
    is checked once, into ``RunOptions``, before any work. ``k``: the k values judged (``1``,
    ``"1,4"``); None (or ``"auto"``) for an op judged at k (``Op.takes_k``): every k of
    ``equiv.options.auto_ks(seed)`` the candidate accepts. ``max_gpu_memory``: the device memory a call
    may take (``"8GiB"``, bytes; ``equiv.memory``)."""
    mark("gate start")
    the_op = get_op(op)
    if k is None:                    # an op judged at k: every k of auto_ks(seed) the candidate accepts
        k = "auto" if the_op.takes_k else 1
    budget = check_choice("budget", budget, BUDGETS)
    if not dtypes and the_op.budget_dtypes is not None:
        dtypes = the_op.budget_dtypes(budget)
    options = RunOptions.make(candidate, op=the_op.name, k=k, device=device, dtypes=dtypes, budget=budget,
                              seed=seed, timeout=timeout, max_gpu_memory=max_gpu_memory, **op_options)
    stages = tuple(check_choices("stages", stages, the_op.stages)) if stages else the_op.stages
    start, t0 = faults.mark(), time.perf_counter()
    try:
        with faults.interrupts_noted():          # Ctrl-C in a call of a callable in this process stops the gate
            result = _within_memory(options, stages, lambda: the_op.gate(options, stages=stages, vocab=vocab,
                                                                        progress=progress,
                                                                        feature_stages=FEATURE_STAGES))
    except Exception as exc:
        line = faults.harness_fault(exc, "in the gate's process")
        if line is None:
            raise
        result = GateResult(candidate=str(options.spec or candidate), passed=False, checks=(), k=tuple(options.ks),
                            device=str(options.device), dtypes=tuple(options.dtypes), budget=budget, seed=seed,
                            duration_s=time.perf_counter() - t0, op=the_op.name, not_judged=(line,))
    return not_judged_result(result, faults.since(start))


def _short_of_memory(device: str):
    """``short_of_memory`` of the resolved device, or None where the device does not resolve (no
    GPU for ``cuda``): the op's gate reports that usage error itself, after it has started its
    property suite (the critical path), which it then kills."""
    try:
        return short_of_memory(resolve_device(device))
    except NoDeviceError:
        return None


def _cap(device: str) -> None:
    """``cap_process`` of the resolved device (nothing where it does not resolve: see above)."""
    try:
        cap_process(resolve_device(device))
    except NoDeviceError:
        pass


def _within_memory(options, stages, run) -> GateResult:
    """``run()`` (the op's gate) under the memory budget of ``options`` (``equiv.memory``): NOT
    JUDGED when the device has less free memory than the budget (the op's gate asks,
    ``equiv.memory.admit``, once its property suite has started: the check imports torch, which
    the suite need not wait for; it kills the suite and calls nothing); else its result with the
    property suite's peaks in its ``properties`` stage (the other stages measure their own)."""
    use_budget(options.max_gpu_memory)

    def check():
        short = None if options.device == "cpu" else _short_of_memory(options.device)
        if short is None and options.device != "cpu":
            _cap(options.device)
        mark("memory checked")
        return short

    with suite_peaks() as suite, admission(check):
        try:
            result = run()
        except ShortOfMemory as exc:
            not_run = tuple(Stage(name, "not run", why="the device is short of memory") for name in stages)
            return not_judged_result(GateResult(
                candidate=options.candidate or "built-in paths", passed=False, checks=(), k=tuple(options.ks),
                device=options.device, dtypes=tuple(options.dtypes), budget=options.budget, seed=options.seed,
                duration_s=0.0, stages=not_run, op=options.op), [str(exc)])
        peaks = suite()
    return replace(result, stages=with_suite_memory(result.stages, peaks))
