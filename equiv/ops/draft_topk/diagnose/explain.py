"""What a defect explains: which rows of another observation its cause accounts for.

Plan
----
A failure that an earlier defect explains is not a new defect. Each defect gets a *scope* when it
is found (``scope_of``): the fault bits it produced at its trigger and the condition under which
it acts, read off the isolation's facts. ``explained(scope, obs, prober)`` returns, for one
observation, the fault bits per row that the defect accounts for, and whether it accounts for the
contract outcome and for the regression rule:

- contract kinds (hang, crash, input written, output format): the same contract outcome;
- out-of-vocabulary index: rows with an index outside ``[0, V)`` (poisoned rows only, when it
  was seen only on poisoned rows);
- placeholder probability: rows whose topk_p is the constant (value and poisoning faults);
- wrong index: rows whose index stands in the same relation to the exact one (an offset d --
  which also covers an index pushed past V --, the rank-r token, or any index fault when no
  relation holds), with their value faults;
- non-contiguous / misaligned base: by the complement -- the faults that vanish when the same
  values are contiguous / start at the base of their storage;
- mask position: rows with a -inf entry before a finite one, any wrong answer there;
- confident rounding: rows answered exactly 1.0 where the exact probability is below 1;
- vocabulary-specific: inputs at or past the failing V, other than the sizes seen passing;
- output reused, after N calls: nothing in one call (only the call history shows them);
- stale output: by the complement -- another input of the same shape gets the same answer;
- neighbour rows: by the complement -- the failing row's answer moves when it is answered alone
  or among other neighbours;
- batch size, shape threshold, dtype, magnitude: inputs past the threshold (B -- all faults of
  the rows past it when only those rows failed --, V, the dtype, the largest finite |logit|):
  any wrong answer of a healthy row there (index, value, non-finite beside poison), and the
  other fault bits seen at the trigger;
- poison leak / poisoned row made finite: healthy rows beside poisoned ones / poisoned rows.
The complements cost a call each and are cached by the prober.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from equiv.ops.draft_topk.diagnose.isolate import (STATUS_KIND, _ranks, answer_ignores_input, neighbours_matter, rank_relation,
                                    rounded_to_one)
from equiv.ops.draft_topk.diagnose.probe import INDEX, LEAK, OOV, POISON, VALUE, RawInput

ALL = OOV | INDEX | VALUE | POISON | LEAK
_STATUS_OF = {v: k for k, v in STATUS_KIND.items()}


@dataclass(frozen=True)
class Explained:
    rows: np.ndarray          # [B] fault bits accounted for
    status: bool = False
    regression: bool = False


def _magnitude(inputs) -> float:
    x = inputs.build("cpu").float().numpy()
    finite = np.abs(x[np.isfinite(x)])
    return float(finite.max()) if finite.size else 0.0


def _row_magnitude(obs) -> np.ndarray:
    x = np.where(np.isfinite(obs.ref.rows), np.abs(obs.ref.rows), 0.0)
    return x.max(axis=1) if x.size else np.zeros(0)


def scope_of(finding) -> dict:
    """The condition and fault bits under which the defect of ``finding`` acts."""
    t = finding.trigger
    bits = int(np.bitwise_or.reduce(t.faults)) if t.faults is not None and t.faults.size else 0
    scope = {"kind": finding.kind, "bits": bits or ALL}
    kind = finding.kind
    if kind == "out_of_vocabulary_index":
        rows = t.rows_with(OOV)
        scope["poisoned_only"] = bool(rows.size) and bool(t.ref.poisoned[rows].all())
    elif kind == "placeholder_probability":
        scope["constant"] = finding.facts["constant"]
    elif kind in ("wrong_index", "rank_order"):
        scope["relation"] = (finding.facts.get("relation", ("any",)) if kind == "wrong_index"
                             else ("order", rank_relation(t)))
    elif kind == "batch_size":
        rows = t.rows_with(ALL)
        scope["min_batch"] = t.inputs.batch
        scope["rows_from"] = int(rows.min()) if rows.size and rows.min() > 0 else 0
    elif kind == "shape_threshold":
        scope["min_vocab"] = t.inputs.vocab
    elif kind == "vocab_specific":
        scope["min_vocab"] = t.inputs.vocab
        scope["passes_at"] = tuple(o.inputs.vocab for f, o in finding.necessary if f == "vocab above")
    elif kind == "dtype_specific":
        scope["dtypes"] = (t.inputs.dtype,)
    elif kind == "neighbour_rows":
        moved = dict(finding.necessary).get("neighbours")
        scope["how"] = getattr(moved, "how", 0) if moved is not None else 0
    elif kind == "magnitude":
        passing = [o for f, o in finding.necessary if o is not None]
        scope["above"] = max([_magnitude(o.inputs) for o in passing] or [_magnitude(t.inputs) / 2])
    return scope


# Kinds named by an input feature (a threshold, a dtype, a magnitude): on inputs with the feature
# they account for any wrong answer of a healthy row, not only the way it showed at the trigger.
_FEATURE_KINDS = ("batch_size", "shape_threshold", "vocab_specific", "dtype_specific", "magnitude",
                  "mask_position")
# Kinds seen only in a history of calls (``equiv.ops.draft_topk.diagnose.calls``): they account for that check
# alone, never for the rows of one call.
HISTORY_KINDS = ("output_reused", "after_n_calls")
# Kinds explained by a complement: the same values in another layout.
_LAYOUT = {"non_contiguous": "pad", "misaligned_base": "offset"}


def merge_scopes(a: dict, b: dict) -> dict:
    """One scope for two findings of the same kind: the wider condition of the two."""
    out = dict(a, bits=a["bits"] | b["bits"])
    for key, pick in (("min_batch", min), ("rows_from", min), ("min_vocab", min), ("above", min)):
        if key in a and key in b:
            out[key] = pick(a[key], b[key])
    if "dtypes" in a:
        out["dtypes"] = tuple(dict.fromkeys(a["dtypes"] + b["dtypes"]))
    if "poisoned_only" in a:
        out["poisoned_only"] = a["poisoned_only"] and b["poisoned_only"]
    if "relation" in a:               # a second finding exists because the first relation fell short
        out["relation"] = ("any",) if a["relation"][0] != "order" else a["relation"]
    return out


def explained(scope: dict, obs, prober) -> Explained:
    """The part of ``obs`` the defect of ``scope`` accounts for (module docstring)."""
    batch = obs.inputs.batch
    none = Explained(np.zeros(batch, dtype=np.int64))
    kind = scope["kind"]
    if kind in _STATUS_OF:
        return Explained(none.rows, status=obs.status == _STATUS_OF[kind])
    if kind in HISTORY_KINDS:
        return none
    if kind == "stale_output":
        return _stale(obs, prober, none)
    layout = _LAYOUT.get(kind)
    laid_out = layout is not None and getattr(obs.inputs, layout, 0)
    if obs.faults is None:
        if laid_out:
            other = prober.observe(_plain_layout(obs.inputs, layout))
            return Explained(none.rows, status=other.status in ("pass", "fail"))
        return none
    f = obs.faults
    rows = np.zeros(batch, dtype=bool)
    bits = scope["bits"]
    if kind in _FEATURE_KINDS:        # a wrong answer on a healthy row, whichever way it shows
        bits |= INDEX | VALUE | LEAK
    if kind == "out_of_vocabulary_index":
        rows = (f & OOV) != 0
        if scope["poisoned_only"]:
            rows &= obs.ref.poisoned
        bits = ALL
    elif kind == "placeholder_probability":
        rows = (obs.p == scope["constant"]).all(axis=1)
        bits = VALUE | POISON
    elif kind in ("wrong_index", "rank_order"):
        rows = _relation_rows(scope["relation"], obs)
        bits = INDEX | VALUE | (OOV if scope["relation"][0] == "offset" else 0)
    elif kind == "value_error":
        rows, bits = (f & INDEX) == 0, VALUE
    elif layout is not None:
        if laid_out:
            other = prober.observe(_plain_layout(obs.inputs, layout))
            gone = f & ~(other.faults if other.faults is not None else 0)
            return Explained(gone, regression=bool((gone & VALUE).any()))
    elif kind == "neighbour_rows":
        if _moves_alone(prober, obs) or neighbours_matter(prober, obs, np.flatnonzero(f),
                                                         first=scope.get("how", 0)) is not None:
            rows, bits = f != 0, ALL
    elif kind == "batch_size":
        if batch >= scope["min_batch"]:
            rows = np.arange(batch) >= scope["rows_from"]
            bits = ALL if scope["rows_from"] else bits
    elif kind == "shape_threshold":
        rows[:] = obs.inputs.vocab >= scope["min_vocab"]
    elif kind == "vocab_specific":
        rows[:] = obs.inputs.vocab >= scope["min_vocab"] and obs.inputs.vocab not in scope["passes_at"]
    elif kind == "mask_position":
        rows = _masked_before_finite(obs.ref.rows)
    elif kind == "confident_rounding":
        rows, bits = rounded_to_one(obs), VALUE
    elif kind == "dtype_specific":
        rows[:] = obs.inputs.dtype in scope["dtypes"]
    elif kind == "magnitude":
        rows = _row_magnitude(obs) > scope["above"]
    elif kind == "poison_leak":
        rows = ~obs.ref.poisoned & obs.ref.poisoned.any()
        bits = LEAK | INDEX | VALUE
    elif kind == "poison_made_finite":
        rows, bits = obs.ref.poisoned, POISON
    if bits & VALUE:                  # a healthy row beside poison is wrong for its own reason too
        bits |= LEAK
    got = np.where(rows, f & bits, 0)
    # the regression rule is one number per batch: a value defect acting on a row accounts for it
    acts_on_values = bool(bits & VALUE) and bool(np.asarray(rows).any())
    return Explained(got, regression=acts_on_values or kind == "value_error")


def _relation_rows(relation, obs) -> np.ndarray:
    f = obs.faults
    if relation[0] == "offset":
        return ((obs.idx - obs.ref.topk_index) == relation[1]).all(axis=1) & (f != 0)
    if relation[0] == "rank":
        rows = np.flatnonzero(f & INDEX)
        ranks = _ranks(obs, rows)
        out = np.zeros(f.shape, dtype=bool)
        if ranks is not None:
            out[rows[ranks == relation[1]]] = True
        return out
    if relation[0] == "order":
        return ((f & INDEX) != 0) if rank_relation(obs) == relation[1] else np.zeros(f.shape, dtype=bool)
    return (f & INDEX) != 0


def _moves_alone(prober, obs) -> bool:
    """The first failing row of a batch answered alone (B = 1) gets another answer: once a defect
    is known to read other rows, the cheapest way to see that it acts here."""
    rows = np.flatnonzero(obs.faults)
    if obs.inputs.batch < 2 or rows.size == 0 or obs.p is None:
        return False
    b = int(rows[0])
    x = obs.ref.rows[b:b + 1].astype(np.float32)
    alone = prober.observe(RawInput(x, obs.inputs.dtype, obs.inputs.pad, f"row {b} of {obs.inputs} alone"))
    if alone.p is None:
        return False
    return bool((alone.idx[0] != obs.idx[b]).any()) or not np.allclose(
        alone.p[0], obs.p[b], rtol=2.0 ** -13, atol=0.0, equal_nan=True)


def _plain_layout(inputs, layout: str):
    """The same values without the padding (``pad``) or the base offset (``offset``)."""
    if isinstance(inputs, RawInput):
        return RawInput(inputs.values, inputs.dtype, 0, inputs.label)
    return inputs.with_(**{layout: 0})


def _masked_before_finite(x) -> np.ndarray:
    """[B] rows holding a -inf entry before a finite one (a mask not only at the end of the row)."""
    finite = np.isfinite(x)
    last = x.shape[1] - 1 - np.argmax(finite[:, ::-1], axis=1)          # the last finite column
    cols = np.arange(x.shape[1])[None, :]
    return (np.isneginf(x) & (cols < last[:, None])).any(axis=1) & finite.any(axis=1)


def _stale(obs, prober, none) -> Explained:
    """Other logits of the same shape get the same answer: everything in ``obs`` is stale."""
    if not answer_ignores_input(prober, obs):
        return none
    return Explained(obs.faults.copy() if obs.faults is not None else none.rows, status=True,
                     regression=True)
