"""The machine's failures, told apart from the candidate's: what makes a verdict NOT JUDGED.

A gate that fails correct code because the GPU was short of memory gets switched off. So
where the harness or the machine fails, the verdict is neither PASS nor FAIL but NOT JUDGED
(exit code 3; docs/trust.md, "Not judged"), and never a defect of the candidate.

Plan
----
- ``machine_fault(exc)``: the cause, as words, when ``exc`` is the machine's: ``MemoryError``
  (the host's memory), ``torch.OutOfMemoryError`` or a "CUDA out of memory" error (the device's),
  a device busy, unavailable or lost (``BUSY_OR_LOST``, by the driver's message); else None.
- ``NotJudged``: raised in the worker where such a fault is not the candidate's. It is a
  ``BaseException`` so that a probe's ``except Exception`` (a candidate's failure, judged) lets it
  through; ``equiv.run.invoke`` makes it a ``CallOutcome`` of kind ``not_judged``.
- ``harness(what)``: equiv's own steps in the worker (building the inputs and their guard bands,
  moving the outputs to the host): a machine fault there is ``NotJudged``. In a probe (many calls
  that equiv's own code makes in the worker), a machine fault that escapes outside the
  candidate's calls is equiv's too (``harness_fault``), and so is one raised in the gate's own
  process (``equiv.gate``).
- ``Watched(fn, device)``: the candidate as the worker calls it. Before each call it reads the
  memory (``memory``: ``torch.cuda.mem_get_info`` on a GPU, ``/proc/meminfo`` on the host) and
  estimates the call's need from its inputs (``need_bytes``: ``NEED_FACTOR`` times the bytes of
  its tensor arguments, plus ``NEED_FLOOR``). An out-of-memory error from the call is
  - NOT JUDGED when the free memory at the call's start was below that need (the line says how
    much was free and how much other processes held), or when it was not once other processes'
    growth during the call is taken off it (a second reading when the call failed: two gates
    sharing one GPU, the other one allocating while this call ran);
  - else the candidate's: its message is prefixed "out-of-memory defect of the candidate" with
    the same figures, and it stays a failed call (FAIL, named as such).
  A device busy or lost during the call is NOT JUDGED. (A host ``MemoryError`` during a call on
  a GPU is weighed against the host's memory, read when it failed.)
- Every ``NotJudged`` line a runner meets is noted (``note``); a gate asks ``since(mark)`` which
  were noted in this process during its run, whoever's runner met them (a built-in baseline's
  too: the machine failed all the same), and the CLI which were noted during the command.
- An interrupt from outside (``from_outside``): the CLI's SIGINT and SIGTERM handlers record
  the signal (``signalled``) and raise ``KeyboardInterrupt`` / ``Terminated`` in the main
  thread, which may be inside a candidate's call in this process (our own paths): there it ends
  the command (exit 130 / 143, no verdict, no output file), and is never the candidate's
  "interrupt" defect. A candidate that raises either itself, with no signal received, is judged
  for it as before. A gate run from the API notes Ctrl-C the same way while it runs
  (``interrupts_noted``). (A CI job's time-out or a bench's SIGTERM once turned into a FAIL verdict of
  a correct built-in tree verifier, with its JSON written.)
- Test hook (tests only; documented in docs/trust.md): ``EQUIV_TEST_FAULT`` holds
  comma-separated ``key=value`` items. ``build=memory|oom|busy|hang`` makes equiv's step of
  building a call's inputs in the worker raise ``MemoryError``, ``torch.OutOfMemoryError``, a
  device-busy error, or sleep (for the harness's own time-out, ``EQUIV_BUILD_TIMEOUT_S``);
  ``call=hang`` sleeps at the start of every call of the candidate (inside it, as its own time),
  after the timeline mark ``test hook: call hangs`` (``equiv.timeline``);
  ``free=BYTES`` (and ``total=BYTES``) replace the memory reading, so the rule above can be
  exercised without a GPU.
"""
from __future__ import annotations

import functools
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

NEED_FACTOR = 4                                  # a call may make a few copies of its inputs
NEED_FLOOR = 256 * 2 ** 20                       # and needs a workspace (a kernel's, a library's)
GiB = 2 ** 30
# The driver's words for a device another process holds, or that is gone.
BUSY_OR_LOST = ("busy or unavailable", "no CUDA GPUs are available", "uncorrectable ECC error",
                "fallen off the bus", "GPU is lost", "cudaErrorDevicesUnavailable", "device not available")
HOOK = "EQUIV_TEST_FAULT"
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
NOT_JUDGED_PREFIX = "was not judged: "           # a not_judged outcome's problem: "was not judged: CAUSE"


class NotJudged(BaseException):             # noqa: N818 - a verdict, not an error of the caller
    """The machine or the harness failed; ``str()`` is the one line saying how."""


class Terminated(BaseException):
    """SIGTERM, raised in the main thread (the CLI's handler) so that ``finally`` blocks and atomic
    writes clean up."""


_SIGNALS: list = []                              # the signals this process received (the CLI's handlers)


def signalled(signum: int) -> None:
    """Record that this process received ``signum`` (module docstring)."""
    _SIGNALS.append(int(signum))


def from_outside(exc: BaseException) -> bool:
    """True when ``exc`` is the interrupt of a signal this process received, not the candidate's
    own (module docstring)."""
    return bool(_SIGNALS) and isinstance(exc, (KeyboardInterrupt, Terminated))


@contextmanager
def interrupts_noted():
    """While the block runs in the main thread, Ctrl-C is noted (``signalled``) before its
    ``KeyboardInterrupt`` is raised, and the notes are cleared after it: a gate run from the API
    (a notebook, a test) that is interrupted inside a call of a callable in this process stops,
    instead of judging the interrupt as the callable's. A handler of the caller's own, or SIGINT
    ignored, is left as it is (the CLI's notes SIGINT and SIGTERM for the whole command)."""
    import signal

    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return

    def on_sigint(signum, frame):
        signalled(signum)
        raise KeyboardInterrupt()

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _SIGNALS.clear()


def _hook() -> dict:
    text = os.environ.get(HOOK, "")
    return dict(item.split("=", 1) for item in text.split(",") if "=" in item)


def machine_fault(exc: BaseException) -> str | None:
    """The machine's cause in ``exc`` (module docstring), or None."""
    if isinstance(exc, NotJudged):
        return str(exc)
    if isinstance(exc, MemoryError):
        return "out of host memory (MemoryError)"
    text = str(exc)
    if type(exc).__name__ == "OutOfMemoryError" or "out of memory" in text.lower():
        return f"out of memory ({type(exc).__name__})"
    if any(words in text for words in BUSY_OR_LOST):
        line = text.strip().splitlines()[0][:160] if text.strip() else type(exc).__name__
        return f"the device is busy or lost ({line})"
    return None


def inject(step: str, hang: bool = True) -> None:
    """The test hook (module docstring): fail ``step`` as ``EQUIV_TEST_FAULT`` says (a ``hang``
    only where ``hang``: a probe's time is the candidate's, its own time-out bounds it)."""
    what = _hook().get(step)
    if what is None or (what == "hang" and not hang):
        return
    if what == "memory":
        raise MemoryError(f"{HOOK}: {step}")
    if what == "oom":
        # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
        import torch                             # lazy: the hook only

        raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate 2.00 GiB ({HOOK}: {step})")
    if what == "busy":
        raise RuntimeError(f"CUDA error: CUDA-capable device(s) is/are busy or unavailable ({HOOK}: {step})")
    if what == "hang":
        from equiv.timeline import mark

        mark(f"test hook: {step} hangs")
        time.sleep(3600)


@contextmanager
def harness(what: str, hook: str | None = None):
    """Equiv's own step ``what`` ("built the input"): a machine fault in it is ``NotJudged``;
    ``hook`` names the step for the test hook (``build``)."""
    try:
        if hook:
            inject(hook)
        yield
    except NotJudged:
        raise
    except Exception as exc:
        cause = machine_fault(exc)
        if cause is None or getattr(exc, "_equiv_candidates", False):
            raise
        raise NotJudged(f"{cause} while equiv {what} (equiv's own step, not the candidate's)") from exc


@dataclass(frozen=True)
class Memory:
    """Bytes free and in all on the device (the host for ``cpu``), and held by this process."""

    free: int
    total: int
    ours: int

    @property
    def others(self) -> int:
        """Held by other processes (this process's CUDA context is not in ``ours``: a little more)."""
        return max(self.total - self.free - self.ours, 0)


def _read(path: str, size: int = 256) -> str:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, size).decode("ascii", "replace")
    finally:
        os.close(fd)


def _host_memory() -> Memory | None:
    """The host's reading from the first lines of ``/proc/meminfo`` (MemTotal, MemFree,
    MemAvailable) and this process's resident set: ~40 us on a busy host; every call reads it."""
    try:
        info = {ln.split(":")[0]: int(ln.split()[1]) * 1024 for ln in _read("/proc/meminfo").splitlines()[:3]}
        rss = int(_read("/proc/self/statm", 128).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return None
    return Memory(info.get("MemAvailable", info.get("MemFree", 0)), info.get("MemTotal", 0), rss)


@functools.lru_cache(maxsize=None)
def _index(torch, device: str) -> int:
    return torch.device(device).index if torch.device(device).index is not None else torch.cuda.current_device()


def _reserved(torch, index: int) -> int:
    """This process's reserved device memory: the allocator's nested stats (11 us on an H100)
    rather than ``torch.cuda.memory_reserved`` (94 us: it flattens every stat), as every call
    reads it."""
    try:
        return int(torch._C._cuda_memoryStats(index)["reserved_bytes"]["all"]["current"])
    except Exception:                            # noqa: BLE001 - another torch: the public call
        return int(torch.cuda.memory_reserved(index))


def memory(device) -> Memory | None:
    """The memory reading of ``device`` now, or None when it cannot be read (a CUDA graph being
    captured, a driver that does not say); the test hook's ``free=``/``total=`` replace it."""
    hook = _hook()
    reading = None
    if str(device).startswith("cuda"):
        # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
        import torch                             # lazy: equiv.run is read without torch by the plugin

        try:
            if not torch.cuda.is_current_stream_capturing():
                index = _index(torch, str(device))
                free, total = torch.cuda.mem_get_info(index)
                reading = Memory(int(free), int(total), _reserved(torch, index))
        except Exception:                        # noqa: BLE001 - a reading, never a verdict
            reading = None
    else:
        reading = _host_memory()
    if "free" in hook:
        base = reading or Memory(0, 0, 0)
        free = int(hook["free"])
        total = int(hook.get("total", max(base.total, free + base.ours)))
        reading = Memory(free, total, min(base.ours, max(total - free, 0)))
    return reading


def need_bytes(args) -> tuple[int, int]:
    """``(need, inputs)``: what a call on ``args`` needs by the rule (module docstring), and the
    bytes of its tensor arguments."""
    inputs = sum(int(a.numel()) * int(a.element_size()) for a in args
                 if hasattr(a, "numel") and hasattr(a, "element_size"))
    return NEED_FACTOR * inputs + NEED_FLOOR, inputs


def _size(n: int) -> str:
    return f"{n / GiB:.2f} GiB" if n >= GiB else f"{n / 2 ** 20:.1f} MiB"


def memory_words(reading: Memory, need: int, inputs: int, device) -> str:
    where = "the host" if not str(device).startswith("cuda") else str(device)
    return (f"{_size(reading.free)} free of {_size(reading.total)} on {where} at the call's start, "
            f"{_size(reading.others)} held by other processes; the call needs about {_size(need)} "
            f"({NEED_FACTOR} x its inputs' {_size(inputs)} + {_size(NEED_FLOOR)})")


class Watched:
    """``fn`` as the worker calls it (module docstring); its attributes are ``fn``'s."""

    def __init__(self, fn, device):
        self.__wrapped__ = fn                    # inspect.signature reads fn's own
        self._device = device

    def __getattr__(self, name):
        if "__wrapped__" not in self.__dict__:   # half-made (a copy): no attributes of its own yet
            raise AttributeError(name)
        return getattr(self.__dict__["__wrapped__"], name)

    def __call__(self, *args):
        reading = memory(self._device)
        inject("call")                           # the test hook: inside the call, as its own time
        try:
            return self.__wrapped__(*args)
        except Exception as exc:
            raise judged(exc, reading, args, self._device) from None


def judged(exc: Exception, reading: Memory | None, args, device="cpu") -> BaseException:
    """What a candidate's exception ``exc`` becomes: ``NotJudged``, or ``exc`` itself (an
    out-of-memory error with its defect named in its message), marked as the candidate's."""
    cause = machine_fault(exc)
    try:
        exc._equiv_candidates = True             # a probe's caller does not take it for the harness's
    except AttributeError:                       # an exception type without a __dict__
        pass
    if cause is None:
        return exc
    if not cause.startswith("out of"):
        return NotJudged(f"{cause} during the candidate's call")
    need, inputs = need_bytes(args)
    if isinstance(exc, MemoryError) and str(device).startswith("cuda"):
        reading = _host_memory()                 # the host's, read when it failed
    if reading is None:
        return exc
    words = memory_words(reading, need, inputs, device)
    after = memory(device) if reading.free >= need else None     # others' growth during the call
    grew = max(after.others - reading.others, 0) if after is not None else 0
    if reading.free - grew < need:
        took = (f"; other processes took {_size(grew)} more during the call, leaving "
                f"{_size(max(reading.free - grew, 0))}" if grew else "")
        return NotJudged(f"{cause} during the candidate's call: {words}{took}; re-run on a device with more "
                         f"free memory" + (" that no other process shares" if grew else ""))
    first = str(exc.args[0]) if exc.args else ""
    try:
        exc.args = (f"out-of-memory defect of the candidate: {words}, and it ran out ({first})",) + tuple(exc.args[1:])
    except (AttributeError, TypeError):          # an exception whose message cannot be set: as raised
        pass
    return exc


def harness_fault(exc: BaseException, where: str = "in the worker") -> str | None:
    """An exception that escaped a probe (or a gate): ``NotJudged``'s line when it is the
    machine's and not from a candidate's call (``judged`` marks those), else None."""
    if isinstance(exc, NotJudged):
        return str(exc)
    if getattr(exc, "_equiv_candidates", False):
        return None
    cause = machine_fault(exc)
    return None if cause is None else f"{cause} in equiv's own code {where} (not the candidate's call)"


# -- what was not judged, per candidate spec -----------------------------------------------------
_NOTED: list = []
_LOCK = threading.Lock()


def note(spec: str, line: str) -> None:
    """Record that a call of ``spec`` was not judged (``line``: why)."""
    with _LOCK:
        _NOTED.append((str(spec), line))


def mark() -> int:
    with _LOCK:
        return len(_NOTED)


def since(start: int, spec: str | None = None) -> list:
    """The lines noted after ``mark()`` returned ``start`` (for ``spec`` only, when given), once each."""
    with _LOCK:
        lines = [line for s, line in _NOTED[start:] if spec is None or s == str(spec)]
    return list(dict.fromkeys(lines))
