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


_PLAIN = (bool, int, float, str, bytes, type(None))


def to_host(value):
    """The returned structure with every tensor replaced by an ``Array`` (recursively in
    tuples, lists and dicts, whose subclasses, such as ``torch.return_types.topk``, become the
    plain container); plain values of exactly a builtin or NumPy type kept; anything else,
    subclasses of plain types and object arrays included, becomes ``Opaque``: only our own
    types cross back (``equiv.run.wire`` reads nothing else). Tensors are read with torch
    functions disabled, and a tensor subclass (which could override how it is read) crosses as
    ``Opaque`` named by its type: a contract failure."""
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch

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
