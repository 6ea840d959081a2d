"""The commands' work as library functions: ``equiv.check`` and ``equiv.report``.

Plan. Each checks its arguments once (``RunOptions``: a bad value is one ``InvalidArgument``
naming it), finds the operation in the registry and calls its ``Op`` field: ``Op.check`` judges
one candidate on one recipe (what a ``REPRO:`` line runs), ``Op.report`` builds the op's report.
``equiv.gate`` is ``equiv.gate.run_gate``; ``equiv.assert_equivalent`` is the draft step's
assertion (the registry's default op).
"""
from __future__ import annotations

from equiv.errors import InvalidArgument
from equiv.ops import DEFAULT_OP, get_op
from equiv.options import RunOptions
from equiv.run.timeouts import DEFAULT_TIMEOUT_S
from equiv.verdict import CheckRun

__all__ = ["CheckRun", "check", "report"]


def check(candidate, recipe=None, *, op: str = DEFAULT_OP, k: int = 1, device: str = "auto",
          timeout=None, calls: int = 1, seed: int = 0, **op_options) -> CheckRun:
    """Judge ``candidate`` on one input recipe (default: the op's ``default_recipe``) under
    ``op``; ``calls`` seeded calls where the op draws (a verifier), ``op_options`` the op's own
    options (``law=`` of the verifier). A spec that does not load raises ``CandidateLoadError``
    before any work."""
    options = RunOptions.make(candidate, op=op, k=k, device=device, seed=seed,
                              timeout=DEFAULT_TIMEOUT_S if timeout is None else timeout, **op_options)
    return get_op(options.op).check(options, recipe, calls=calls)


def report(paths=None, *, op: str = DEFAULT_OP, **kwargs):
    """The op's report over ``paths`` (specs; default its built-ins): for the draft top-k the
    tolerance report of paths x dtypes x input families (its folder's ``report/``)."""
    the_op = get_op(op)
    if the_op.report is None:
        raise InvalidArgument(f"--op {the_op.name} has no report; `equiv gate --op {the_op.name}` "
                              f"judges its candidates")
    return the_op.report(paths, **kwargs)
