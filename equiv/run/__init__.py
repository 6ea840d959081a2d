"""Where a candidate's calls happen: its spec, the supervised worker, its inputs and its outcomes.

This is the only code that calls a candidate (``invoke``); everything else asks a runner. It
knows no operation by name: a ``CandidateSpec`` carries its operation's name and ``equiv.ops``
resolves it. Names load on first use, so that the pytest plugin can read ``equiv.run.spec``
without loading NumPy into a host project's run.
"""
import importlib as _importlib

_EXPORTS = {
    "Raw": "equiv.run.inputs", "Seeded": "equiv.run.inputs",
    "ABNORMAL": "equiv.run.outcome", "Array": "equiv.run.outcome", "CallOutcome": "equiv.run.outcome",
    "Opaque": "equiv.run.outcome",
    "CandidateSpec": "equiv.run.spec", "as_spec": "equiv.run.spec",
    "close_all": "equiv.run.supervisor", "load_check": "equiv.run.supervisor",
    "runner_for": "equiv.run.supervisor", "prestart": "equiv.run.supervisor",
    "forget_prestarted": "equiv.run.supervisor",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'equiv.run' has no attribute {name!r}")
    value = getattr(_importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
