"""What comes back from one call of a candidate: its outputs as arrays, or how it ended abnormally.

Plan
----
- ``Array``: a returned tensor moved to the CPU: ``values`` (NumPy; bfloat16 and float16 are
  widened exactly to float32, everything else keeps its type), the tensor's ``dtype`` name,
  ``shape``, ``device`` and whether it was ``contiguous``. A contract check reads these fields, so
  it never needs the live tensor (which stays in the worker process).
- ``CallOutcome``: ``ok`` with ``value`` (the returned structure, tensors replaced by ``Array``),
  or not ok with ``kind`` (one of ``KINDS``) and ``problem``: one line that says what happened
  ("exited with code 0 during the call", "killed by signal SIGSEGV", ...). ``traceback`` and
  ``log_tail`` (the last lines the candidate printed) are evidence for the report.
- ``ABNORMAL``: the kinds that end a worker process, or stop the candidate from answering; a
  property run stops at the first of them instead of shrinking (each one costs a restart).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from equiv.run.faults import NOT_JUDGED_PREFIX, note

if TYPE_CHECKING:                                # an annotation only: reading an outcome needs no NumPy
    import numpy as np

# raised:     an Exception from the candidate (a failed check, the run goes on)
# interrupt:  KeyboardInterrupt, SystemExit, GeneratorExit or another BaseException from it
# exit:       its process ended (any exit code) before answering
# signal:     its process was killed by a signal (a segfault, an abort)
# timeout:    no answer within the time-out; the process was killed
# input:      it modified its input, or wrote past it (guard bands)
# outputs:    the outputs an earlier call returned changed by this one (buffers recycled)
# not_called: the candidate was not called (an earlier hang or too many abnormal ends)
# not_judged: the machine or the harness failed, not the candidate (equiv.run.faults): out of
#             memory while equiv built or moved the data, or in a call the free memory could not
#             hold; a device busy or lost; the harness's own time-out. The verdict is NOT JUDGED.
KINDS = ("raised", "interrupt", "exit", "signal", "timeout", "input", "outputs", "not_called", "not_judged")
ABNORMAL = ("interrupt", "exit", "signal", "timeout", "not_called", "not_judged")


@dataclass(frozen=True)
class Array:
    """A tensor the candidate returned, as the verdict process sees it."""

    values: np.ndarray = field(repr=False)
    dtype: str
    shape: tuple
    device: str
    contiguous: bool = True

    @property
    def device_type(self) -> str:
        return self.device.split(":")[0]


@dataclass(frozen=True)
class Opaque:
    """A returned object that is neither a tensor nor a plain value (named by its type only)."""

    type_name: str


@dataclass(frozen=True)
class CallOutcome:
    ok: bool
    value: object = None
    kind: str | None = None
    problem: str | None = None
    traceback: str | None = field(default=None, repr=False)
    log_tail: str | None = field(default=None, repr=False)
    seconds: float = 0.0

    @property
    def abnormal(self) -> bool:
        return not self.ok and self.kind in ABNORMAL

    def to_json(self) -> dict:
        return {"ok": self.ok, "kind": self.kind, "problem": self.problem,
                "log_tail": self.log_tail, "seconds": round(self.seconds, 4)}


def failed(kind: str, problem: str, **extra) -> CallOutcome:
    return CallOutcome(ok=False, kind=kind, problem=problem, **extra)


class Pending:
    """A request that has been sent (``submit``); ``result()`` is its ``CallOutcome`` (made once)."""

    def __init__(self, collect):
        self._collect = collect
        self._outcome = None

    def result(self) -> CallOutcome:
        if self._outcome is None:
            self._outcome = self._collect()
        return self._outcome


def noted(spec: str, outcome: CallOutcome) -> CallOutcome:
    """``outcome``, its line noted under ``spec`` when it is ``not_judged`` (``faults.note``)."""
    if outcome.kind == "not_judged":
        note(spec, outcome.problem.removeprefix(NOT_JUDGED_PREFIX))
    return outcome
