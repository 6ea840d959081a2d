"""The compact trace format ``equiv-mtp-trace/2``: top-k logits per row, rows shared, any V.

Plan. A full trace (``equiv-mtp-trace/1``) stores every logit: ``(1 + S) * V`` numbers a
generated token, 786 KB at V = 49152 in float32. A real engine needs far less to be replayed:
greedy verification reads the target's argmax, and a draft path reads the draft row's top
entries and their probabilities. So a *row* is stored as

- ``topi`` (uint16 when V <= 65536, else int32) and ``topv`` (float16) ``[k]``: the row's ``k``
  largest logits, minus the row's maximum (so the top one is exactly 0 and the values near it
  keep float16's finest steps), in descending order;
- ``lse`` (float32): the row's log-sum-exp, minus the same maximum.

A row is rebuilt (``rows``) as ``V`` logits: the kept ones at their indices and every other one
equal to ``fill = lse + log((1 - sum_kept exp(topv - lse)) / (V - k))``, so the softmax of the
rebuilt row gives each kept token its recorded probability ``exp(topv - lse)`` and spreads the
rest of the mass evenly (where the kept mass rounds to 1, ``fill`` sits 40 below the k-th value).

Rows are deduplicated: target rows are ``[N, T]``; draft rows live in one table ``draft_rows``
and ``draft_index [N, T, S]`` (int32, -1 where absent) points into it, so a self-draft whose
logits at depth ``j`` of a round at ``t`` are its next-token logits after position ``t + j``
stores one row per position instead of ``S``.

File keys (``numpy.savez_compressed``): ``format`` = ``"equiv-mtp-trace/2"``, ``meta`` (JSON, as
in /1, plus ``k``), ``tokens``, ``lengths`` (as in /1), ``vocab`` (int64 scalar),
``target_topi``/``target_topv`` ``[N, T, k]``, ``target_lse`` ``[N, T]``,
``draft_topi``/``draft_topv`` ``[R, k]``, ``draft_lse`` ``[R]``, ``draft_index`` ``[N, T, S]``.
Uncompressed it costs ``k * (2 + index bytes) + 4`` bytes a target row, the same a draft row
and ``4 S`` for the index: ``bytes_per_position(V, k, S, rows_per_position)``. Recording one
from a real model with its KV cache is ``equiv.mtp.live.record_lm``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from equiv.errors import InvalidArgument

FORMAT2 = "equiv-mtp-trace/2"
DEFAULT_K = 32
_FILL_BELOW = 40.0


def index_dtype(vocab: int):
    return np.uint16 if vocab <= 65536 else np.int32


def bytes_per_position(vocab: int, k: int = DEFAULT_K, steps: int = 3, draft_rows: float = 1.0) -> float:
    """Uncompressed bytes a generated position costs: one target row, ``draft_rows`` draft rows
    (1 for a self-draft, ``steps`` when no row repeats) and the draft index."""
    row = k * (2 + np.dtype(index_dtype(vocab)).itemsize) + 4
    return row * (1 + draft_rows) + 4 * steps


@dataclass(frozen=True, eq=False)
class CompactTrace:
    """A loaded ``equiv-mtp-trace/2`` trace (arrays as in the module docstring)."""

    tokens: np.ndarray
    lengths: np.ndarray
    vocab_size: int
    target_topi: np.ndarray
    target_topv: np.ndarray
    target_lse: np.ndarray
    draft_topi: np.ndarray
    draft_topv: np.ndarray
    draft_lse: np.ndarray
    draft_index: np.ndarray
    meta: dict = field(default_factory=dict)
    logits_dtype: str = "float16"

    @property
    def sequences(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def vocab(self) -> int:
        return int(self.vocab_size)

    @property
    def steps(self) -> int:
        return int(self.draft_index.shape[2])

    @property
    def k(self) -> int:
        return int(self.target_topi.shape[-1])

    def to_json(self) -> dict:
        return {"format": FORMAT2, "sequences": self.sequences, "vocab": self.vocab,
                "steps": self.steps, "k": self.k, "tokens": int(self.lengths.sum()),
                "draft_rows": int(self.draft_lse.shape[0]), "meta": self.meta}

    def arrays(self) -> dict:
        return {"tokens": self.tokens.astype(np.int64), "lengths": self.lengths.astype(np.int64),
                "vocab": np.array(self.vocab, dtype=np.int64),
                "target_topi": self.target_topi, "target_topv": self.target_topv,
                "target_lse": self.target_lse, "draft_topi": self.draft_topi,
                "draft_topv": self.draft_topv, "draft_lse": self.draft_lse,
                "draft_index": self.draft_index}


def top_rows(logits, k: int):
    """``(topi, topv, lse)`` of float rows ``[..., V]`` (torch or NumPy), as the format stores them."""
    x = torch.as_tensor(logits).float()
    V = x.shape[-1]
    k = min(k, V)
    top = torch.topk(x, k, dim=-1)
    mx = top.values[..., :1]
    lse = torch.logsumexp(x - mx, dim=-1)
    return (top.indices.cpu().numpy().astype(index_dtype(V)),
            (top.values - mx).to(torch.float16).cpu().numpy(), lse.cpu().numpy().astype(np.float32))


def rows(topi, topv, lse, vocab: int):
    """Rebuild ``[..., V]`` float32 logits from stored rows (torch tensors; module docstring)."""
    v = topv.float()
    lse = lse.float()
    k = v.shape[-1]
    kept = torch.exp(v - lse[..., None]).sum(-1)
    rest = (1.0 - kept).clamp_min(0.0)
    if vocab > k:
        fill = torch.where(rest > 1e-30, lse + torch.log(rest.clamp_min(1e-30) / (vocab - k)),
                           v[..., -1] - _FILL_BELOW)
    else:
        fill = torch.zeros_like(lse)
    out = fill[..., None].expand(*v.shape[:-1], vocab).clone()
    return out.scatter_(-1, topi.to(torch.int64), v)


def _as_float(array, logits_dtype: str):
    """float32 torch tensor of a /1 trace's logits (bfloat16 is stored as its raw uint16 bits)."""
    if logits_dtype == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(array).view(np.int16)).view(torch.bfloat16).float()
    return torch.from_numpy(np.ascontiguousarray(array)).float()


def compact(trace, k: int = DEFAULT_K, meta: dict | None = None) -> CompactTrace:
    """A full ``Trace`` (``equiv-mtp-trace/1``) as a ``CompactTrace``, identical draft rows stored
    once (compared bit for bit)."""
    if not isinstance(k, int) or k < 1:
        raise InvalidArgument(f"k={k!r} is invalid: it must be an integer >= 1")
    target = _as_float(trace.target_logits, trace.logits_dtype)
    ti, tv, tl = top_rows(target, k)
    draft = _as_float(trace.draft_logits, trace.logits_dtype)
    N, T, S, V = draft.shape
    flat = draft.reshape(-1, V)
    present = np.zeros(N * T * S, dtype=bool)
    lens = trace.lengths
    for b in range(N):
        for j in range(S):
            present[(b * T + np.arange(max(int(lens[b]) - j, 0))) * S + j] = True
    index = np.full(N * T * S, -1, dtype=np.int32)
    seen, order = {}, []
    for i in np.flatnonzero(present):
        key = flat[i].numpy().tobytes()
        row = seen.get(key)
        if row is None:
            row = seen[key] = len(order)
            order.append(int(i))
        index[i] = row
    di, dv, dl = top_rows(flat[order] if order else flat[:0], k)
    return CompactTrace(trace.tokens.astype(np.int64), trace.lengths.astype(np.int64), V, ti, tv, tl,
                        di, dv, dl, index.reshape(N, T, S),
                        dict(trace.meta, **(meta or {}), k=int(min(k, V)), made_from=trace.logits_dtype))


def validate_compact(tr: CompactTrace) -> CompactTrace:
    """Shapes, dtypes, index ranges, and every token the argmax of its rebuilt target row."""
    N, T = tr.tokens.shape
    k = tr.k
    if tr.lengths.shape != (N,) or (tr.lengths < 0).any() or (tr.lengths > T).any():
        raise InvalidArgument(f"trace lengths {tr.lengths.shape} must be [N={N}] within 0..{T}")
    if tr.vocab < 2 or k > tr.vocab:
        raise InvalidArgument(f"trace vocab={tr.vocab} and k={k} must satisfy 2 <= V and k <= V")
    for name, arr, shape in (("target_topi", tr.target_topi, (N, T, k)), ("target_topv", tr.target_topv, (N, T, k)),
                             ("target_lse", tr.target_lse, (N, T)),
                             ("draft_topv", tr.draft_topv, tr.draft_topi.shape),
                             ("draft_lse", tr.draft_lse, tr.draft_topi.shape[:1])):
        if arr.shape != shape:
            raise InvalidArgument(f"trace {name} {arr.shape} must be {shape}")
    if tr.draft_index.ndim != 3 or tr.draft_index.shape[:2] != (N, T) or tr.draft_index.shape[2] < 1:
        raise InvalidArgument(f"trace draft_index {tr.draft_index.shape} must be [N={N}, T={T}, S >= 1]")
    R = tr.draft_lse.shape[0]
    if (tr.draft_index < -1).any() or (tr.draft_index >= R).any():
        raise InvalidArgument(f"trace draft_index must point into the {R} draft rows (or be -1)")
    for name, idx in (("target_topi", tr.target_topi), ("draft_topi", tr.draft_topi)):
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= tr.vocab):
            raise InvalidArgument(f"trace {name} holds indices outside [0, {tr.vocab})")
    for name, arr in (("target_topv", tr.target_topv), ("target_lse", tr.target_lse)):
        if not np.isfinite(arr.astype(np.float32)).all():
            raise InvalidArgument(f"trace {name} holds NaN or inf: the target of a trace must be healthy")
    argmax = rows(torch.from_numpy(tr.target_topi.astype(np.int64)), torch.from_numpy(tr.target_topv),
                  torch.from_numpy(tr.target_lse), tr.vocab).argmax(-1).numpy()
    for b in range(N):
        n = int(tr.lengths[b])
        bad = np.flatnonzero(argmax[b, :n] != tr.tokens[b, :n])
        if bad.size:
            t = int(bad[0])
            raise InvalidArgument(f"trace sequence {b} position {t}: token {int(tr.tokens[b, t])} is not "
                                  f"the argmax {int(argmax[b, t])} of its stored target row")
    return tr


def from_arrays(arrays: dict, meta: dict) -> CompactTrace:
    missing = [k for k in ("tokens", "lengths", "vocab", "target_topi", "target_topv", "target_lse",
                           "draft_topi", "draft_topv", "draft_lse", "draft_index") if k not in arrays]
    if missing:
        raise InvalidArgument(f"lacks {', '.join(missing)}: not an {FORMAT2} file")
    return validate_compact(CompactTrace(
        arrays["tokens"], arrays["lengths"], int(arrays["vocab"]), arrays["target_topi"],
        arrays["target_topv"], arrays["target_lse"], arrays["draft_topi"], arrays["draft_topv"],
        arrays["draft_lse"], arrays["draft_index"], meta))


def stored_bytes(tr: CompactTrace) -> int:
    """Uncompressed bytes of a compact trace's arrays."""
    return int(sum(a.nbytes for a in tr.arrays().values()))


def describe_size(tr: CompactTrace) -> dict:
    positions = int(tr.lengths.sum())
    return {"bytes": stored_bytes(tr), "positions": positions,
            "bytes_per_position": round(stored_bytes(tr) / max(positions, 1), 1),
            "full_float32_bytes_per_position": (1 + tr.steps) * tr.vocab * 4,
            "log2_vocab": round(math.log2(tr.vocab), 2)}
