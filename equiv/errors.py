"""Every exception equiv raises, under one root class.

``InvalidArgument`` also subclasses ``ValueError`` and ``CandidateLoadError`` also subclasses
``ImportError``, so callers can catch either the project's class or the builtin one. The CLI
turns any ``UsageError`` into one line on stderr and exit code 2.
"""
from __future__ import annotations


class EquivError(Exception):
    """Root of every error raised by equiv."""


class UsageError(EquivError):
    """The caller asked for something that cannot be done: exit code 2 at the CLI."""


class InvalidArgument(UsageError, ValueError):
    """An argument has a bad value; the message names it, shows it and says the fix."""


class CandidateLoadError(UsageError, ImportError):
    """A candidate spec could not be turned into a callable."""


class NoDeviceError(UsageError, RuntimeError):
    """A device the command needs (a CUDA GPU) is not present."""


class OutputError(UsageError, OSError):
    """An output file could not be written (a full disk, a vanished folder); the message says which."""


class MissingDependency(UsageError, ImportError):
    """An optional dependency (Triton, matplotlib) is not installed; the message says how."""


class EquivalenceError(EquivError, AssertionError):
    """``equiv.assert_equivalent`` found a difference. ``result`` is the full comparison;
    ``failed`` names the failed checks (``"value" in err.failed``); the message ends with the
    ``REPRO:`` line."""

    def __init__(self, message: str, result=None):
        super().__init__(message)
        self.result = result
        self.failed = tuple(c.name for c in getattr(result, "failed_checks", ()))
