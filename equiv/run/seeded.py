"""One sampler, called once per generator seed on inputs in guard bands: the loop both verifier
ops' probes run (the chain and the tree verifier's ``calls.draw``).

Plan. ``seeded_calls(fn, built, names, seeds, output_problem, guarded)`` wraps each input of
``built`` in a guard band (``equiv.run.guard.Guarded``: the one rule for "modified its input")
unless ``guarded`` is off (our own samplers, in calibration: speed), calls ``fn(*inputs,
generator)`` with a fresh ``torch.Generator`` seeded by each seed on the inputs' device (the
last input's), synchronises a CUDA device, and stops at the first problem: what the call raised
(``exception_line``), what ``output_problem(out)`` finds in its output, or a guard band written.
Returns ``(outputs, problem, cause)``, ``cause`` the data the diagnosis reads: ``"raise"``,
``"output type"`` or ``"input write"``.
"""
from __future__ import annotations


def exception_line(exc: BaseException) -> str:
    """``raised TYPE: first line of the message`` (200 characters at most): a candidate's own
    failure as one line of a verdict, never a traceback."""
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"raised {type(exc).__name__}" + (f": {text}" if text else "")


def seeded_calls(fn, built, names, seeds, output_problem, *, guarded: bool = True):
    """The loop of the module docstring: ``(outputs, problem or None, cause or None)``."""
    import torch

    from equiv.run.guard import Guarded

    if guarded:
        guards = [None if t is None else Guarded(t, name) for t, name in zip(built, names)]
        args = [None if g is None else g.tensor for g in guards]
    else:
        guards, args = [], list(built)
    dev = args[-1].device
    outs, problem, cause = [], None, None
    for seed in seeds:
        gen = torch.Generator(device=dev).manual_seed(int(seed))
        try:
            out = fn(*args, gen)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
        except Exception as exc:                    # the candidate's own failure is a verdict
            problem, cause = exception_line(exc), "raise"
            break
        problem, cause = output_problem(out), "output type"
        if not problem:
            problem, cause = next((p for p in (g.problem("during the call") for g in guards if g is not None)
                                   if p), None), "input write"
        if problem:
            break
        outs.append(out)
    return outs, problem, (cause if problem else None)
