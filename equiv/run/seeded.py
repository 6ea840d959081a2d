"""One sampler, called once per generator seed on inputs in guard bands: the loop both verifier
ops' probes run (the chain and the tree verifier's ``calls.draw``).

Plan. ``seeded_calls(fn, built, names, seeds, output_problem, guarded, calling, relabel)`` calls
``fn(*inputs, generator)`` once per seed through the calling layer (``equiv.run.calling``): each
input in a guard band (``equiv.run.guard.Guarded``: the one rule for "modified its input") laid
out as ``calling`` deals it, each call in its context with a fresh or a kept generator, after a
call on other contents written over them in place (``relabel``) when the case's history asks for it (``calling``
None: the plain calling, fresh generators on inputs as built). ``guarded`` off skips all of it
(our own samplers, in calibration: speed). It stops at the first problem: what the call raised
(``exception_line``), what ``output_problem(out)`` finds in its output, a guard band written, or
an output changed by a later call. Returns ``(outputs, problem, cause)``, ``cause`` the data the
diagnosis reads: ``"raise"``, ``"output type"``, ``"input write"`` or ``"output reused"``.
"""
from __future__ import annotations

from equiv.run.calling import exception_line, run_calls

__all__ = ["exception_line", "seeded_calls"]


def seeded_calls(fn, built, names, seeds, output_problem, *, guarded: bool = True, calling=None, relabel=None):
    """The loop of the module docstring: ``(outputs, problem or None, cause or None)``."""
    return run_calls(fn, built, names, seeds, output_problem, calling, relabel=relabel, guarded=guarded)
