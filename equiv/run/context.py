"""The calling context of one call: the autograd mode, the thread and (on a GPU) the stream.

An engine calls a kernel under ``torch.inference_mode()``, a trainer's evaluation loop under
``torch.no_grad()``, a test with grad enabled, a serving framework from a thread other than the
main one, and a CUDA-graph or overlap scheduler on a stream other than the default one. A kernel
can be right in one of these and wrong in another (a fast path keyed on ``torch.is_grad_enabled()``
or ``torch.is_inference_mode_enabled()``, state kept per thread, a launch on the default stream
while its input was written on the current one). The context is a field of the call: whoever
draws the calls (an op's plan) names it, and ``call_in`` (``equiv.run.seeded``, with torch)
applies it where the call happens (the candidate's worker, ``equiv.run.invoke``, or a probe that
calls the candidate many times). This module, the names, is read without torch (the registry).

Plan
----
- ``CONTEXTS``: ``grad`` (grad enabled, outside inference mode), ``no_grad``, ``inference_mode``,
  ``thread`` (a long-lived thread other than the main one, one per process, as a server's worker
  thread is; its autograd state is a fresh thread's: grad enabled, no inference mode) and
  ``side_stream`` (GPU only: a CUDA stream other than the current one, which first waits for the
  current stream, as an overlap scheduler's does; the caller's stream waits for it after).
  Each of the first three is set explicitly, so a context holds inside a caller that is itself
  in inference mode (the MTP decoder).
- ``available(device)``: the contexts a device offers (``side_stream`` on CUDA only).
- ``call_in(context, fn, args, device)`` (``equiv.run.seeded``): ``fn(*args)`` in that context; an exception of any kind
  raised in the thread is raised again in the caller's, so a candidate cannot end the run from a
  thread either. ``None`` is the caller's own context (the worker's main thread, grad enabled).
- ``check_context`` turns a name into one, or a one-line ``InvalidArgument`` naming the choices.
"""
from __future__ import annotations

from equiv.errors import InvalidArgument

CONTEXTS = ("grad", "no_grad", "inference_mode", "thread", "side_stream")
GPU_ONLY = ("side_stream",)


def available(device) -> tuple:
    """The contexts ``device`` offers, in ``CONTEXTS`` order."""
    gpu = str(device).startswith("cuda")
    return tuple(c for c in CONTEXTS if gpu or c not in GPU_ONLY)


def check_context(name, device=None):
    """``name`` if it is a context (and ``device`` offers it), else a one-line ``InvalidArgument``."""
    if name is None:
        return None
    choices = CONTEXTS if device is None else available(device)
    if name not in choices:
        extra = " (side_stream needs a CUDA device)" if name in GPU_ONLY else ""
        raise InvalidArgument(f"context={name!r} is invalid{extra}: give one of {', '.join(choices)}")
    return name
