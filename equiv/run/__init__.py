"""Where a candidate's calls happen: the supervised worker, its inputs and its outcomes.

This is the only code that calls a candidate (``invoke``); everything else asks a runner.
"""
from equiv.run.guard import Raw, Seeded
from equiv.run.outcome import ABNORMAL, Array, CallOutcome, Opaque
from equiv.run.supervisor import close_all, load_check, resolve_spec, runner_for, trusted

__all__ = ["ABNORMAL", "Array", "CallOutcome", "Opaque", "Raw", "Seeded", "close_all", "load_check",
           "resolve_spec", "runner_for", "trusted"]
