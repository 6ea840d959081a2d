"""Recorded draft/target logits traces: the file format, a loader, a recorder and a model.

Plan. A trace is what a real engine saw along a greedy generation: for each recorded sequence,
the target's next-token logits at every generated position and the draft's logits for every
(round start, draft depth). ``TraceLM`` replays it through the same decoding loop as the
synthetic model (teacher-forced: a context is a position in the trace).

File format ``equiv-mtp-trace/1``: a NumPy ``.npz`` (``numpy.savez_compressed``) holding

| key | dtype, shape | meaning |
|---|---|---|
| ``format`` | str scalar | ``"equiv-mtp-trace/1"`` |
| ``meta`` | str scalar | JSON object: ``logits_dtype`` (float32, float16 or bfloat16), ``source`` (how it was made), anything else |
| ``tokens`` | int64 ``[N, T]`` | the generated tokens; ``tokens[b, t]`` is the target's argmax of ``target_logits[b, t]``; -1 past ``lengths[b]`` |
| ``lengths`` | int64 ``[N]`` | generated tokens per sequence (<= T) |
| ``target_logits`` | ``[N, T, V]`` | target logits predicting ``tokens[b, t]`` from the prompt and ``tokens[b, :t]`` |
| ``draft_logits`` | ``[N, T, S, V]`` | draft logits at depth ``j`` of a round starting at ``t``, predicting ``tokens[b, t + j]`` from the prompt and ``tokens[b, :t + j]`` (for an MTP head: fed the target's state at ``t``); zero where ``t + j >= lengths[b]`` |

Logits are float32 or float16 arrays, or, for bfloat16, uint16 arrays of the raw bfloat16 bits.
An engine records a trace in one teacher-forced pass per draft depth over its own greedy output.

Replay is exact for greedy verification: a drafted token is accepted only if it equals the
target's argmax, which is the recorded token, so the context never leaves the trace while tokens
are accepted. After a rejection the later drafts of that round are read at the recorded
positions; they are never accepted, and only the ``confidence`` consumer's count of proposed
tokens depends on them. Stochastic (``target_only``) and ``tree`` verification leave the trace
and are not applicable to one.

The compact format ``equiv-mtp-trace/2`` (top-k logits per row, rows shared, any V) is
``equiv.mtp.compact``; ``load_trace`` reads either format, ``save_trace`` writes either, and
``TraceLM`` replays either (a compact row is rebuilt to V logits when it is read).
"""
from __future__ import annotations

import inspect
import io
import json
from dataclasses import dataclass, field

import numpy as np
import torch

from equiv.atomic import atomic_write
from equiv.errors import InvalidArgument
from equiv.mtp.compact import FORMAT2, CompactTrace, from_arrays, rows, validate_compact

FORMAT = "equiv-mtp-trace/1"
LOGITS_DTYPES = ("float32", "float16", "bfloat16")
TRACE_CONSUMERS = ("greedy", "confidence")


@dataclass(frozen=True, eq=False)
class Trace:
    """A loaded trace (arrays as in the module docstring, logits as stored)."""

    tokens: np.ndarray
    lengths: np.ndarray
    target_logits: np.ndarray
    draft_logits: np.ndarray
    logits_dtype: str = "float32"
    meta: dict = field(default_factory=dict)

    @property
    def sequences(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def vocab(self) -> int:
        return int(self.target_logits.shape[-1])

    @property
    def steps(self) -> int:
        return int(self.draft_logits.shape[2])

    def to_json(self) -> dict:
        return {"format": FORMAT, "sequences": self.sequences, "vocab": self.vocab,
                "steps": self.steps, "tokens": int(self.lengths.sum()),
                "logits_dtype": self.logits_dtype, "meta": self.meta}


def _to_torch(array, logits_dtype: str):
    if logits_dtype == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(array).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(array))


def _to_numpy(tensor, logits_dtype: str):
    t = tensor.detach().cpu().to(getattr(torch, logits_dtype))
    if logits_dtype == "bfloat16":
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def validate(trace: Trace) -> Trace:
    """Check shapes, dtypes and that every token is its target's argmax; returns the trace."""
    tok, lens, tgt, dft = trace.tokens, trace.lengths, trace.target_logits, trace.draft_logits
    if trace.logits_dtype not in LOGITS_DTYPES:
        raise InvalidArgument(f"trace logits_dtype={trace.logits_dtype!r} is unknown: "
                              f"choose from {', '.join(LOGITS_DTYPES)}")
    if tok.ndim != 2 or lens.shape != tok.shape[:1]:
        raise InvalidArgument(f"trace tokens {tok.shape} / lengths {lens.shape} must be [N, T] / [N]")
    N, T = tok.shape
    if tgt.ndim != 3 or tgt.shape[:2] != (N, T) or tgt.shape[2] < 2:
        raise InvalidArgument(f"trace target_logits {tgt.shape} must be [N={N}, T={T}, V >= 2]")
    V = tgt.shape[2]
    if dft.ndim != 4 or dft.shape[:2] != (N, T) or dft.shape[3] != V or dft.shape[2] < 1:
        raise InvalidArgument(f"trace draft_logits {dft.shape} must be [N={N}, T={T}, S >= 1, V={V}]")
    if (lens < 0).any() or (lens > T).any():
        raise InvalidArgument(f"trace lengths must lie in 0..{T}, got {lens.tolist()}")
    target = _to_torch(tgt, trace.logits_dtype).float()
    if torch.isnan(target).any():
        raise InvalidArgument("trace target_logits hold NaN: the target of a trace must be healthy")
    argmax = target.argmax(-1).numpy()
    for b in range(N):
        n = int(lens[b])
        bad = np.flatnonzero(argmax[b, :n] != tok[b, :n])
        if bad.size:
            t = int(bad[0])
            raise InvalidArgument(
                f"trace sequence {b} position {t}: token {int(tok[b, t])} is not the target's "
                f"argmax {int(argmax[b, t])}; a trace must be recorded with greedy decoding")
    return trace


def save_trace(trace: Trace, path) -> str:
    """Write ``trace`` to ``path`` (``.npz``) atomically."""
    buf = io.BytesIO()
    if isinstance(trace, CompactTrace):
        validate_compact(trace)
        np.savez_compressed(buf, format=np.array(FORMAT2),
                            meta=np.array(json.dumps(trace.meta, sort_keys=True)), **trace.arrays())
        return atomic_write(path, buf.getvalue(), mode="wb")
    validate(trace)
    meta = dict(trace.meta, logits_dtype=trace.logits_dtype)
    np.savez_compressed(buf, format=np.array(FORMAT), meta=np.array(json.dumps(meta, sort_keys=True)),
                        tokens=trace.tokens.astype(np.int64), lengths=trace.lengths.astype(np.int64),
                        target_logits=trace.target_logits, draft_logits=trace.draft_logits)
    return atomic_write(path, buf.getvalue(), mode="wb")


def load_trace(path) -> Trace:
    """Read and validate a trace file (``equiv-mtp-trace/1`` or ``/2``); every problem is an
    ``InvalidArgument`` naming the file."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except FileNotFoundError:
        raise InvalidArgument(f"trace {str(path)!r}: no such file") from None
    except Exception as exc:
        raise InvalidArgument(f"trace {str(path)!r} is not a readable .npz: {exc}") from None
    if "format" in arrays and str(arrays["format"]) == FORMAT2 and "meta" in arrays:
        try:
            return from_arrays(arrays, json.loads(str(arrays["meta"])))
        except InvalidArgument as exc:
            raise InvalidArgument(f"trace {str(path)!r}: {exc}") from None
    missing = [k for k in ("format", "meta", "tokens", "lengths", "target_logits", "draft_logits")
               if k not in arrays]
    if missing:
        raise InvalidArgument(f"trace {str(path)!r} lacks {', '.join(missing)}: not an {FORMAT} file")
    if str(arrays["format"]) != FORMAT:
        raise InvalidArgument(f"trace {str(path)!r} has format {str(arrays['format'])!r}, "
                              f"this equiv reads {FORMAT!r} and {FORMAT2!r}")
    meta = json.loads(str(arrays["meta"]))
    dtype = meta.pop("logits_dtype", "float32")
    try:
        return validate(Trace(arrays["tokens"], arrays["lengths"], arrays["target_logits"],
                              arrays["draft_logits"], dtype, meta))
    except InvalidArgument as exc:
        raise InvalidArgument(f"trace {str(path)!r}: {exc}") from None


def _last_logits(out):
    """``[L, V]`` logits from a module output: a tensor ``[1, L, V]``/``[L, V]``, a tuple whose
    first item is one, or an object with ``.logits`` (Hugging Face)."""
    out = getattr(out, "logits", out)
    if isinstance(out, (tuple, list)):
        out = out[0]
    if out.dim() == 3:
        if out.shape[0] != 1:
            raise InvalidArgument(f"module returned logits of shape {tuple(out.shape)} for one "
                                  f"sequence: expected [1, L, V]")
        out = out[0]
    if out.dim() != 2:
        raise InvalidArgument(f"module returned logits of shape {tuple(out.shape)}: expected [1, L, V]")
    return out


def record_trace(target, draft, prompts, length: int, steps: int = 3, *,
                 logits_dtype: str = "float32", meta: dict | None = None) -> Trace:
    """Record a trace from torch modules (or callables) mapping ``input_ids [1, L]`` to logits
    ``[1, L, V]``. ``target`` generates ``length`` tokens greedily after each prompt (a list of
    token-id lists); ``draft`` (causal: position ``i`` sees ids ``0..i``) is run teacher-forced
    over each result once per depth, with ``depth=j`` when it takes a ``depth`` argument."""
    if logits_dtype not in LOGITS_DTYPES:
        raise InvalidArgument(f"logits_dtype={logits_dtype!r} is unknown: choose from "
                              f"{', '.join(LOGITS_DTYPES)}")
    if not prompts or any(len(p) == 0 for p in prompts):
        raise InvalidArgument("prompts must be a non-empty list of non-empty token-id lists")
    takes_depth = "depth" in inspect.signature(getattr(draft, "forward", draft)).parameters
    dt = getattr(torch, logits_dtype)
    targets, drafts, tokens = [], [], []
    with torch.inference_mode():
        for prompt in prompts:
            ids = [int(t) for t in prompt]
            rows = []
            for _ in range(length):
                row = _last_logits(target(torch.tensor([ids])))[-1].to(dt)
                rows.append(row)
                ids.append(int(row.float().argmax()))
            P, V = len(prompt), rows[0].shape[-1] if rows else 0
            full = torch.tensor([ids])
            d = torch.zeros(length, steps, V, dtype=dt)
            for j in range(steps):
                out = _last_logits(draft(full, depth=j) if takes_depth else draft(full))
                for t in range(length - j):
                    d[t, j] = out[P + t + j - 1].to(dt)     # predicts ids[P + t + j]
            targets.append(torch.stack(rows))
            drafts.append(d)
            tokens.append(ids[P:])
    trace = Trace(np.array(tokens, dtype=np.int64).reshape(len(prompts), length),
                  np.full(len(prompts), length, dtype=np.int64),
                  np.stack([_to_numpy(t, logits_dtype) for t in targets]),
                  np.stack([_to_numpy(d, logits_dtype) for d in drafts]),
                  logits_dtype, dict(meta or {}))
    return validate(trace)


class TraceLM:
    """The decoding loop's model interface over a ``Trace`` (see the module docstring).

    A context is ``sequence * (T + 1) + position``; appending any token advances the position."""

    kind = "trace"

    def __init__(self, trace: Trace, device="cpu"):
        self.trace = trace
        self.vocab = trace.vocab
        self.device = torch.device(device)
        self._T = trace.tokens.shape[1]
        self._lengths = torch.from_numpy(trace.lengths).to(self.device)
        self._compact = isinstance(trace, CompactTrace)
        if self._compact:
            t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(self.device)   # noqa: E731
            self._tt = (t(trace.target_topi.astype(np.int64)), t(trace.target_topv), t(trace.target_lse))
            self._dt = (t(trace.draft_topi.astype(np.int64)), t(trace.draft_topv), t(trace.draft_lse))
            self._index = t(trace.draft_index.astype(np.int64))
            return
        self._target = _to_torch(trace.target_logits, trace.logits_dtype).to(self.device)
        self._draft = _to_torch(trace.draft_logits, trace.logits_dtype).to(self.device)

    def supports(self, consumer: str) -> bool:
        return consumer in TRACE_CONSUMERS

    def initial_contexts(self, n: int):
        if n > self.trace.sequences:
            raise InvalidArgument(f"sequences={n} is more than the trace's {self.trace.sequences}")
        return torch.arange(n, dtype=torch.int64, device=self.device) * (self._T + 1)

    def next_context(self, ctx, tokens):
        return torch.where(ctx % (self._T + 1) < self._T, ctx + 1, ctx)    # stays at the end

    def _split(self, ctx):
        return ctx // (self._T + 1), ctx % (self._T + 1)

    def active(self, ctx, steps: int):
        seq, pos = self._split(ctx)
        return pos + steps < self._lengths[seq]

    def target_logits(self, ctx):
        seq, pos = self._split(ctx)
        pos = pos.clamp(max=self._T - 1)
        if self._compact:
            i, v, lse = (a[seq, pos] for a in self._tt)
            return rows(i, v, lse, self.vocab)
        return self._target[seq, pos].float()

    def draft_logits(self, ctx, depth: int):
        seq, pos = self._split(ctx)
        start = (pos - depth).clamp(0, self._T - 1)
        if self._compact:
            row = self._index[seq, start, depth]
            i, v, lse = (a[row.clamp(min=0)] for a in self._dt)
            return rows(i, v, lse, self.vocab) * (row >= 0)[:, None]     # absent: zeros, as in /1
        return self._draft[seq, start, depth].float()

    def describe(self) -> dict:
        return {"kind": self.kind, **self.trace.to_json()}
