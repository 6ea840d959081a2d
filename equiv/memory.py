"""Memory: the budget of a gate's calls, the device's free memory, each stage's peaks.

Plan
----
- *Budget.* ``--max-gpu-memory`` (``RunOptions.max_gpu_memory``; the plugin's
  ``--equiv-max-gpu-memory``) bounds the device memory a gate's calls may take: 8 GiB by default
  (``DEFAULT_MAX_GPU_MEMORY``; CI cards hold 16-48 GiB and two gates may share one).
  ``parse_memory`` reads ``8GiB``, ``512MiB``, ``1.5GB`` or plain bytes and refuses anything else
  in one line. The budget in force is process-wide (``use_budget`` / ``budget``): the gate
  (``equiv.gate.run_gate``), ``equiv check`` and the plugin set it from their options, so the
  property suite's process gets the gate's (its ``--equiv-max-gpu-memory``). On the CPU the device *is* the host: a
  call's budget is then at most ``HOST_CALL_BYTES`` (1 GiB), so that a quick gate's host peak,
  the verdict process's tables and the suite's process beside it included, stays under 4 GiB
  (the chain verifier's statistics held 5.75 GB in one call of 382 rows at V = 262144 before).
- *Rows per call.* A call's peak is about ``WORKING_COPIES`` times its inputs: the inputs as
  built and the guard-band buffer they are copied into (``equiv.run.guard``, whose snapshot is
  the input as built since 9af9d24; the estimate still counts the third copy it used to make, so
  the plans' calls, and the calibrations measured on them, stay as they were), and the
  candidate's own temporaries (a rejection sampler's ratios, residual and cumulative sums over
  ``[B, n, V]``: about three more). ``rows_per_call(bytes_per_row, device)``
  is the most rows one call may hold under the budget; ``row_windows(batch, cap)`` splits a
  call's rows into balanced windows ``(start, stop)``. An op whose calls can outgrow the budget
  (the chain verifier's, the tree verifier's) sends such a recipe in windows of rows from its draws module: the same
  rows, one call to its judge.
- *Free memory.* ``short_of_memory(device, budget)``: on CUDA, the device's free memory
  (``torch.cuda.mem_get_info``) below the budget is one line saying so; else None.
- *Cached memory.* PyTorch's caching allocator keeps the blocks a process freed, so a process
  that once held a large call keeps its memory on the device for the rest of its life (a chain
  quick gate's processes held 24 GiB on an H100 with 6 GiB ever allocated at once). Two measures
  bound it. ``allocator_environment(env)``: the processes equiv starts (the CLI's own, the
  candidate's worker, the property suite's) use expandable segments
  (``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``; a value the user set is kept as it is),
  which map freed memory back to the device instead of caching fixed segments. ``trim()``: after
  each call and probe, where the process's reserved memory passes ``TRIM_BYTES``, the cache is
  emptied (``torch.cuda.empty_cache``: free blocks only; what is live stays), except in a process
  ``cap_process`` capped: there the allocator frees its cache itself when a request would pass
  the cap, and emptying it after every call made each next call map its memory again. The numbers do not
  change: the allocator hands out the same values either way. ``cap_process(device)``: the
  command's own process (the verdict process: its references, the built-in paths it calls in
  process, the MTP stage's model) may hold at most the budget less ``OTHERS_BYTES`` (the
  property suite's process, 0.6-1.2 GiB on an H100, and a worker's CUDA context) and less its
  own CUDA context (``CONTEXT_BYTES``: ~0.65 GiB on an H100 with torch 2.11, what nvidia-smi
  shows of the process beyond the allocator's reserve, which the cap does not count)
  (``torch.cuda.set_per_process_memory_fraction``: the allocator empties its cache before it
  passes that). Without the context's share the tree gate's processes held 8.20-8.36 GiB at
  their peak (one H100, f367e5f; the verdict process 7.14 GiB under a 6.5 GiB cap). Only where
  equiv owns the process (``own_process()``, called by the command's entry): a gate run inside
  a user's pytest leaves their process's allocator alone. Measured on
  one H100 (quick gates, every process at its peak by nvidia-smi): draft 21.1 / chain 24.1 /
  tree 17.1 GiB with neither measure, 10.2 / 7.4 / 9.8 GiB with the first two (the verdict
  process alone held 10.4 and 9.1 GiB with 4.6 and 4.4 GiB ever allocated).
- *Host memory kept for reuse.* glibc's malloc maps a block past 32 MiB afresh for each request
  and unmaps it when freed, so every large tensor of a call (the inputs built, their guard
  buffers, a candidate's float64 rows) page-faults its memory in again: on the 2-core CPU that was
  a third of a tree gate (``specinfer``: 63 s, 43 s without it). ``host_allocator()`` (the
  command's own process) and ``allocator_environment`` (the processes it starts) set
  ``HOST_MALLOC``: no mapped blocks, one arena, the free memory at the heap's top kept (up to
  2 GiB, glibc's most), so freed memory is reused; ``trim()`` gives the free memory back
  (``malloc_trim``) where the process's resident memory passes ``HOST_RESIDENT_BYTES``. A
  ``MALLOC_*`` setting the user made is kept; where malloc is not glibc's (macOS, musl) nothing
  changes. The cost: a process's resident peak grows towards that bound (the ``specinfer`` CPU
  gate's own process 1.7 -> 2.0-2.4 GiB; 63 -> 41 s).
- *Peaks.* ``Peaks.start()`` resets this process's peak device memory
  (``torch.cuda.reset_peak_memory_stats``, where CUDA is initialised) and its host peak (VmHWM,
  reset through ``/proc/self/clear_refs`` where Linux allows; else ``ru_maxrss``, the life's
  peak); ``read()`` gives both in bytes. ``worker_peaks`` is the same as a probe, run in the
  candidate's worker (``runner.probe("equiv.memory:worker_peaks")``, ``ask_worker``); the property
  suite's process writes its own and its worker's at its end to the file ``suite_peaks`` names
  (``PEAKS_ENV``). ``measured`` wraps a stage so that its ``Stage.memory`` (the gate's JSON,
  beside its ``seconds``) holds each process's peaks and their sums (``stage_memory``).
"""
from __future__ import annotations

import json
import os
import re
import resource
import sys
import tempfile
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace

from equiv.errors import InvalidArgument

GiB, MiB = 2 ** 30, 2 ** 20
DEFAULT_MAX_GPU_MEMORY = 8 * GiB
HOST_CALL_BYTES = 1 * GiB            # a call's budget on the CPU (module docstring)
WORKING_COPIES = 6                   # a call's peak over its inputs' bytes (module docstring)
_UNITS = {"": 1, "b": 1, "k": 10 ** 3, "kb": 10 ** 3, "m": 10 ** 6, "mb": 10 ** 6, "g": 10 ** 9, "gb": 10 ** 9,
          "t": 10 ** 12, "tb": 10 ** 12, "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40}
_BUDGET = [DEFAULT_MAX_GPU_MEMORY]
ALLOC_ENV = "PYTORCH_CUDA_ALLOC_CONF"
ALLOC_CONF = "expandable_segments:True"
TRIM_BYTES = 1 * GiB                 # reserved memory over which a process empties its cache (docstring)
OTHERS_BYTES = 3 * GiB // 2          # the budget's share of a gate's other processes (docstring)
CONTEXT_BYTES = 3 * GiB // 4         # this process's own CUDA context, which its allocator's cap does not count
_OWN = [False]
_CAPPED = [False]
HOST_TRIM_BYTES = 2 ** 31 - 1        # free memory at the heap's top kept for reuse: all (trim() bounds it)
HOST_RESIDENT_BYTES = 5 * GiB // 2   # resident memory over which the free memory malloc keeps goes back
_HOST: list = [None]                 # glibc, where host_allocator set it
# glibc malloc's settings of equiv's processes: environment variable -> (mallopt parameter, value)
HOST_MALLOC = {"MALLOC_MMAP_MAX_": (-4, 0), "MALLOC_TRIM_THRESHOLD_": (-1, HOST_TRIM_BYTES), "MALLOC_ARENA_MAX": (-8, 1)}


def parse_memory(value, name: str = "max_gpu_memory") -> int:
    """Bytes from ``8GiB``, ``512MiB``, ``1.5GB``, ``1048576`` (an int passes as is); at least 1 MiB."""
    text = str(value).strip()
    m = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)", text)
    unit = m.group(2).lower() if m else None
    if not m or unit not in _UNITS:
        raise InvalidArgument(f"{name}={value!r} is not an amount of memory: give bytes or a number with a "
                              f"unit, such as 8GiB, 512MiB or 16GB")
    got = int(float(m.group(1)) * _UNITS[unit])
    if got < MiB:
        raise InvalidArgument(f"{name}={value!r} is {got} bytes, under 1 MiB: give the budget with its "
                              f"unit, such as 8GiB or 512MiB")
    return got


def memory_text(nbytes: int) -> str:
    """``8GiB``, ``512MiB`` or plain bytes: exact, what ``parse_memory`` reads back."""
    for unit, size in (("GiB", GiB), ("MiB", MiB)):
        if nbytes >= size and nbytes % size == 0:
            return f"{nbytes // size}{unit}"
    return str(int(nbytes))


def shown(nbytes) -> str:
    """``7.4 GiB``, ``310 MiB``: for people."""
    return f"{nbytes / GiB:.1f} GiB" if nbytes >= GiB else f"{nbytes / MiB:.0f} MiB"


def use_budget(nbytes: int | None) -> None:
    """Set this process's budget (None: the default)."""
    _BUDGET[0] = DEFAULT_MAX_GPU_MEMORY if nbytes is None else int(nbytes)


def budget() -> int:
    return _BUDGET[0]


def call_budget(device) -> int:
    """The bytes one call may take on ``device``: the budget, at most ``HOST_CALL_BYTES`` on the CPU."""
    return budget() if str(device).startswith("cuda") else min(budget(), HOST_CALL_BYTES)


def rows_per_call(bytes_per_row: int, device, factor: int = WORKING_COPIES) -> int:
    """The most rows of ``bytes_per_row`` input bytes one call may hold on ``device`` (at least 1)."""
    return max(1, call_budget(device) // max(1, factor * int(bytes_per_row)))


def row_windows(batch: int, cap: int) -> list:
    """``[(start, stop), ...]``: ``batch`` rows in the fewest windows of at most ``cap`` rows,
    balanced (sizes differ by at most one)."""
    parts = -(-int(batch) // max(1, int(cap)))
    edges = [batch * i // parts for i in range(parts + 1)]
    return list(zip(edges[:-1], edges[1:]))


def short_of_memory(device, nbytes: int | None = None) -> str | None:
    """One line when ``device`` (CUDA) has less free memory than the budget, else None."""
    if not str(device).startswith("cuda"):
        return None
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch   # the device is CUDA: torch is imported already (resolve_device)

    want = budget() if nbytes is None else nbytes
    free, total = torch.cuda.mem_get_info(torch.device(device))
    if free >= want:
        return None
    return (f"{device} has {shown(free)} free of {shown(total)} (other processes hold the rest), under the "
            f"memory budget of {shown(want)} (--max-gpu-memory {memory_text(want)}): free the device or "
            f"lower the budget")


class ShortOfMemory(Exception):
    """The device has less free memory than the budget (``admit``): the gate is NOT JUDGED with
    this line, and nothing of the candidate's has run."""


_ADMISSION: ContextVar = ContextVar("equiv_admission", default=None)


@contextmanager
def admission(check):
    """Within it, ``admit()`` runs ``check()`` (-> a line when the device is short, else None)
    the first time it is called in this thread (``equiv.gate``: the free-memory check, which
    imports torch and starts CUDA, ~1 s, is made after the gate's property suite has started)."""
    token = _ADMISSION.set([check])
    try:
        yield
    finally:
        _ADMISSION.reset(token)


def admit() -> None:
    """The gate's admission check (``admission``), once; nothing outside one. Raises
    ``ShortOfMemory`` when the device is short. Every op's gate calls it once its property suite
    has started (or was not asked for), before anything of the candidate's runs."""
    pending = _ADMISSION.get()
    if pending:
        line = pending.pop()()
        if line:
            raise ShortOfMemory(line)


def allocator_environment(env=None) -> dict:
    """``env`` (default: this process's, changed in place) with the caching allocator's setting
    of equiv's processes (module docstring); a setting already there is left alone."""
    env = os.environ if env is None else env
    env.setdefault(ALLOC_ENV, ALLOC_CONF)
    for name, (_, value) in HOST_MALLOC.items():
        env.setdefault(name, str(value))
    return env


def host_allocator() -> bool:
    """This running process's glibc malloc as ``HOST_MALLOC`` says (module docstring), each
    setting the environment does not make already; False where malloc is not glibc's. Call it
    before ``allocator_environment()``, which writes the settings into the environment."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        if not hasattr(libc, "gnu_get_libc_version"):
            return False
        for name, (param, value) in HOST_MALLOC.items():
            if name not in os.environ:
                libc.mallopt(param, value)
    except (OSError, AttributeError):
        return False
    _HOST[0] = libc
    return True


def _resident() -> int:
    """This process's resident bytes now (0 where /proc is not there)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def trim() -> None:
    """Give back the free host memory malloc keeps (``HOST_MALLOC``) when the process's resident
    memory passes ``HOST_RESIDENT_BYTES``; empty this process's CUDA cache when its reserved
    memory passes ``TRIM_BYTES`` (module docstring): nothing of CUDA where it is not
    initialised, nor in a process ``cap_process`` capped (its allocator empties the cache itself
    before it passes the cap)."""
    if _HOST[0] is not None and _resident() > HOST_RESIDENT_BYTES:
        _HOST[0].malloc_trim(0)
    if _CAPPED[0]:
        return
    torch = _cuda()
    if torch is not None and torch.cuda.memory_reserved() > TRIM_BYTES:
        torch.cuda.empty_cache()


def own_process() -> None:
    """Say that equiv owns this process (the command's entry): ``cap_process`` may cap it."""
    _OWN[0] = True


def cap_process(device) -> None:
    """Cap this process's CUDA allocator at the budget less ``OTHERS_BYTES`` and its own
    context's ``CONTEXT_BYTES`` (module docstring):
    on a CUDA device, in a process equiv owns, else nothing."""
    if not _OWN[0] or not str(device).startswith("cuda"):
        return
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch   # the device is CUDA: torch is imported already (resolve_device)

    dev = torch.device(device)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    total = torch.cuda.get_device_properties(index).total_memory
    share = max(budget() - OTHERS_BYTES - CONTEXT_BYTES, GiB)
    torch.cuda.set_per_process_memory_fraction(min(1.0, share / total), index)
    _CAPPED[0] = True


def _host_now_peak() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return _ru_maxrss(resource.RUSAGE_SELF)


def _ru_maxrss(who) -> int:
    scale = 1 if sys.platform == "darwin" else 1024      # bytes on macOS, KiB on Linux
    return int(resource.getrusage(who).ru_maxrss) * scale


def _cuda():
    """torch when this process has initialised CUDA (else None: nothing of it to read)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return torch


class Peaks:
    """This process's peaks since ``start()`` (module docstring): ``read()`` ->
    ``{"gpu_peak_bytes": int or None, "host_peak_bytes": int}``."""

    def start(self) -> "Peaks":
        torch = _cuda()
        if torch is not None:
            torch.cuda.reset_peak_memory_stats()
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")                         # resets VmHWM to the current RSS (Linux 4.0+)
        except OSError:
            pass
        return self

    def read(self) -> dict:
        torch = _cuda()
        return {"gpu_peak_bytes": None if torch is None else int(torch.cuda.max_memory_allocated()),
                "gpu_reserved_peak_bytes": None if torch is None else int(torch.cuda.max_memory_reserved()),
                "host_peak_bytes": _host_now_peak()}


def worker_peaks(fn, device, payload) -> dict:
    """The probe (``equiv.run`` runs ``module:function(fn, device, payload)`` beside the
    candidate): the peaks of the process it runs in since the last ask; then reset."""
    got = Peaks().read()
    Peaks().start()
    return got


def stage_memory(**processes) -> dict:
    """A stage's ``memory`` in the gate's JSON: each process's peaks (``gate``: the verdict
    process, ``worker``: the candidate's, ``suite``: the property suite's process) and their
    sums, the most the stage can have held at once (None: no process used a GPU): allocated by
    tensors (``gpu_peak_bytes``) and held from the device by the allocator
    (``gpu_reserved_peak_bytes``, what other processes cannot use)."""
    procs = {name: p for name, p in processes.items() if p}
    gpu = [p["gpu_peak_bytes"] for p in procs.values() if p.get("gpu_peak_bytes") is not None]
    held = [p["gpu_reserved_peak_bytes"] for p in procs.values() if p.get("gpu_reserved_peak_bytes") is not None]
    return {"gpu_peak_bytes": sum(gpu) if gpu else None,
            "gpu_reserved_peak_bytes": sum(held) if held else None,
            "host_peak_bytes": sum(int(p.get("host_peak_bytes") or 0) for p in procs.values()),
            "processes": procs}


def ask_worker(runner) -> dict | None:
    """The peaks of ``runner``'s worker process since the last ask (``worker_peaks``), when it
    runs in one that is alive; None for calls in this process (``Peaks`` counts those)."""
    proc = getattr(runner, "proc", None)
    if runner is None or not getattr(runner, "isolated", False) or proc is None or proc.poll() is not None:
        return None
    got = runner.probe("equiv.memory:worker_peaks", None, timeout=30.0)
    return got.value if got.ok and isinstance(got.value, dict) else None


def measured(run, worker=None):
    """A gate stage ``run(name, checks so far) -> (checks, Stage)`` whose Stage gains its peaks
    (``stage_memory``): this process's from the stage's start, and ``worker()``'s (the
    candidate's worker, ``ask_worker``; asked once before to reset it)."""
    def stage(name, earlier):
        if worker is not None:
            worker()
        peaks = Peaks().start()
        got, st = run(name, earlier)
        return got, replace(st, memory=stage_memory(gate=peaks.read(), worker=worker() if worker is not None else None))
    return stage


PEAKS_ENV = "EQUIV_PEAKS_FILE"       # where a gate's property-suite process writes its peaks


def write_suite_peaks(worker: dict | None = None) -> None:
    """In the suite's process (the plugin, at the session's end): its own peaks over its life and
    its worker's, to the file the gate named in ``PEAKS_ENV`` (nothing when none was named)."""
    path = os.environ.get(PEAKS_ENV)
    if not path:
        return
    with open(path, "w") as f:
        json.dump({"own": Peaks().read(), "worker": worker}, f)


@contextmanager
def suite_peaks():
    """Around a gate: names a file for its suite's process (``PEAKS_ENV``, inherited when the
    suite starts) and yields ``read() -> {"own": ..., "worker": ...} or None``. Gates run in
    threads of one process share the variable, so their suites' figures may mix."""
    folder = tempfile.mkdtemp(prefix="equiv-peaks-")
    path = os.path.join(folder, "suite.json")
    before = os.environ.get(PEAKS_ENV)
    os.environ[PEAKS_ENV] = path

    def read():
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None
    try:
        yield read
    finally:
        if before is None:
            os.environ.pop(PEAKS_ENV, None)
        else:
            os.environ[PEAKS_ENV] = before
        try:
            os.remove(path)
        except OSError:
            pass
        os.rmdir(folder)


def with_suite_memory(stages, suite) -> tuple:
    """``stages`` with the ``properties`` stage's ``memory`` from the suite's report (``suite_peaks``)."""
    if not suite:
        return tuple(stages)
    return tuple(replace(st, memory=stage_memory(suite=suite.get("own"), suite_worker=suite.get("worker")))
                 if st.name == "properties" and st.status in ("pass", "FAIL") else st for st in stages)
