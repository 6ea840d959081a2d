"""Acceptance metrics with the serving engines' definitions, from one decode's raw counts.

Plan. Over the verify rounds that ran (``DecodeOutcome.active``):
- ``accept_length``: accepted draft tokens + 1 bonus token, per verify round (SGLang's
  "accept length"; vLLM's "mean acceptance length");
- ``accept_rate``: accepted / proposed draft tokens (None when nothing was proposed);
- ``per_position[j]``: the fraction of rounds whose draft position ``j`` was accepted, i.e. vLLM's
  ``num_accepted_tokens_per_pos[j] / num_drafts`` (unconditional: it falls with ``j``);
- ``histogram[a]``: how many rounds accepted exactly ``a`` drafts, ``a = 0..steps``;
- ``drafted_per_emitted``: proposed draft tokens per emitted token;
- ``invalid_output_rate``: the share of the path's outputs (every returned (index, p) slot) with
  an index outside ``[0, V)`` or a NaN probability.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from equiv.errors import InvalidArgument


@dataclass(frozen=True)
class AcceptanceMetrics:
    rounds: int
    emitted_tokens: int
    proposed_tokens: int
    accepted_tokens: int
    accept_length: float
    accept_rate: float | None
    per_position: tuple
    histogram: tuple
    drafted_per_emitted: float
    invalid_outputs: int
    draft_outputs: int
    invalid_output_rate: float

    def to_json(self) -> dict:
        out = asdict(self)
        for k in ("accept_length", "accept_rate", "drafted_per_emitted", "invalid_output_rate"):
            if out[k] is not None:
                out[k] = round(out[k], 6)
        out["per_position"] = [round(v, 6) for v in self.per_position]
        out["histogram"] = list(self.histogram)
        return out


def acceptance_metrics(outcome) -> AcceptanceMetrics:
    """The metrics of one ``DecodeOutcome``; raises if no round ran."""
    act = outcome.active
    acc = outcome.accepted[act]
    rounds = int(act.sum())
    if rounds == 0:
        raise InvalidArgument("no verify round ran: decode more rounds, or a longer trace")
    proposed = int(outcome.proposed[act].sum())
    accepted = int(acc.sum())
    emitted = accepted + rounds
    if emitted != int(outcome.lengths.sum()):
        raise InvalidArgument(f"decode outcome is inconsistent: {emitted} tokens by the round "
                              f"counts, {int(outcome.lengths.sum())} written")
    steps = outcome.steps
    per_position = tuple(float((acc > j).mean()) for j in range(steps))
    histogram = tuple(int(v) for v in np.bincount(acc, minlength=steps + 1)[: steps + 1])
    outputs = outcome.draft_outputs
    return AcceptanceMetrics(
        rounds=rounds, emitted_tokens=emitted, proposed_tokens=proposed, accepted_tokens=accepted,
        accept_length=emitted / rounds, accept_rate=accepted / proposed if proposed else None,
        per_position=per_position, histogram=histogram, drafted_per_emitted=proposed / emitted,
        invalid_outputs=outcome.invalid_outputs, draft_outputs=outputs,
        invalid_output_rate=outcome.invalid_outputs / outputs if outputs else 0.0)


def per_sequence_accept_length(outcome) -> np.ndarray:
    """``[sequences]`` accept length of each sequence (NaN where no round ran, for masking)."""
    rounds = outcome.active.sum(1)
    acc = np.where(outcome.active, outcome.accepted, 0).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(rounds > 0, 1.0 + acc / np.maximum(rounds, 1), np.nan)


def round_offsets(outcome) -> list:
    """For each sequence, the in-round offset (0 = first token of its round) of every emitted
    token, in emission order: the grouping of the sampling statistic."""
    out = []
    for b in range(outcome.accepted.shape[0]):
        a = outcome.accepted[b][outcome.active[b]]
        out.append(np.concatenate([np.arange(n + 1) for n in a]) if a.size else np.zeros(0, np.int64))
    return out
